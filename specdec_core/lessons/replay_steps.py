"""Driving a session through a lesson state's steps: the step loop shared by a fresh replay
and an incremental one (:func:`run_steps`, what :func:`~specdec_core.lessons.replay.replay`
and :func:`~specdec_core.lessons.replay.advance` both run), the :class:`Replay` it returns,
and why a state's grammar cannot run (:func:`grammar_problem`). Pure module: no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specdec_core.core.errors import ConfigError, SpecDecError
from specdec_core.core.models import ModelPair
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.processors import make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.rounds import check_grammar_drafter
from specdec_core.engine.session import Session
from specdec_core.lessons.link import LessonState, Problem


@dataclass
class Replay:
    """A replayed session (``None`` when the link's prompt could not start one: the caller
    starts from its own default; a :class:`TreeSession` when the state reached names a
    tree), the state it really reached, and what was dropped."""

    session: Session | None
    state: LessonState
    problems: list[Problem]


def run_steps(
    session: Session,
    state: LessonState,
    edits: dict[int, list[tuple[int, int]]],
    start: int,
    kept: list[tuple[int, int, int]],
    problems: list[Problem],
) -> Replay:
    """The step loop of a replay, shared by :func:`~specdec_core.lessons.replay.replay`
    (from a fresh session, ``start`` 0) and :func:`~specdec_core.lessons.replay.advance`
    (from a session standing in round ``start``): run round ``start`` .. ``state.round``
    up to ``state.phase``, skipping the steps the session already took in round ``start``
    (its ``phase`` says which), applying
    ``edits`` (round → ``[(position, token id)]``, popped as used) after each propose.
    ``kept``: the edits already applied (appended to); ``problems``: appended to (an edit
    that fails, rounds beyond the end, edits of rounds never reached)."""
    for r in range(start, state.round + 1):
        last = r == state.round
        if last and state.phase == "propose":
            break
        if session.phase == "finished":
            problems.append(Problem("round_beyond_end", {"round": r + 1}))
            break
        if session.phase == "propose":
            session.propose()
        for pos, tok in edits.pop(r, []):
            try:
                session.steps.edit_draft(pos, tok)
                kept.append((r, pos, tok))
            except SpecDecError:
                problems.append(Problem("edit_dropped", {"round": r + 1, "pos": pos, "token": tok}))
        if last and state.phase == "verify":
            break
        if session.phase == "verify":
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


def grammar_problem(
    pair: ModelPair, config: SessionConfig, drafter: str, full: list[int], ids: list[int]
) -> str | None:
    """Why the grammar of a replayed state cannot run (a code: it does not compile, allows
    nothing, is refused with the drafter, or the carried-over text breaks it), or
    ``None``; the replay then drops the grammar alone (``bad_value``), not the prompt."""
    try:
        check_grammar_drafter(drafter, config.grammar)
        make_processors(
            pair.tokenizer, pair.vocab_size, PenaltyConfig(), config.grammar, len(ids), full
        )
    except ConfigError as exc:
        return exc.code
    return None
