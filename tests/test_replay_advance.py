"""Incremental replay (``lessons.replay.advance``): a session standing at one lesson state
brought forward to a later one runs only the missing steps and ends exactly where a fresh
replay of the later state ends (history, pending round, problems, state reached); a state
it cannot reach gives ``None``. And a live-class follower's page uses it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specdec_core.bench.check_cases import snapshot  # everything a replay shows
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import (
    MAX_REPLAY_FORWARDS,
    advance,
    replay,
    replay_forwards,
    state_of,
    timeless_json,
)

PROMPT = "ROMEO:\nBut soft, what light"


def chain_steps(base: LessonState) -> list[LessonState]:
    """A teacher's clicks through a chain lesson: edits in rounds 0 and 2 (two in round 2),
    an edit the round cannot take (position 9 > γ: dropped) in round 3, and rounds past
    the end of the text (``max_new_tokens`` small)."""
    e0, e2a, e2b, e3 = (0, 2, 17), (2, 1, 42), (2, 3, 99), (3, 9, 5)
    out, edits = [], ()
    for r in range(5):
        out.append(replace(base, round=r, phase="propose", edits=edits))
        out.append(replace(base, round=r, phase="verify", edits=edits))
        add = {0: [e0], 2: [e2a, e2b], 3: [e3]}.get(r, [])
        for e in add:
            edits = (*edits, e)
            out.append(replace(base, round=r, phase="verify", edits=edits))
        out.append(replace(base, round=r, phase="commit", edits=edits))
    return out


def tree_steps(base: LessonState) -> list[LessonState]:
    return [
        replace(base, round=r, phase=p) for r in range(4) for p in ("propose", "verify", "commit")
    ]


def stand_at(pair, state: LessonState):
    """A session replayed to ``state`` and the state it really stands at (as the page
    reads it: ``state_of``)."""
    out = replay(pair, state)
    return out.session, state_of(out.session, state, state.prompt)


def near(i: int, n: int) -> list[int]:
    """The targets checked from state ``i`` in the quick loop: the same state, one and two
    clicks on, and the last state (a long jump)."""
    return sorted({j for j in (i, i + 1, i + 2, n - 1) if j < n})


def check_all_pairs(pair, states: list[LessonState], every: bool = False) -> int:
    """Each (reached, target) with target not behind (``every``: all of them, else the
    :func:`near` ones): ``advance`` equals a fresh replay when the rounds already proposed
    have the same edits, else ``None``. Returns how many pairs advanced."""
    fresh = [snapshot(replay(pair, s)) for s in states]
    advanced = 0
    for i, reached in enumerate(states):
        targets = range(i, len(states)) if every else near(i, len(states))
        for j in targets:
            target = states[j]
            session, at = stand_at(pair, reached)
            done = at.round + (0 if at.phase == "propose" else 1)
            same = [e for e in at.edits if e[0] < done] == [e for e in target.edits if e[0] < done]
            out = advance(pair, session, at, target)
            if not same:
                assert out is None, (i, j)
                continue
            assert out is not None, (i, j)
            assert out.session is session  # run on the session it was given
            assert snapshot(out) == fresh[j], (i, j)
            advanced += 1
    return advanced


@pytest.mark.parametrize(("temperature", "seed"), [(0.0, 0), (1.0, 8)])
def test_chain_advances_like_a_fresh_replay(embedded_pair, temperature, seed, every=False):
    base = LessonState(prompt=PROMPT, gamma=3, max_new_tokens=8, temperature=temperature, seed=seed)
    states = chain_steps(base)
    fresh = replay(embedded_pair, states[-1])
    assert fresh.state.edits == ((0, 2, 17), (2, 1, 42), (2, 3, 99))  # three edits kept
    codes = [p.code for p in fresh.problems]
    assert codes == ["edit_dropped", "round_beyond_end"]  # both problem paths covered
    n = check_all_pairs(embedded_pair, states, every)
    assert n >= (120 if every else 40)  # of 190: 134 on this sequence; of 70 near: 44


def test_a_few_clicks_advance_like_a_fresh_replay(embedded_pair):
    """The quick loop's case (the sweeps here are slow), at T = 1 so the draws count: one
    click, a jump over the next rounds and their edits, and a target that edited a round
    the session already proposed (``None``, the session untouched)."""
    base = LessonState(prompt=PROMPT, gamma=3, max_new_tokens=8, temperature=1.0, seed=3)
    states = chain_steps(base)  # 3: round 0 committed with its edit; 11: round 2's
    for i, j, ok in ((0, 1, True), (3, 11, True), (1, 3, False)):
        session, at = stand_at(embedded_pair, states[i])
        before = timeless_json(session.history)
        out = advance(embedded_pair, session, at, states[j])
        if not ok:  # round 0 was proposed without the edit the target has
            assert out is None and timeless_json(session.history) == before
            continue
        assert out is not None and out.session is session, (i, j)
        assert snapshot(out) == snapshot(replay(embedded_pair, states[j])), (i, j)


@pytest.mark.parametrize(("temperature", "seed"), [(0.0, 0), (1.0, 8)])
def test_chain_every_pair_advances_like_a_fresh_replay(embedded_pair, temperature, seed):
    """All 190 (reached, target) pairs (slow: ≈ 10 s idle, minutes on a busy machine)."""
    test_chain_advances_like_a_fresh_replay(embedded_pair, temperature, seed, every=True)


def test_tree_advances_like_a_fresh_replay(embedded_pair, every=False):
    base = LessonState(prompt=PROMPT, max_new_tokens=20, tree=(2, 2, 1))
    states = tree_steps(base)
    assert replay(embedded_pair, states[-1]).state.tree == (2, 2, 1)
    n = len(states)
    expected = n * (n + 1) // 2 if every else sum(len(near(i, n)) for i in range(n))
    assert check_all_pairs(embedded_pair, states, every) == expected  # a tree has no edits


def test_tree_every_pair_advances_like_a_fresh_replay(embedded_pair):
    """All 78 (reached, target) pairs of the tree lesson (slow on a busy machine)."""
    test_tree_advances_like_a_fresh_replay(embedded_pair, every=True)


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "JULIET:\nO Romeo"},
        {"gamma": 4},
        {"seed": 3},
        {"temperature": 0.5},
        {"drafter": "ngram"},
        {"cont": (5, 6)},
        {"tree": (2, 2, 1)},
        {"edits": ((0, 2, 18),)},  # an edit of a past round changed
        {"edits": ()},  # … or dropped
        {"edits": ((0, 2, 17), (1, 1, 3))},  # an edit in the round already proposed
        {"round": 1, "phase": "verify"},  # behind
        {"round": 2, "phase": "propose"},  # the phase before, same round
    ],
)
def test_unreachable_targets_give_none(embedded_pair, change):
    base = LessonState(prompt=PROMPT, gamma=3, max_new_tokens=30, temperature=1.0, seed=1)
    reached = replace(base, round=2, phase="verify", edits=((0, 2, 17),))
    session, at = stand_at(embedded_pair, reached)
    assert at == reached
    target = replace(base, round=3, phase="commit", edits=((0, 2, 17),))
    assert advance(embedded_pair, session, at, target) is not None  # the control
    session, at = stand_at(embedded_pair, reached)
    before = timeless_json(session.history)
    assert advance(embedded_pair, session, at, replace(target, **change)) is None
    assert timeless_json(session.history) == before and session.phase == "verify"


def test_a_capped_target_gives_none(embedded_pair):
    base = LessonState(prompt=PROMPT, gamma=8, max_new_tokens=400)
    session, at = stand_at(embedded_pair, replace(base, round=1))
    target = replace(base, round=40, phase="commit")
    assert replay_forwards(target) > MAX_REPLAY_FORWARDS
    assert advance(embedded_pair, session, at, target) is None


def test_the_replay_cap_counts_the_given_config_gamma(embedded_pair):
    """A state made under γ = 1 with settings of γ = 4 given beside it: the cap counts the
    settings that run (5 forwards a round: 256 // 5 = 51 rounds), not the state's."""
    state = LessonState(prompt=PROMPT, gamma=1, max_new_tokens=4, round=100, phase="commit")
    assert replay_forwards(state) == 101 * 2 <= MAX_REPLAY_FORWARDS
    config = replace(state.config(), gamma=4)
    out = replay(embedded_pair, state, config)
    assert out.session is not None and out.session.config.gamma == 4
    [capped] = [p for p in out.problems if p.code == "replay_capped"]
    assert capped.params == {"round": MAX_REPLAY_FORWARDS // 5, "forwards": MAX_REPLAY_FORWARDS}
    assert out.state.gamma == 4
    # advance takes the same settings: a target within the cap under γ = 1 is over it
    session, at = stand_at(embedded_pair, replace(state, gamma=4, round=0, phase="propose"))
    assert advance(embedded_pair, session, at, state, config) is None
    assert advance(embedded_pair, session, at, replace(state, round=1), config) is not None


# ------------------------------------------------------------------ the follower's page
@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite room store in ``tmp_path`` (as in tests/test_page_live.py)."""
    from specdec_core.server import room_store

    monkeypatch.setenv("SPECDEC_ROOM_DB", str(tmp_path / "rooms.sqlite3"))
    monkeypatch.delenv("SPECDEC_REDIS_URL", raising=False)
    monkeypatch.setattr(room_store, "_store", None)
    yield room_store.make_store()
    monkeypatch.setattr(room_store, "_store", None)


def click(at, key: str) -> None:
    b = next(b for b in at.button if b.key == key)
    assert not b.disabled, key
    b.click().run()
    assert not at.exception, at.exception


def test_a_follower_advances_its_own_session_like_a_fresh_replay(embedded_pair, store, monkeypatch):
    """A follower without the teacher's frame (an older frame gone, a store fault) replays:
    four teacher clicks, each time the follower's session is the one it had (advanced in
    place, not replayed afresh) and equals a fresh replay of the teacher's state."""
    from conftest import like_the_app, open_app

    from specdec_core.ui.live import follow

    monkeypatch.setattr(follow, "room_frame", lambda *args: None)  # no frame: replay

    teacher = open_app(prompt=PROMPT, state={"lt_open": True})
    click(teacher, "live_start_step")
    student = open_app({"room": teacher.session_state["live_seat"].code})
    assert not student.exception, student.exception
    first = student.session_state["lesson"].session
    for step in ("btn_propose", "btn_verify", "btn_commit", "btn_propose"):
        click(teacher, step)
        student.run()
        assert not student.exception, student.exception
        mine = student.session_state["lesson"].session
        assert mine is first  # advanced in place
        at = state_of(mine, LessonState(), PROMPT)
        theirs = state_of(teacher.session_state["lesson"].session, LessonState(), PROMPT)
        assert at == theirs
        fresh = like_the_app(replay, mine.pair, at)  # the app's pair, device and threads
        assert snapshot(fresh) == snapshot(type(fresh)(mine, at, []))
    assert len(first.history) == 1 and first.phase == "verify"
