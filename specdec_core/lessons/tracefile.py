"""Export and import a step-through session: a trace JSON (the lesson state that replays
it, the prompt ids and every round's full trace through ``core/trace_json.py``'s round trip) and a
CSV of the checks table.

An uploaded file is untrusted: its size is bounded before parsing, its shape is checked by
the typed round trip (``from_jsonable``), and a malformed file raises
:class:`TraceFileError` with a code the UI translates. Pure module: no Streamlit.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, fields
from typing import Any

from specdec_core.core.errors import SpecDecError
from specdec_core.core.trace_json import from_jsonable, to_jsonable
from specdec_core.core.untrusted_json import load_json
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.session import Session
from specdec_core.engine.tree.trace import TreeRoundTrace
from specdec_core.lessons.link import LessonState, state_json
from specdec_core.lessons.link_fields import BAD, check_field

FORMAT = "specdec-lab-trace"
VERSION = 1
MAX_TRACE_BYTES = 5_000_000  # = server.maxUploadSize (MB); ≈ 35 KB a round at γ = 8
CSV_COLUMNS = (
    "round",
    "position",
    "token_id",
    "token_text",
    "p",
    "q",
    "overlap",
    "accept_prob",
    "u",
    "status",
    "edited",
    "target_argmax",
    "round_committed",  # the round's commit ran (not: this draft was committed; see status)
)


class TraceFileError(SpecDecError, ValueError):
    """An uploaded trace file that is too large, not JSON, or not a SpecDec Lab trace."""

    default_code = "trace_malformed"


@dataclass(frozen=True)
class TraceFile:
    """A parsed trace file: the pair it was made on, the lesson state (``None`` when the
    file's state is unusable), prompt ids and boundary, and the rounds."""

    pair: str
    state: LessonState | None
    prompt_ids: tuple[int, ...]
    prompt_len: int
    rounds: tuple[RoundTrace, ...]


def export_json(session: Session, state: LessonState) -> str:
    """The trace JSON of ``session`` (``state`` is the lesson state that replays it)."""
    start = len(session.ids) - sum(len(r.record.appended) for r in session.history)
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "pair": session.pair.name,
            "lesson": state_json(state),
            "prompt_ids": session.ids[:start],
            "prompt_len": session.prompt_len,
            "rounds": to_jsonable(session.history),
        },
        ensure_ascii=False,
    )


def export_tree_json(session: Session, state: LessonState) -> str:
    """The trace JSON of a tree session (``state``, with ``tree`` set, replays it): the
    same envelope as :func:`export_json` plus ``"verify": "tree"`` and the shape;
    ``rounds`` are the finished rounds, each flat with every value once
    (:func:`tree_round_json`), ``in_flight`` the round proposed or verified but not
    committed (its tree view and, once verified, its record), else ``null``. Tree traces
    are for reading; :func:`parse` refuses them (``trace_tree``: open the lesson link
    instead)."""
    start = len(session.ids) - sum(len(r.record.appended) for r in session.history)
    view = session.steps.tree_view()
    flight = (
        None
        if view is None
        else {"tree": to_jsonable(view), "record": to_jsonable(session.current_record)}
    )
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "verify": "tree",
            "pair": session.pair.name,
            "lesson": state_json(state),
            "shape": list(session.steps.shape),
            "prompt_ids": session.ids[:start],
            "prompt_len": session.prompt_len,
            "rounds": [tree_round_json(r) for r in session.history],
            "in_flight": flight,
        },
        ensure_ascii=False,
    )


def tree_round_json(r: TreeRoundTrace) -> dict[str, Any]:
    """One finished tree round as the trace file writes it, flat, each value once: the
    tree after verify (final node states), the verify forward's mask, the compaction as
    applied, the record, the timings (ms), the stop, and three KV tables: ``kv_before``
    (the committed ids before the round), ``kv_verified`` (right after the verify forward
    and the walk) and ``kv_after`` (rolled back to the new committed ids)."""
    return {
        "round_index": r.round_index,
        "tree": to_jsonable(r.verify.tree),
        "mask": to_jsonable(r.propose.mask),
        "compaction": to_jsonable(r.commit.compaction),
        "record": to_jsonable(r.record),
        "draft_ms": r.propose.draft_ms,
        "verify_ms": r.verify.verify_ms,
        "stop_reason": r.commit.stop_reason,
        "kv_before": to_jsonable(r.propose.kv_before),
        "kv_verified": to_jsonable(r.verify.kv_after),
        "kv_after": to_jsonable(r.commit.kv_after),
    }


