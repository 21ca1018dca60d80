"""The questions a teacher asks about the round on screen, built from the engine's views,
and their real outcomes, read from the verified round (never guessed).

Three kinds about the CURRENT chain round, asked after ① Propose and before ② Verify:

* ``accept`` — "Will position k be accepted?": choices yes / no; params ``r`` (the round,
  from 0), ``k`` (1..γ'). Outcome: the check's status (``accepted`` → yes; ``rejected`` /
  ``discarded`` → no; ``cut``, a stop before it was committed → no outcome).
* ``correction`` — "Which token will the target add at the end of round r?": choices the
  target's top candidates at the drafted positions
  (:meth:`~specdec_core.engine.chain.session.ChainSteps.target_preview`: each
  position's argmax first, the correction a rejection there gives under greedy
  verification), then "another token"; params ``r`` and ``ids`` (the candidates' token
  ids, comma separated). Outcome: the round's correction or bonus token (a round a stop
  cut short has none: no outcome).
* ``commit_count`` — "How many tokens will round r commit?": choices ``1`` .. ``γ'+1``;
  params ``r``, ``g`` (γ'). Outcome: ``len(record.appended)``.

And ``chapter``: a Lessons checkpoint's own question (choice or token checkpoints), params
``cid`` and ``chapter``; choices the checkpoint's option labels; outcome the index of its
answer (computed by the chapter on the real pair).

Labels are at most :data:`MAX_LABEL` characters (a token piece with whitespace made
visible, ``ui/figures/common.visible_token``); 2..8 choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.session import Session
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import Check

KINDS = ("accept", "correction", "commit_count")
MAX_LABEL = 40
MAX_CHOICES = 8
CANDIDATES = 5  # token candidates of a correction question (+ "another token")


@dataclass(frozen=True)
class Draft:
    """A question before it is asked: ``kind``, ``params`` (string pairs), ``choices``
    (labels in the teacher's language)."""

    kind: str
    params: tuple[tuple[str, str], ...]
    choices: tuple[str, ...]


def label(text: str) -> str:
    """A choice label cut to :data:`MAX_LABEL` characters."""
    text = " ".join(str(text).split()) or "∅"
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def ask_refusal(session: object) -> str | None:
    """Why a round question cannot be asked now (a string key), else ``None``: only a
    chain round, after Propose and before Verify, with at least one draft."""
    if getattr(session, "unit", None) != "drafts":  # a chain session
        return "live_ask_chain_only"
    if session.phase != "verify":
        return "live_ask_after_propose"
    if not session.steps.drafts:
        return "live_ask_no_drafts"
    return None


def round_question(session: Session, kind: str, k: int = 1) -> Draft:
    """A question about ``session``'s proposed round (see the module docstring).

    Raises:
        ValueError: an unknown ``kind``, ``k`` outside ``1..γ'``, or a session not
            between Propose and Verify.
    """
    if ask_refusal(session) is not None:
        raise ValueError("a round question needs a proposed chain round")
    r, gamma = session.round_index, len(session.steps.drafts)
    if kind == "accept":
        if not 1 <= k <= gamma:
            raise ValueError(f"position {k} outside 1..{gamma}")
        return Draft(kind, (("r", str(r)), ("k", str(k))), (t("live_yes"), t("live_no")))
    if kind == "correction":
        rows = session.steps.target_preview(top_n=3)
        ids: list[int] = []
        for rank in range(3):
            for row in rows:
                if len(ids) < CANDIDATES and rank < len(row) and row[rank].id not in ids:
                    ids.append(row[rank].id)
        labels = [label(visible_token(session.token(i))) for i in ids] + [t("live_other")]
        params = (("r", str(r)), ("ids", ",".join(str(i) for i in ids)))
        return Draft(kind, params, tuple(labels))
    if kind == "commit_count":
        choices = tuple(str(n) for n in range(1, gamma + 2))[:MAX_CHOICES]
        return Draft(kind, (("r", str(r)), ("g", str(gamma))), choices)
    raise ValueError(f"unknown question kind {kind!r}")


def chapter_question(check: Check, chapter: int) -> Draft | None:
    """A Lessons checkpoint as a class question (``None`` for a number checkpoint or one
    with fewer than 2 or more than :data:`MAX_CHOICES` options)."""
    if check.kind == "number" or not 2 <= len(check.options) <= MAX_CHOICES:
        return None
    choices = tuple(label(check.label(o)) for o in check.options)
    return Draft("chapter", (("cid", check.cid), ("chapter", str(chapter))), choices)


def chapter_outcome(check: Check) -> int | None:
    """The index of the checkpoint's answer among its options."""
    options = list(check.options)
    return options.index(check.answer) if check.answer in options else None


def the_round(session: Session, r: int) -> RoundTrace | tuple | None:
    """Round ``r`` of ``session`` once verified: its :class:`RoundTrace` (committed) or
    ``(verify, record)`` (verified, not committed yet); ``None`` before its Verify (or a
    round the session does not have, e.g. after a reset)."""
    if r < len(session.history):
        return session.history[r]
    if session.round_index == r and session.steps.current_verify is not None:
        return (session.steps.current_verify, session.current_record)
    return None


def outcome(session: Session, params: Sequence[tuple[str, str]], kind: str) -> int | None:
    """The index of the real outcome of a round question among its choices, read from
    the verified round (``None`` when the round has no such outcome: a stop cut it, or
    the round is not verified in this session)."""
    p = dict(params)
    found = the_round(session, int(p["r"]))
    if found is None:
        return None
    verify, record = (found.verify, found.record) if isinstance(found, RoundTrace) else found
    if kind == "accept":
        k = int(p["k"])
        if k > len(record.statuses):
            return None
        status = record.statuses[k - 1]
        return {"accepted": 0, "rejected": 1, "discarded": 1}.get(status)
    if kind == "correction":
        if record.kind not in ("correction", "bonus") or not record.appended:
            return None
        ids = [int(i) for i in p["ids"].split(",") if i]
        last = record.appended[-1]
        return ids.index(last) if last in ids else len(ids)
    if kind == "commit_count":
        n = len(record.appended)
        return n - 1 if 1 <= n <= int(p["g"]) + 1 else None
    return None


def earlier_round(session: object, params: Sequence[tuple[str, str]]) -> bool:
    """Whether a round question is about another round than the one ``session`` is at (an
    earlier one, or a chain rebuilt by a switch to the tree and back): a new question may
    replace it."""
    r = round_of(params)
    return r != getattr(session, "round_index", r) or getattr(session, "unit", "") != "drafts"


def round_of(params: Sequence[tuple[str, str]]) -> int:
    """The round a round question is about (from 0; -1: none)."""
    return _int(dict(params).get("r"), -1)


def shown_choices(kind: str, choices: Sequence[str]) -> list[str]:
    """The choices of a question in the READER's language: the fixed ones are translated
    by their place (``accept``: yes / no; ``correction``: the last, "another token"),
    whatever language the teacher asked in; token pieces and numbers stay as stored."""
    labels = list(choices)
    if kind == "accept" and len(labels) == 2:
        return [t("live_yes"), t("live_no")]
    if kind == "correction" and labels:
        return labels[:-1] + [t("live_other")]
    return labels


def question_text(kind: str, params: Sequence[tuple[str, str]]) -> str:
    """The question in the reader's language (markdown-safe: only numbers from the
    params are put in; a chapter question's text comes from the reader's own
    checkpoint, see ``follow.py``)."""
    p = dict(params)
    r = _int(p.get("r"), 0) + 1
    if kind == "accept":
        return t("live_q_accept", k=_int(p.get("k"), 1), r=r)
    if kind == "correction":
        return t("live_q_correction", r=r)
    if kind == "commit_count":
        return t("live_q_commit_count", r=r)
    return t("live_q_chapter", n=_int(p.get("chapter"), 1))


def _int(value: object, default: int) -> int:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() and len(text) < 6 else default
