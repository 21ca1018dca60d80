"""A tree moment is a lesson state: ``LessonState.tree`` (the shape, or
``()`` for a chain) survives the URL form, is validated like every other field (the
engine's shape limits, only drafters with a distribution, no greedy draft method at
T > 0), replays to the same tree round, and steps back one phase at a time; on the page,
tree mode has ↶ Step back and a Lesson panel (link + QR code + tree trace JSON)."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import like_the_app, open_app
from streamlit.testing.v1 import AppTest

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LINK_VERSION, LessonState, decode, encode
from specdec_core.lessons.replay import (
    TREE_BUDGET,
    replay,
    replay_forwards,
    state_of,
    step_back,
    timeless_json,
    tree_draft_forwards,
)
from specdec_core.lessons.tracefile import TraceFileError, export_tree_json, parse

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PROMPT = "First Citizen:\nWe are accounted poor citizens"
PAGE_PROMPT = "ROMEO:\nBut soft, what light"
OFFERED = ["embedded", "custom"]
V = str(LINK_VERSION)


def _pack(data: object) -> str:
    raw = json.dumps(data).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw)).rstrip(b"=").decode()


def _moment(session) -> tuple:
    """What a tree moment shows: committed ids, phase, the round's tree (tokens, states,
    p, q, a, u), its verdict and the KV table (no wall-clock timings)."""
    view = session.steps.tree_view()
    nodes = (
        None
        if view is None
        else [(n.token.id, n.state, n.p, n.q, n.accept_prob, n.u) for n in view.nodes]
    )
    verdict = None if view is None else (view.path, view.next_token, view.kind, view.next_kind)
    return (
        session.ids,
        session.phase,
        nodes,
        verdict,
        session.kv_state(),
        timeless_json(session.history),
    )


def test_a_tree_state_survives_the_url_form():
    state = LessonState(
        lang="zh", temperature=1.0, seed=7, prompt="ROMEO:", round=2, phase="commit", tree=(3, 2, 1)
    )
    params = encode(state)
    assert decode(params, OFFERED) == (state, [])
    assert decode(encode(replace(state, tree=())), OFFERED) == (replace(state, tree=()), [])
    assert "tree" not in json.dumps(encode(LessonState()))  # a chain link: no tree field


@pytest.mark.parametrize(
    "data",
    [
        {"tree": [5, 1]},  # more children than the engine allows (≤ 4)
        {"tree": [1] * 9},  # deeper than 8
        {"tree": [0, 2]},
        {"tree": "2,2,1,1"},
        {"tree": [2, True]},
        {"tree": [2.0, 2]},
        {"tree": [2, 2], "drafter": "ngram"},  # prompt lookup has no q: no tree
        {"tree": [2, 2], "temperature": 1.0, "draft_method": "greedy"},
    ],
    ids=["children", "depth", "zero", "string", "bool", "float", "ngram", "greedy-at-T"],
)
def test_a_bad_tree_field_is_dropped_with_one_problem(data):
    state, problems = decode({"v": V, "s": _pack({**data, "prompt": "ROMEO:"})}, OFFERED)
    assert [(p.code, p.params) for p in problems] == [("bad_value", {"name": "tree"})]
    assert state.tree == () and state.prompt == "ROMEO:"  # the rest opens, as a chain
    assert state.drafter == data.get("drafter", "model")


@pytest.mark.parametrize(("temperature", "seed"), [(0.0, 0), (1.0, 5)])
def test_replaying_a_tree_state_gives_the_same_tree_round(tiny_pair, temperature, seed):
    config = SessionConfig(temperature=temperature, seed=seed, max_new_tokens=30)
    session = TreeSession(tiny_pair, PROMPT, config, "model", (2, 2, 1), 12)
    session.run(max_rounds=2)
    session.propose()
    session.verify()
    base = LessonState(pair="custom", max_new_tokens=30)
    state = state_of(session, base, PROMPT)
    assert (state.tree, state.round, state.phase, state.edits) == ((2, 2, 1), 2, "commit", ())
    back, problems = decode(encode(state), OFFERED)
    assert back == state and problems == []
    again = replay(tiny_pair, back)
    assert again.session.unit == "tree" and again.problems == []
    assert again.state == state
    assert _moment(again.session) == _moment(session)
    assert again.session.steps.tree_view().nodes  # the round in flight is there, verified


def test_step_back_in_tree_mode_goes_one_phase_back(tiny_pair):
    config = SessionConfig(temperature=1.0, seed=3, max_new_tokens=30)
    session = TreeSession(tiny_pair, PROMPT, config, "model", (2, 2, 1), 12)
    base = LessonState(pair="custom", max_new_tokens=30)
    snaps = [(state_of(session, base, PROMPT), _moment(session))]
    for step in ("propose", "verify", "commit", "propose", "verify"):
        getattr(session, step)()
        snaps.append((state_of(session, base, PROMPT), _moment(session)))
    state = snaps[-1][0]
    for expected_state, expected_moment in reversed(snaps[:-1]):
        state = step_back(state)
        assert state == expected_state
        assert _moment(replay(tiny_pair, state).session) == expected_moment
    assert step_back(state) is None


def test_replay_drops_a_tree_the_settings_cannot_draft_and_tree_edits(tiny_pair):
    base = LessonState(pair="custom", prompt=PROMPT, max_new_tokens=30, tree=(2, 1))
    out = replay(tiny_pair, replace(base, temperature=1.0, draft_method="greedy", round=1))
    assert [(p.code, p.params) for p in out.problems] == [("bad_value", {"name": "tree"})]
    assert out.session.unit == "drafts" and out.state.tree == ()
    assert len(out.session.history) == 1  # the rest replays, as a chain
    out = replay(tiny_pair, replace(base, phase="verify", edits=((0, 1, 5),)))
    assert [p.code for p in out.problems] == ["edit_dropped"] and out.state.edits == ()
    assert out.session.unit == "tree" and out.session.phase == "verify"
    out = replay(tiny_pair, replace(base, max_new_tokens=4, round=30))
    assert [p.code for p in out.problems] == ["round_beyond_end"]
    assert out.session.phase == "finished"


@pytest.mark.parametrize(
    ("shape", "nodes", "levels"),
    [
        ((2, 2, 1, 1), 9, 4),
        ((3, 2, 1), 7, 3),
        ((2, 2, 2), 6, 3),
        ((4, 1, 1, 1), 9, 3),
        ((4, 4), 3, 2),
    ],
)
def test_a_tree_replays_cost_is_counted_per_expanded_node(tiny_pair, shape, nodes, levels):
    """The replay cap counts one draft forward per expanded node (the page's shapes under
    the 12-node budget): an upper bound, since the draft model runs a whole depth in one
    forward (the round records one per depth)."""
    session = TreeSession(
        tiny_pair, PROMPT, SessionConfig(max_new_tokens=30), "model", shape, TREE_BUDGET
    )
    trace = session.run_round()
    assert tree_draft_forwards(shape) == nodes
    assert trace.record.draft_forwards == levels
    state = state_of(session, LessonState(pair="custom", max_new_tokens=30), PROMPT)
    assert replay_forwards(state) == nodes + 1  # one round started


def test_the_tree_trace_json_holds_every_round_and_is_not_imported(tiny_pair):
    config = SessionConfig(temperature=1.0, seed=2, max_new_tokens=30)
    session = TreeSession(tiny_pair, PROMPT, config, "model", (2, 2), 12)
    session.run(max_rounds=2)
    session.propose()
    session.verify()
    state = state_of(session, LessonState(pair="custom", max_new_tokens=30), PROMPT)
    doc = json.loads(export_tree_json(session, state))
    assert doc["verify"] == "tree" and doc["shape"] == [2, 2] and len(doc["rounds"]) == 2
    assert doc["lesson"]["tree"] == [2, 2] and doc["lesson"]["phase"] == "commit"
    assert [r["record"]["appended"] for r in doc["rounds"]] == [
        list(r.record.appended) for r in session.history
    ]
    assert doc["in_flight"]["record"]["path"] == list(session.current_record.path)
    with pytest.raises(TraceFileError) as err:
        parse(json.dumps(doc).encode())
    assert err.value.code == "trace_tree"


# ------------------------------------------------------------------ on the page (AppTest)


def tree_session(at: AppTest) -> TreeSession:
    return at.session_state["tree_lesson"].session


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def url_state(at: AppTest) -> LessonState:
    params = {k: at.query_params[k] for k in ("v", "lang", "s")}
    state, problems = decode(params, ["embedded"])
    assert problems == []
    return state


def test_a_tree_link_opens_tree_mode_and_step_back_goes_one_phase_back(embedded_pair):
    state = LessonState(
        temperature=1.0, seed=4, prompt=PAGE_PROMPT, round=1, phase="commit", tree=(3, 2, 1)
    )
    at = open_app(encode(state))
    session = tree_session(at)
    assert at.session_state["step_mode_kept"] == "tree"
    assert at.selectbox(key="tree_shape").value == "3,2,1"
    assert (len(session.history), session.phase, session.steps.shape) == (1, "commit", (3, 2, 1))
    direct = like_the_app(replay, session.pair, state).session  # the app's pair, device, threads
    assert _moment(session) == _moment(direct)
    assert url_state(at) == state  # the URL keeps the tree moment
    verified = _moment(session)
    button(at, "btn_step_back").click().run()
    assert not at.exception, at.exception
    back = tree_session(at)
    assert back.phase == "verify" and len(back.history) == 1
    assert [n.token.id for n in back.steps.tree_view().nodes] == [n[0] for n in verified[2]]
    assert url_state(at) == replace(state, phase="verify")
    assert any("Stepped back" in i.value for i in at.info)
    button(at, "btn_step_back").click().run()
    assert tree_session(at).phase == "propose" and len(tree_session(at).history) == 1
    button(at, "btn_step_back").click().run()
    assert tree_session(at).phase == "commit" and len(tree_session(at).history) == 0
    button(at, "btn_tree_commit").click().run()  # the page goes on from the replayed round
    assert len(tree_session(at).history) == 1 and tree_session(at).ids == direct.ids


def test_step_back_after_clicks_in_tree_mode(embedded_pair):
    at = open_app(encode(LessonState(prompt=PAGE_PROMPT)))
    at.segmented_control(key="step_mode_en").set_value("tree").run()
    assert button(at, "btn_step_back").disabled  # at the very start
    button(at, "btn_tree_propose").click().run()
    proposed = _moment(tree_session(at))
    button(at, "btn_tree_verify").click().run()
    assert tree_session(at).phase == "commit"
    button(at, "btn_step_back").click().run()
    assert not at.exception, at.exception
    assert _moment(tree_session(at)) == proposed
    assert at.session_state["step_mode_kept"] == "tree"


def test_a_bad_tree_field_in_a_link_is_one_message(embedded_pair):
    params = {"v": V, "lang": "en", "s": _pack({"prompt": PAGE_PROMPT, "tree": [9, 9], "round": 1})}
    at = open_app(params)
    [message] = [w.value for w in at.warning if "dropped" in w.value]
    assert "“tree shape”" in message
    assert at.session_state["step_mode_kept"] == "chain"
    assert len(at.session_state["lesson"].session.history) == 1  # the rest, as a chain


def test_the_tree_lesson_panel_has_the_link_qr_code_and_trace(embedded_pair):
    state = LessonState(prompt=PAGE_PROMPT, round=1, phase="verify", tree=(2, 2, 1, 1))
    at = open_app(encode(state))
    assert not [h for h in at.get("html") if "data:image/svg+xml" in h.proto.body]
    at.session_state["lt_open"] = True
    at.run()
    assert not at.exception, at.exception
    urls = [c.value for c in at.code if "s=" in c.value]
    states = [decode(parse_qs(urlsplit(u).query), ["embedded"]) for u in urls]
    assert [(s, p) for s, p in states] == [(state, [])]
    qr = [h.proto.body for h in at.get("html") if "data:image/svg+xml" in h.proto.body]
    assert len(qr) == 1
    captions = " ".join(c.value for c in at.caption)
    assert "Scenarios, the checks CSV and opening a trace file are for the chain" in captions
    assert [d.label for d in at.get("download_button")] == ["Download the tree trace (JSON)"]
