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
from dataclasses import replace

from specdec_core.core.errors import ConfigError, SpecDecError
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import MAX_GAMMA, SessionConfig
from specdec_core.core.trace_json import to_jsonable
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.session import Session
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState, Problem
from specdec_core.lessons.link_fields import PHASES
from specdec_core.lessons.replay_steps import Replay, grammar_problem, run_steps

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
    started; a chain drafts γ levels, a tree at most one forward per expanded node
    (:func:`tree_draft_forwards`; a drafter that runs a whole depth in one forward runs
    fewer, of more rows); under the heuristic γ schedule γ may grow to
    ``MAX_GAMMA`` (``engine/schedule.py``)."""
    gamma = MAX_GAMMA if state.gamma_schedule == "heuristic" else state.gamma
    drafts = tree_draft_forwards(state.tree) if state.tree else gamma
    started = state.round + (0 if state.phase == "propose" else 1)
    return started * (drafts + 1)


def tree_draft_forwards(shape: tuple[int, ...], budget: int = TREE_BUDGET) -> int:
    """Draft forwards of one full tree of ``shape`` under ``budget`` nodes, counted one
    per node :func:`~specdec_core.engine.tree.round.draft_tree` expands (breadth first,
    until the budget is spent): the bound for a drafter that expands node by node.
    E.g. ``(2, 2, 1, 1)``: 1 + 2 + 4 + 2 = 9."""
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
    if session.unit == "tree":
        tree = tuple(session.steps.shape)
    else:
        made = [
            (r.round_index, e.position, e.new_token.id) for r in session.history for e in r.edits
        ]
        made += [
            (session.round_index, e.position, e.new_token.id) for e in session.steps.current_edits
        ]
    cont = tuple(session.ids[session.prompt_len : session.start_len])
    return replace(
        base.with_config(session.config),
        prompt=prompt,
        cont=cont,
        round=len(session.history),
        phase="propose" if session.phase == "finished" else session.phase,
        edits=tuple(made),
        tree=tree,
    )


def replay(pair: ModelPair, state: LessonState, config: SessionConfig | None = None) -> Replay:
    """Run ``state``'s steps on ``pair`` from a fresh session with ``config``'s settings
    (``None``: ``state.config()``). A page passes the settings its sidebar reports after a
    link seeded them, so the session is built from exactly those, with no second
    conversion; ``state``'s own settings are replaced by them
    (``state.with_config(config)``), so one source bounds the replay's cost and runs it.

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
        return _replay(pair, state, config)
    except Exception:  # noqa: BLE001 - a link or a file must never break the page
        log.exception("replay failed")
        cleared = replace(LessonState(), lang=state.lang, page=state.page, pair=state.pair)
        return Replay(None, cleared, [Problem("replay_failed")])


def _replay(pair: ModelPair, state: LessonState, config: SessionConfig | None) -> Replay:
    problems: list[Problem] = []
    if config is not None:
        state = state.with_config(config)
    if replay_forwards(state) > MAX_REPLAY_FORWARDS:
        levels = replay_forwards(replace(state, round=0, phase="verify")) - 1
        fits = MAX_REPLAY_FORWARDS // (levels + 1)  # rounds started, each whole
        kept = tuple(e for e in state.edits if e[0] < fits)
        state = replace(state, round=fits - 1, phase="commit", edits=kept)
        problems.append(Problem("replay_capped", {"round": fits, "forwards": MAX_REPLAY_FORWARDS}))
    config = (state.config() if config is None else config).validate(pair.vocab_size)
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
    if session.unit == "tree":  # a tree round has no edits: each is dropped
        for r, pos, tok in state.edits:
            problems.append(Problem("edit_dropped", {"round": r + 1, "pos": pos, "token": tok}))
        state = replace(state, edits=())
    edits: dict[int, list[tuple[int, int]]] = {}
    for r, pos, tok in state.edits:
        edits.setdefault(r, []).append((pos, tok))
    return run_steps(session, state, edits, 0, [], problems)


