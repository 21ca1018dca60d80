"""Replaying a lesson: the :class:`~specdec_core.lessons.link.LessonState` a session stands
at, a fresh session driven back to a state (the same seeded draws give the same drafts,
verdicts and KV table), and undo as "replay to one step earlier".

One path for both verification shapes: a state with ``tree`` set replays a
:class:`~specdec_core.engine.tree.session.TreeSession` (propose → verify → commit, no edits),
otherwise a :class:`~specdec_core.engine.chain.session.SpeculativeSession`; :func:`step_back` is the
same function for both (a tree round has no edits, so it steps back one phase).

Pure module: no Streamlit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from specdec_core.core.errors import ConfigError, SpecDecError
from specdec_core.core.inputs import MAX_GAMMA, SessionConfig, encode_prompt
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import PenaltyConfig, make_processors
from specdec_core.core.trace_json import to_jsonable
from specdec_core.drafters import make_named_drafter
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.rounds import check_grammar_drafter
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState, Problem

Session = SpeculativeSession | TreeSession
log = logging.getLogger("specdec.replay")
#: Most forwards one replay may run (a round costs one draft forward per drafted level,
#: γ for a chain, the depth for a tree, + 1 target forward): a link, a trace file or step
#: back can ask for 200 rounds at γ = 8 (≈ 1,800 forwards, 5–13 s of server time on 2
#: cores); past this the replay stops at the last whole round that fits, with a
#: :class:`Problem` (``replay_capped``). 256 ≈ 51 rounds at γ = 4, 28 at γ = 8.
MAX_REPLAY_FORWARDS = 256


TREE_BUDGET = 12  # nodes per tree of a tree lesson (the step page's, so a link replays it)


def replay_forwards(state: LessonState) -> int:
    """The forwards replaying ``state`` costs at most: (draft forwards + 1) per round
    started; a chain drafts γ levels, a tree one forward per expanded node
    (:func:`tree_draft_forwards`); under the heuristic γ schedule γ may grow to
    ``MAX_GAMMA`` (``engine/schedule.py``)."""
    gamma = MAX_GAMMA if state.gamma_schedule == "heuristic" else state.gamma
    drafts = tree_draft_forwards(state.tree) if state.tree else gamma
    started = state.round + (0 if state.phase == "propose" else 1)
    return started * (drafts + 1)


def tree_draft_forwards(shape: tuple[int, ...], budget: int = TREE_BUDGET) -> int:
    """Draft forwards of one full tree of ``shape`` under ``budget`` nodes: the nodes
    :func:`~specdec_core.engine.tree.steps.draft_tree` expands (breadth first, one forward
    each, until the budget is spent). E.g. ``(2, 2, 1, 1)``: 1 + 2 + 4 + 2 = 9."""
    frontier, nodes, forwards = 1, 0, 0
    for k in shape:
        grown = 0
        for _ in range(frontier):
            if nodes >= budget:
                break
            forwards += 1
            grown += min(k, budget - nodes)
            nodes += min(k, budget - nodes)
        frontier = grown
    return forwards


def state_of(session: Session, base: LessonState, prompt: str) -> LessonState:
    """The position ``session`` (a chain or a tree session) stands at, on top of
    ``base``'s page, language, pair and drafter. ``prompt`` is the text the session's
    prompt came from; committed tokens beyond it that were made under other settings go
    into ``cont``. A tree session sets ``tree`` to its shape (and has no edits)."""
    made: list[tuple[int, int, int]] = []
    tree: tuple[int, ...] = ()
    if isinstance(session, TreeSession):
        tree = tuple(session.shape)
    else:
        made = [
            (r.round_index, e.position, e.new_token.id) for r in session.history for e in r.edits
        ]
        made += [(session.round_index, e.position, e.new_token.id) for e in session.current_edits]
    cont = tuple(session.ids[session.prompt_len : _start_len(session)])
    return replace(
        base.with_config(session.config),
        prompt=prompt,
        cont=cont,
        round=len(session.history),
        phase="propose" if session.phase == "finished" else session.phase,
        edits=tuple(made),
        tree=tree,
    )


def _start_len(session: Session) -> int:
    """How many ids the session started from (prompt + carried-over committed tokens)."""
    appended = sum(len(r.record.appended) for r in session.history)
    return len(session.ids) - appended


@dataclass
class Replay:
    """A replayed session (``None`` when the link's prompt could not start one: the caller
    starts from its own default; a :class:`TreeSession` when the state reached names a
    tree), the state it really reached, and what was dropped."""

    session: Session | None
    state: LessonState
    problems: list[Problem]


def replay(pair: ModelPair, state: LessonState) -> Replay:
    """Run ``state``'s steps on ``pair`` from a fresh session.

    Whatever cannot be done is dropped, with a :class:`Problem`: a prompt that does not
    fit (no session: the caller starts from its default prompt), an edit whose token id
    is outside the vocabulary or whose position the round did not draft, rounds beyond
    the end of the text, carried-over tokens that do not fit, a tree the settings cannot
    draft (the state replays as a chain), a grammar that cannot run
    (:func:`grammar_problem`: the state replays without it) and any edit of a tree state
    (a tree has none).
    Past :data:`MAX_REPLAY_FORWARDS` the replay stops at the last whole round that fits
    (``replay_capped``). Never raises: an unexpected error (a bug, a crafted state no
    check foresaw) is logged and gives no session, with the problem ``replay_failed``.
    """
    try:
        return _replay(pair, state)
    except Exception:  # noqa: BLE001 - a link or a file must never break the page
        log.exception("replay failed")
        cleared = replace(LessonState(), lang=state.lang, page=state.page, pair=state.pair)
        return Replay(None, cleared, [Problem("replay_failed")])


def _replay(pair: ModelPair, state: LessonState) -> Replay:
    problems: list[Problem] = []
    if replay_forwards(state) > MAX_REPLAY_FORWARDS:
        levels = replay_forwards(replace(state, round=0, phase="verify")) - 1
        fits = MAX_REPLAY_FORWARDS // (levels + 1)  # rounds started, each whole
        kept = tuple(e for e in state.edits if e[0] < fits)
        state = replace(state, round=fits - 1, phase="commit", edits=kept)
        problems.append(Problem("replay_capped", {"round": fits, "forwards": MAX_REPLAY_FORWARDS}))
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
        if config.grammar is not None and grammar_problem(pair, config, state.drafter, full, ids):
            problems.append(Problem("bad_value", {"name": "grammar"}))
            state, config = replace(state, grammar=()), replace(config, grammar=None)
        session: Session | None = None
        if state.tree:
            try:
                session = TreeSession(
                    pair, full, config, drafter, state.tree, TREE_BUDGET, prompt_len=len(ids)
                )
            except ConfigError:  # e.g. a greedy draft method at T > 0: replay the chain
                problems.append(Problem("bad_value", {"name": "tree"}))
                state = replace(state, tree=())
                drafter = make_named_drafter(pair, state.drafter)
        if session is None:
            session = SpeculativeSession(pair, full, config, drafter, prompt_len=len(ids))
    except SpecDecError as exc:
        problems.append(Problem("prompt_dropped", {"reason": exc.code}))
        return Replay(None, replace(state, prompt="", cont=(), round=0, edits=()), problems)
    if isinstance(session, TreeSession):  # a tree round has no edits: each is dropped
        for r, pos, tok in state.edits:
            problems.append(Problem("edit_dropped", {"round": r + 1, "pos": pos, "token": tok}))
        state = replace(state, edits=())
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
