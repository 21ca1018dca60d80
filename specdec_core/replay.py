"""Replaying a lesson: the :class:`~specdec_core.lesson_link.LessonState` a session stands
at, a fresh session driven back to a state (the same seeded draws give the same drafts,
verdicts and KV table), and undo as "replay to one step earlier".

Pure module: no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .drafters import make_named_drafter
from .errors import SpecDecError
from .inputs import encode_prompt
from .lesson_link import LessonState, Problem
from .models import ModelPair
from .session import SpeculativeSession
from .trace import to_jsonable


def state_of(session: SpeculativeSession, base: LessonState, prompt: str) -> LessonState:
    """The position ``session`` stands at, on top of ``base``'s page, language, pair and
    drafter. ``prompt`` is the text the session's prompt came from; committed tokens
    beyond it that were made under other settings go into ``cont``."""
    made = [(r.round_index, e.position, e.new_token.id) for r in session.history for e in r.edits]
    made += [(session.round_index, e.position, e.new_token.id) for e in session.current_edits]
    cont = tuple(session.ids[session.prompt_len : _start_len(session)])
    return replace(
        base.with_config(session.config), prompt=prompt, cont=cont, round=len(session.history),
        phase="propose" if session.phase == "finished" else session.phase, edits=tuple(made),
    )  # fmt: skip


def _start_len(session: SpeculativeSession) -> int:
    """How many ids the session started from (prompt + carried-over committed tokens)."""
    appended = sum(len(r.record.appended) for r in session.history)
    return len(session.ids) - appended


@dataclass
class Replay:
    """A replayed session (``None`` when the link's prompt could not start one: the caller
    starts from its own default), the state it really reached, and what was dropped."""

    session: SpeculativeSession | None
    state: LessonState
    problems: list[Problem]


def replay(pair: ModelPair, state: LessonState) -> Replay:
    """Run ``state``'s steps on ``pair`` from a fresh session.

    Whatever cannot be done is dropped, with a :class:`Problem`: a prompt that does not
    fit (no session: the caller starts from its default prompt), an edit whose token id
    is outside the vocabulary or whose position the round did not draft, rounds beyond
    the end of the text, carried-over tokens that do not fit.
    """
    problems: list[Problem] = []
    config = state.config().validate(pair.vocab_size)
    try:
        ids = encode_prompt(pair, state.prompt)
        full = ids + [t for t in state.cont if t < pair.vocab_size]
        if len(full) >= pair.context_length:
            full = ids
            problems.append(Problem("cont_dropped"))
        elif len(full) < len(ids) + len(state.cont):
            problems.append(Problem("cont_dropped"))
        drafter = make_named_drafter(pair, state.drafter)
        session = SpeculativeSession(pair, full, config, drafter, prompt_len=len(ids))
    except SpecDecError as exc:
        problems.append(Problem("prompt_dropped", {"reason": exc.code}))
        return Replay(None, replace(state, prompt="", cont=(), round=0, edits=()), problems)
    edits: dict[int, list[tuple[int, int]]] = {}
    for r, pos, tok in state.edits:
        edits.setdefault(r, []).append((pos, tok))
    kept: list[tuple[int, int, int]] = []
    for r in range(state.round + 1):
        last = r == state.round
        if last and state.phase == "propose":
            break
        if session.phase == "finished":
            problems.append(Problem("round_beyond_end", {"round": r + 1}))
            break
        session.propose()
        for pos, tok in edits.pop(r, []):
            try:
                session.edit_draft(pos, tok)
                kept.append((r, pos, tok))
            except SpecDecError:
                problems.append(Problem("edit_dropped", {"round": r + 1, "pos": pos, "token": tok}))
        if last and state.phase == "verify":
            break
        session.verify()
        if last:
            break
        session.commit()
    for r, items in sorted(edits.items()):  # edits of rounds that were never reached
        for pos, tok in items:
            problems.append(Problem("edit_dropped", {"round": r + 1, "pos": pos, "token": tok}))
    phase = "propose" if session.phase == "finished" else session.phase
    used = replace(state, round=len(session.history), phase=phase, edits=tuple(kept))
    return Replay(session, used, problems)


def step_back(state: LessonState) -> LessonState | None:
    """The state one step earlier: the last edit of the round in flight, else the last
    phase (verify → proposed, proposed → before propose, before propose → the previous
    round verified). ``None`` at the very start."""
    current = [e for e in state.edits if e[0] == state.round]
    if state.phase == "verify" and current:
        last = len(state.edits) - 1 - state.edits[::-1].index(current[-1])
        return replace(state, edits=state.edits[:last] + state.edits[last + 1 :])
    if state.phase == "commit":
        return replace(state, phase="verify")
    if state.phase == "verify":
        return replace(state, phase="propose")
    if state.round > 0:
        return replace(state, round=state.round - 1, phase="commit")
    return None


def timeless_json(obj: object) -> object:
    """``to_jsonable(obj)`` without wall-clock timings (keys ending in ``_ms``): the only
    values a replay changes, so two replays of one state compare equal on this."""
    return _strip_ms(to_jsonable(obj))


def _strip_ms(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _strip_ms(v) for k, v in obj.items() if not k.endswith("_ms")}
    if isinstance(obj, list):
        return [_strip_ms(v) for v in obj]
    return obj
