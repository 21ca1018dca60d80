"""A replay is a replay on any device: every path to a lesson state runs the same
computation, and what a person sees does not depend on the thread count.

1. The forward log (every cached forward of the session's target and draft caches: which
   cache, the ids fed, the cached length before, the LM-head rows kept, the tree mask's
   shape and position ids) of a session clicked step by step equals that of a fresh
   ``replay``, of ``advance`` from every earlier state, of a step back, and of the app's
   link open, step back and clicks: chain and tree, greedy and T = 1. Equal shapes in
   equal order are what makes a GPU give equal bits (cuBLAS picks kernels by shape), so
   this is the CPU stand-in for the GPU's drift.
2. The same lessons replayed in a subprocess at 1 torch thread and at 2 (the stand-in for
   a teacher's replica at one thread count and a follower's at another): low bits move,
   tokens, verdicts and every number at the shown precision do not, except after a
   check flagged as a near-tie.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import like_the_app, open_app

from specdec_core.core import kvcache
from specdec_core.core.numfmt import fmt_sig
from specdec_core.lessons.link import LessonState, encode
from specdec_core.lessons.replay import advance, replay, state_of, step_back, timeless_json

REPO = Path(__file__).resolve().parents[1]
PROMPT = "ROMEO:\nBut soft, what light"
_seq = itertools.count()


@pytest.fixture
def forward_log(monkeypatch):
    """Every :meth:`ModelCache._forward` call is logged on its cache (with a global
    sequence number, so the target's and the draft's calls interleave as they ran)."""
    forward = kvcache.ModelCache._forward

    def logged(self, new_ids, keep, positions=None, mask=None, known=None):
        entry = (
            next(_seq),
            tuple(new_ids),
            self.kv_len,
            keep,
            None if mask is None else tuple(mask.shape),
            None if positions is None else tuple(positions.tolist()),
            known,
        )
        self.__dict__.setdefault("fwd_log", []).append(entry)
        return forward(self, new_ids, keep, positions, mask, known)

    monkeypatch.setattr(kvcache.ModelCache, "_forward", logged)


def log_of(session) -> list[tuple]:
    """The forwards ``session``'s own caches ran, in order, as (cache, ids, cached length,
    rows kept, mask shape, positions, known)."""
    caches = {"target": session.target, "draft": getattr(session.drafter, "kv", None)}
    rows = [
        (entry[0], name, *entry[1:])
        for name, cache in caches.items()
        if cache is not None
        for entry in cache.__dict__.get("fwd_log", [])
    ]
    return [row[1:] for row in sorted(rows)]


def chain_lesson(base: LessonState) -> list[tuple[str, tuple]]:
    """A teacher's steps through a chain lesson: rounds 0–1, an edit in round 0 (position
    2, re-proposed after it) and one in round 1 (the last position)."""
    steps = []
    for r in range(2):
        steps.append(("propose", ()))
        steps += [("edit", (2, 17))] if r == 0 else [("edit", (base.gamma, 42))] if r == 1 else []
        steps += [("verify", ()), ("commit", ())]
    return steps


def tree_lesson(_: LessonState) -> list[tuple[str, tuple]]:
    return [(s, ()) for _ in range(2) for s in ("propose", "verify", "commit")]


BASES = {
    "chain-greedy": LessonState(prompt=PROMPT, gamma=3, max_new_tokens=40),
    "chain-T1": LessonState(prompt=PROMPT, gamma=3, max_new_tokens=40, temperature=1.0, seed=4),
    "tree-greedy": LessonState(prompt=PROMPT, max_new_tokens=40, tree=(2, 2, 1)),
    "tree-T1": LessonState(
        prompt=PROMPT, max_new_tokens=40, temperature=1.0, seed=4, tree=(3, 2, 1)
    ),
}


def clicked(pair, base: LessonState) -> tuple[list[LessonState], list[list[tuple]]]:
    """The session a teacher clicks through: the state and the forward log after each
    step (the first: before any step)."""
    session = replay(pair, base).session
    steps = tree_lesson(base) if base.tree else chain_lesson(base)
    states, logs = [state_of(session, base, PROMPT)], [log_of(session)]
    for step, args in steps:
        if step == "edit":
            session.steps.edit_draft(*args)
        else:
            getattr(session, step)()
        states.append(state_of(session, base, PROMPT))
        logs.append(log_of(session))
    return states, logs


@pytest.mark.parametrize("name", list(BASES))
def test_every_path_to_a_state_runs_the_same_forwards(embedded_pair, forward_log, name):
    states, logs = clicked(embedded_pair, BASES[name])
    assert len({len(log) for log in logs}) >= 4  # the log grows: forwards really ran
    edits = states[-1].edits
    assert bool(edits) != bool(BASES[name].tree)  # the chain lessons edit, trees cannot
    for k, state in enumerate(states):
        out = replay(embedded_pair, state)  # a link, a trace file, a step back
        assert out.problems == [] and out.state == state
        assert log_of(out.session) == logs[k], (name, k)
        if k:
            assert step_back(state) == states[k - 1]  # … which then replays as above
        for i in {k - 1, 0} if k else ():  # a follower one click behind, or at the start
            behind = replay(embedded_pair, states[i]).session
            reached = state_of(behind, state, PROMPT)
            if advance(embedded_pair, behind, reached, state) is None:  # replays afresh
                assert state.edits != reached.edits and reached.phase == "verify", (name, i, k)
                continue  # an edit of the round in flight: not reachable by design
            assert log_of(behind) == logs[k], (name, i, k)


def test_the_app_runs_the_same_forwards_as_a_replay(embedded_pair, forward_log):
    """A tree link opened in the app (T = 1, seed 4, tree 3,2,1: the case that differed on
    a GPU), two steps back and the teacher's clicks on; then a chain link with edits, and
    its clicks: the app's session ran exactly the forwards of a replay on the app's pair."""
    tree = replace(BASES["tree-T1"], round=1, phase="commit")
    chain = replace(BASES["chain-T1"], round=1, phase="verify", edits=((0, 2, 17), (1, 3, 42)))
    clicks = {
        "tree_lesson": ("btn_step_back", "btn_step_back", "btn_tree_propose", "btn_tree_verify"),
        "lesson": ("btn_verify", "btn_commit", "btn_propose"),
    }
    for key, link in (("tree_lesson", tree), ("lesson", chain)):
        at = open_app(encode(link))
        for button in (None, *clicks[key]):
            if button is not None:
                next(b for b in at.button if b.key == button).click().run()
                assert not at.exception, at.exception
            session = at.session_state[key].session
            state = state_of(session, link, PROMPT)
            direct = like_the_app(replay, session.pair, state).session
            assert log_of(session) == log_of(direct), (button, state)
            assert len(log_of(session)) > 2
        assert (state.round, state.phase) == {"lesson": (2, "verify")}.get(key, (1, "commit"))


# ------------------------------------------------------------------ 1 vs 2 threads
SHOWN = r"""
import json, sys
import torch
torch.set_num_threads(int(sys.argv[1]))
from specdec_core.core.models import load_pair
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import replay
pair = load_pair("embedded", device="cpu")
out = {}
for name, kw in json.loads(sys.argv[2]).items():
    kw["tree"] = tuple(kw.get("tree", ()))
    kw["edits"] = tuple(tuple(e) for e in kw.get("edits", ()))
    s = replay(pair, LessonState(**kw)).session
    if kw["tree"]:
        rounds = [[(n.token.id, n.state, n.p, n.q, n.accept_prob, n.u, n.near_tie)
                   for n in r.verify.tree.nodes] for r in s.history]
    else:
        rounds = [[(c.token.id, c.status, c.p, c.q, c.accept_prob, c.u, c.near_tie)
                   for c in r.verify.checks] for r in s.history]
    out[name] = {"ids": s.ids, "rounds": rounds}