def export_csv(session: Session) -> str:
    """The checks table of every verified round, one row per drafted position: the
    finished rounds (``round_committed`` = ``True``) and, in phase ``commit``, the round
    on screen that is verified but not committed yet (``round_committed`` = ``False``: its
    verdicts are final, its tokens not yet appended). Whether a draft itself was committed
    is its ``status`` (``accepted``); a rejected row of a committed round has
    ``round_committed`` = ``True``. Nothing reads this CSV back (import takes the JSON)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    rounds = [(r.round_index, r.verify, True) for r in session.history]
    if session.steps.current_verify is not None:
        rounds.append((session.round_index, session.steps.current_verify, False))
    for index, verify, committed in rounds:
        for c in verify.checks:
            writer.writerow(
                [
                    index + 1,
                    c.position,
                    c.token.id,
                    c.token.text,
                    c.p,
                    c.q,
                    c.overlap,
                    c.accept_prob,
                    "" if c.u is None else c.u,
                    c.status,
                    c.edited,
                    c.target_argmax.id,
                    committed,
                ]
            )
    return out.getvalue()


def parse(data: bytes) -> TraceFile:
    """Read an uploaded trace file. Never raises anything but :class:`TraceFileError`:
    the nesting is bounded before parsing, text must be valid Unicode, numbers finite
    (:func:`~specdec_core.core.untrusted_json.load_json`), and any other failure of a crafted file
    (a ``TypeError`` deep in the typed round trip, an ``OverflowError``) becomes
    ``trace_malformed``.

    Raises:
        TraceFileError: ``trace_too_large`` (over :data:`MAX_TRACE_BYTES`),
            ``trace_malformed`` (not JSON, nested deeper than 16 levels, a lone surrogate,
            ``1e400``, not this format, or a field of the wrong shape), ``trace_version``
            (another version), ``trace_tree`` (a tree trace: import is for chain traces).
            Its ``why`` parameter names the reason (``not_utf8``, ``not_json``, ``nested``,
            ``not_trace``, ``version``, ``missing_field`` / ``bad_field`` with ``field``),
            which the UI translates (``err_why_<why>``).
    """
    if len(data) > MAX_TRACE_BYTES:
        raise TraceFileError(
            f"the file has {len(data)} bytes; at most {MAX_TRACE_BYTES} are accepted",
            "trace_too_large",
            limit_mb=MAX_TRACE_BYTES // 1_000_000,
        )
    try:
        doc = load_json(bytes(data))
    except ValueError as exc:
        text = str(exc)
        why = (
            "nested"
            if "nested" in text
            else "not_utf8"
            if isinstance(exc, UnicodeError)
            else "not_json"
        )
        raise TraceFileError(f"the file is not JSON ({text})", why=why) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise TraceFileError("the file is not a SpecDec Lab trace", why="not_trace")
    if doc.get("verify") == "tree":
        raise TraceFileError("a tree trace cannot be imported", "trace_tree")
    if doc.get("version") != VERSION:
        shown = str(doc.get("version"))[:12]
        raise TraceFileError(
            f"trace version {shown!r} is not {VERSION}",
            "trace_version",
            why="version",
            found=shown,
            expected=VERSION,
        )
    readers = (
        ("rounds", lambda v: tuple(from_jsonable(RoundTrace, r) for r in v)),
        ("prompt_ids", lambda v: tuple(int(t) for t in v)),
        ("prompt_len", int),
        ("pair", lambda v: str(v)[:40]),
    )
    read: dict[str, object] = {}
    for name, reader in readers:
        if name not in doc:
            raise TraceFileError(
                f"the trace has no field {name!r}", why="missing_field", field=name
            )
        try:
            read[name] = reader(doc[name])
        except Exception as exc:  # noqa: BLE001 - any failure of a crafted file: one message
            raise TraceFileError(
                f"the trace's field {name!r} is malformed", why="bad_field", field=name
            ) from exc
    rounds, prompt_ids = read["rounds"], read["prompt_ids"]
    prompt_len, pair = read["prompt_len"], read["pair"]
    assert isinstance(prompt_len, int) and isinstance(pair, str)
    assert isinstance(rounds, tuple) and isinstance(prompt_ids, tuple)
    try:
        state = _state(doc.get("lesson"), pair)
    except Exception as exc:  # noqa: BLE001 - any failure of a crafted file: one message
        raise TraceFileError(
            "the trace's field 'lesson' is malformed", why="bad_field", field="lesson"
        ) from exc
    if not 1 <= prompt_len <= len(prompt_ids):
        raise TraceFileError(
            "the trace's prompt length does not fit its prompt ids",
            why="bad_field",
            field="prompt_len",
        )
    return TraceFile(pair, state, prompt_ids, prompt_len, rounds)


def _state(data: object, pair: str) -> LessonState | None:
    """The file's lesson state, every field validated as a link's is; ``None`` if any
    field is bad (the file is then shown read-only)."""
    if not isinstance(data, dict):
        return None
    values = {}
    for f in fields(LessonState):
        if f.name in data:
            if f.name == "lang":
                value = data[f.name] if data[f.name] in ("en", "zh") else None
            else:
                value = check_field(f.name, data[f.name], [pair])
            if value is None or value is BAD:
                return None
            values[f.name] = value
    return LessonState(**values)