def advance(
    pair: ModelPair,
    session: Session,
    reached: LessonState,
    target: LessonState,
    config: SessionConfig | None = None,
) -> Replay | None:
    """Bring ``session``, standing at ``reached`` (:func:`state_of` of it, with the
    drafter it was made with), forward to ``target`` by running only the missing steps,
    or ``None`` when ``target`` is not reachable that way (the caller then replays
    ``target`` from a fresh session with :func:`replay`). ``config``: the settings as
    :func:`replay` takes them (``None``: ``target.config()``), replacing ``target``'s.

    Reachable: the same pair, prompt (the session's prompt ids are those of
    ``target.prompt``), carried-over tokens, settings (the validated
    :class:`SessionConfig` equals the session's), drafter, tree shape (and
    :data:`TREE_BUDGET`), the same edits in every round the session already proposed
    (the round in flight too, when it was proposed), ``(round, phase)`` of ``target`` at
    or after ``reached``'s, a grammar that runs, and no :data:`MAX_REPLAY_FORWARDS` cap
    on ``target``. Then the result equals ``replay(pair, target)`` in everything but
    wall-clock timings: the same session history and pending round, the same problems
    (edits dropped in later rounds, ``round_beyond_end``) and the same state reached:
    the draws of a round come from that round's own seeded streams, so running the steps
    after ``reached`` on this session is the fresh replay's loop from that point on (one
    loop, :func:`~specdec_core.lessons.replay_steps.run_steps`). Cost: the forwards of the
    missing steps only (≈ 20 ms of CPU a round on the embedded pair, against ≈ 20 ms ×
    rounds for a fresh replay).

    ``session`` is changed in place; on an exception (never expected) it is left
    part-way, so the caller must then replay afresh. Raises nothing itself on an
    unreachable target."""
    if config is not None:
        target = target.with_config(config)
    if not _reachable(pair, session, reached, target, config):
        return None
    proposed = reached.phase != "propose"  # the round in flight already has its drafts
    done = reached.round + (1 if proposed else 0)  # rounds whose edits are applied
    edits: dict[int, list[tuple[int, int]]] = {}
    for r, pos, tok in target.edits:
        if r >= done:
            edits.setdefault(r, []).append((pos, tok))
    applied = _by_round(reached.edits, done)  # equal to target's (checked), round order
    kept = [(r, pos, tok) for r in sorted(applied) for pos, tok in applied[r]]
    return run_steps(session, target, edits, reached.round, kept, [])


def _reachable(
    pair: ModelPair,
    session: Session,
    reached: LessonState,
    target: LessonState,
    config: SessionConfig | None,
) -> bool:
    """Whether :func:`advance` may run ``target``'s missing steps on ``session``."""
    fixed = {"round": 0, "phase": "propose", "edits": ()}
    if replace(reached, **fixed) != replace(target, **fixed) or target.pair != pair.name:
        return False  # prompt, cont, settings, drafter, tree shape, page and language
    if reached.phase not in PHASES or target.phase not in PHASES:
        return False
    if (target.round, PHASES.index(target.phase)) < (
        reached.round,
        PHASES.index(reached.phase),
    ):
        return False  # behind: a step back replays afresh
    if replay_forwards(target) > MAX_REPLAY_FORWARDS:
        return False  # the fresh replay applies its cap
    if bool(target.tree) != (session.unit == "tree") or (target.tree and target.edits):
        return False  # a tree's edits are dropped by the fresh replay, with problems
    if session.unit == "tree" and (
        tuple(session.steps.shape) != target.tree or session.steps.budget != TREE_BUDGET
    ):
        return False
    done = reached.round + (0 if reached.phase == "propose" else 1)
    if _by_round(reached.edits, done) != _by_round(target.edits, done):
        return False  # an edit of a round already proposed differs
    if any(e[0] >= done for e in reached.edits) or reached.round != len(session.history):
        return False  # reached is not what the session shows
    try:
        config = (target.config() if config is None else config).validate(pair.vocab_size)
        ids = encode_prompt(pair, target.prompt)
    except SpecDecError:
        return False
    if config != session.config or session.prompt_len != len(ids):
        return False
    if list(session.ids[: len(ids)]) != ids:
        return False
    if tuple(session.ids[len(ids) : session.start_len]) != target.cont:
        return False
    full = ids + list(target.cont)
    if any(t >= pair.vocab_size for t in target.cont) or len(full) >= pair.context_length:
        return False  # the fresh replay drops the carried-over tokens
    if config.grammar is None:
        return True
    return grammar_problem(pair, config, target.drafter, full, ids) is None


def _by_round(
    edits: tuple[tuple[int, int, int], ...], before: int
) -> dict[int, list[tuple[int, int]]]:
    """``edits`` of the rounds before ``before``, grouped by round, in their order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for r, pos, tok in edits:
        if r < before:
            out.setdefault(r, []).append((pos, tok))
    return out


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