print(json.dumps(out))
"""

LESSONS = {
    "chain-T1": {
        "prompt": PROMPT,
        "gamma": 4,
        "max_new_tokens": 40,
        "temperature": 1.0,
        "seed": 7,
        "round": 4,
        "edits": [[1, 2, 17]],
    },
    "chain-greedy": {"prompt": PROMPT, "gamma": 4, "max_new_tokens": 40, "round": 4},
    "tree-T1": {
        "prompt": PROMPT,
        "max_new_tokens": 40,
        "temperature": 1.0,
        "seed": 4,
        "round": 4,
        "tree": [3, 2, 1],
    },
    "tree-greedy": {"prompt": PROMPT, "max_new_tokens": 40, "round": 4, "tree": [2, 2, 1, 1]},
    # EAGLE reads the target's features, whose float32 low bits move with the thread count:
    # its q must still show the same digits (float32 weights; int8 showed them, see
    # ``EagleDrafter.int8_by_default``)
    "eagle-chain-T1": {
        "prompt": PROMPT,
        "gamma": 4,
        "max_new_tokens": 40,
        "temperature": 1.0,
        "seed": 3,
        "round": 6,
        "drafter": "eagle",
    },
    "eagle-tree-T1": {
        "prompt": PROMPT,
        "max_new_tokens": 40,
        "temperature": 1.0,
        "seed": 5,
        "round": 4,
        "tree": [3, 2, 1],
        "drafter": "eagle",
    },
}


def _shown_at(*threads: int) -> list[dict]:
    """The lessons replayed in one subprocess per thread count (run side by side)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
    env.pop("SPECDEC_TORCH_THREADS", None)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", SHOWN, str(n), json.dumps(LESSONS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for n in threads
    ]
    out = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=180)
        assert run.returncode == 0, stderr[-2000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def _shown(check: list) -> tuple:
    """A check (or tree node) as the screen shows it: token, verdict, numbers at 4
    significant digits (``numfmt.fmt_sig``, the checks table's and the tree's format)."""
    token, status, p, q, a, u, _ = check
    return (token, status, *(fmt_sig(x) for x in (p, q, a, u)))


def _on_a_rounding_edge(x: float | None) -> bool:
    """Whether ``x`` sits so close to a 4-digit rounding edge that low bits may move it."""
    return x is not None and fmt_sig(x * (1 + 1e-5)) != fmt_sig(x * (1 - 1e-5))


def test_one_and_two_threads_show_the_same_lessons():
    one, two = _shown_at(1, 2)
    moved = 0
    for name in LESSONS:
        a, b = one[name], two[name]
        for ra, rb in zip(a["rounds"], b["rounds"], strict=True):
            for ca, cb in zip(ra, rb, strict=True):
                moved += ca != cb
                numbers = zip(ca[2:6], cb[2:6], strict=True)
                if not any(_on_a_rounding_edge(x) or _on_a_rounding_edge(y) for x, y in numbers):
                    assert _shown(ca) == _shown(cb), (name, ca, cb)
                assert ca[:2] == cb[:2], (name, ca, cb)  # token and verdict
                if ca[6] or cb[6]:  # a near-tie: the rest may part ways, and the screen says so
                    break
            else:
                continue
            break
        else:
            assert a["ids"] == b["ids"], name
    assert moved > 0  # the stand-in is real: 1 and 2 threads differ in low bits


def test_a_read_in_the_middle_of_a_commit_never_counts_new_tokens_as_carried_over(
    embedded_pair, monkeypatch
):
    """A commit moves the ids, then the pending round, then the history, in turn. Whatever
    is read in between, the committed tokens of the round never become carried-over text
    (``cont``: ``start_len`` is fixed at the start). A whole consistent state is the UI's
    to read under the session's engine lock (``tests/test_links_lock.py``)."""
    import specdec_core.engine.chain.session as chain_session

    base = replace(BASES["chain-T1"], round=1, phase="commit")
    session = replay(embedded_pair, base).session
    seen = []
    kv_state, apply_round = session.kv_state, chain_session.apply_round

    def read():
        seen.append(state_of(session, base, PROMPT))

    def apply_during(*args, **kwargs):  # before the ids move, and after (round pending)
        read()
        out = apply_round(*args, **kwargs)
        session.ids = out[0]  # the moved ids, as the commit assigns them next
        read()
        return out

    def kv_during(*args, **kwargs):  # the round no longer pending, not yet filed
        read()
        return kv_state(*args, **kwargs)

    monkeypatch.setattr(chain_session, "apply_round", apply_during)
    monkeypatch.setattr(session, "kv_state", kv_during)
    session.commit()
    assert len(seen) == 3 and seen[0] == base
    assert [(s.prompt, s.cont) for s in seen] == [(base.prompt, base.cont)] * 3
    assert len(session.ids) > len(embedded_pair.tokenizer(PROMPT).input_ids)  # ids did move
    assert state_of(session, base, PROMPT) == replace(base, round=2, phase="propose")


@pytest.fixture(scope="module")
def device_pair():
    """The embedded pair on the device the app would choose (CUDA when present)."""
    from specdec_core.core.models import load_pair

    return load_pair("embedded")


@pytest.mark.parametrize("name", ["chain-T1", "tree-T1"])
def test_every_path_gives_the_same_bits_on_the_default_device(device_pair, name):
    """On the app's device (an H200 where there is one): the clicked session, a fresh
    replay and an advance from one click behind agree bit for bit in every record."""

    def snapshot(session) -> tuple:
        pending = (
            session.steps.tree_view() if session.unit == "tree" else session.steps.current_verify
        )
        return list(session.ids), timeless_json(session.history), timeless_json(pending)

    base = BASES[name]
    session = replay(device_pair, base).session
    steps = tree_lesson(base) if base.tree else chain_lesson(base)
    for k, (step, args) in enumerate(steps):
        behind = state_of(session, base, PROMPT)
        if step == "edit":
            session.steps.edit_draft(*args)
        else:
            getattr(session, step)()
        state = state_of(session, base, PROMPT)
        assert snapshot(replay(device_pair, state).session) == snapshot(session), (name, k)
        follower = replay(device_pair, behind).session
        if advance(device_pair, follower, behind, state) is not None:
            assert snapshot(follower) == snapshot(session), (name, k)
