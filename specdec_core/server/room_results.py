"""A live class's results: per question the answers per choice of the first vote and of
the revote, the right choice and the share right; no names. Both room stores keep one
*entry* per question the same way (compact JSON, :func:`entry_json`; the Redis store's
Lua writes the same keys) and :func:`result_of` reads it back; :func:`csv_text` writes
the table a teacher downloads.

An entry: ``q`` (the question as asked, :func:`~specdec_core.server.room_types.question_json`),
``revealed`` (``"0"``/``"1"``), ``correct`` (``""`` for none, else the index),
``vote`` (``"1"``/``"2"``), ``a`` (the choice indices of the vote in progress), ``f``
(those of the first vote once the question is at its revote). Peer instruction: Mazur,
*Peer Instruction* (1997); Crouch & Mazur, Am. J. Phys. 69 (2001) — vote, discuss, revote.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

from specdec_core.server.room_types import (
    Question,
    RoomError,
    counts_of,
    question_from_json,
    question_json,
)

MAX_RESULTS = 100  # questions a room keeps (the oldest are dropped)
MIN_COUNTDOWN_S, MAX_COUNTDOWN_S = 5, 600
CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads these as a formula


@dataclass(frozen=True)
class QuestionResult:
    """One question's result: ``question`` (as asked: ``qid``, ``kind``, ``params``,
    ``choices``), ``correct`` (the revealed index, ``None`` before the reveal or when none
    is right), ``first`` (answers per choice of the first vote), ``revote`` (of the
    revote, ``None`` when there was none)."""

    question: Question
    correct: int | None
    first: tuple[int, ...]
    revote: tuple[int, ...] | None


def share_right(counts: Sequence[int] | None, correct: int | None) -> float | None:
    """The share of answers on ``correct`` (0..1); ``None`` without answers or a right
    choice."""
    if counts is None or correct is None or not 0 <= correct < len(counts) or not sum(counts):
        return None
    return counts[correct] / sum(counts)


def countdown(duration_s: object) -> int | None:
    """A countdown in whole seconds (:data:`MIN_COUNTDOWN_S`..:data:`MAX_COUNTDOWN_S`), or
    ``None`` for none; else ``room_vote``."""
    if duration_s is None:
        return None
    ok = isinstance(duration_s, int) and not isinstance(duration_s, bool)
    if not ok or not MIN_COUNTDOWN_S <= duration_s <= MAX_COUNTDOWN_S:
        raise vote_error()
    return duration_s


def vote_error() -> RoomError:
    return RoomError("room_vote", low=MIN_COUNTDOWN_S, high=MAX_COUNTDOWN_S)


def entry_json(question: Question, answers: Sequence[int], first: Sequence[int]) -> str:
    """The entry of ``question`` (as it stands) with the choice indices of its vote in
    progress (``answers``) and of its first vote (``first``, at a revote)."""
    data = {
        "q": question_json(question),
        "revealed": "1" if question.revealed else "0",
        "correct": "" if question.correct is None else str(question.correct),
        "vote": str(question.vote),
        "a": [int(c) for c in answers],
        "f": [int(c) for c in first],
    }
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def result_of(text: str) -> QuestionResult:
    """The :class:`QuestionResult` of an entry (the question validated again; an empty
    Lua table arrives as ``{}``)."""
    data = json.loads(text)
    question = question_from_json(data["q"])
    size = len(question.choices)
    listed = lambda v: [int(c) for c in v] if isinstance(v, list) else []  # noqa: E731
    answers, first = counts_of(listed(data["a"]), size), counts_of(listed(data["f"]), size)
    correct = str(data.get("correct", ""))
    shown = data.get("revealed") == "1" and correct.isdigit() and int(correct) < size
    revote = str(data.get("vote", "1")) == "2"
    return QuestionResult(
        question=question,
        correct=int(correct) if shown else None,
        first=first if revote else answers,
        revote=answers if revote else None,
    )


def _cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text (a leading ``=``, ``+``, ``-``, ``@`` gets a
    ``'``: OWASP's CSV injection advice)."""
    text = str(value)
    return "'" + text if text.startswith(CSV_FORMULA) else text


def csv_text(
    results: Sequence[QuestionResult],
    header: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[Sequence[str]],
) -> str:
    """The results as CSV: one row per question and choice — question number, question
    text, choice number, choice, right (1/0/empty), first vote, revote, share right of
    the first vote and of the revote (%, one decimal; empty when unknown). ``header``: the
    9 column names; ``texts`` / ``labels``: each question's text and choice labels in the
    reader's language."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([_cell(h) for h in header])
    pct = lambda x: "" if x is None else f"{100 * x:.1f}"  # noqa: E731
    for n, (res, text, shown) in enumerate(zip(results, texts, labels, strict=True), 1):
        first_share = pct(share_right(res.first, res.correct))
        revote_share = pct(share_right(res.revote, res.correct))
        for i, choice in enumerate(shown):
            right = "" if res.correct is None else int(i == res.correct)
            again = "" if res.revote is None else res.revote[i]
            row = [n, text, i + 1, choice, right, res.first[i], again, first_share, revote_share]
            writer.writerow([_cell(v) for v in row])
    return out.getvalue()
