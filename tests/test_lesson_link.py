"""Lesson links, replay, undo, scenarios and trace files, engine side."""

from __future__ import annotations

import base64
import csv
import io
import json
import zlib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdec_core.core.grammar import GrammarSpec
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import to_jsonable
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.link import LessonState, Problem, decode, encode
from specdec_core.lessons.replay import replay, state_of, step_back, timeless_json
from specdec_core.lessons.scenarios import SCENARIOS, find_scenarios
from specdec_core.lessons.tracefile import TraceFileError, export_csv, export_json, parse

PROMPT = "First Citizen:\nWe are accounted poor citizens"
OFFERED = ["embedded", "custom"]


def _pack(data: object) -> str:
    raw = json.dumps(data).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw)).rstrip(b"=").decode()


def test_a_state_survives_the_url_form():
    state = LessonState(
        lang="zh",
        gamma=6,
        temperature=0.7,
        top_k=20,
        seed=9,
        prompt="你好",
        round=3,
        phase="verify",
        edits=((3, 2, 41),),
        presenter=True,
    )
    params = encode(state)
    assert params["v"] == "2" and params["lang"] == "zh" and len(params["s"]) < 200
    assert decode(params, OFFERED) == (state, [])
    assert decode({}, OFFERED) == (LessonState(), [])


@pytest.mark.parametrize(
    ("params", "code", "name"),
    [
        ({"v": "1", "s": _pack({"gamma": 99})}, "bad_value", "gamma"),
        ({"v": "1", "s": _pack({"temperature": "hot"})}, "bad_value", "temperature"),
        ({"v": "1", "s": _pack({"top_p": float("nan")})}, "bad_value", "top_p"),
        ({"v": "1", "s": _pack({"pair": "gpt2-xl"})}, "bad_value", "pair"),  # not offered
        ({"v": "1", "s": _pack({"pair": "../../etc"})}, "bad_value", "pair"),
        ({"v": "1", "s": _pack({"page": "admin"})}, "bad_value", "page"),
        ({"v": "1", "s": _pack({"phase": "explode"})}, "bad_value", "phase"),
        ({"v": "1", "s": _pack({"round": -1})}, "bad_value", "round"),
        ({"v": "1", "s": _pack({"edits": [[0, 1]]})}, "bad_value", "edits"),
        ({"v": "1", "s": _pack({"edits": [[0, 1, 2]] * 65})}, "bad_value", "edits"),
        ({"v": "1", "s": _pack({"prompt": "x" * 1001})}, "bad_value", "prompt"),
        ({"v": "1", "s": _pack({"seed": True})}, "bad_value", "seed"),
        ({"v": "1", "s": _pack({"trust_remote_code": True})}, "bad_value", "trust_remote_code"),
        ({"v": "1", "lang": "fr"}, "bad_value", "lang"),
        ({"v": "3", "s": _pack({"gamma": 2})}, "version", None),
        ({"v": "1", "s": "!!not base64!!"}, "unreadable", None),
        ({"s": "garbage"}, "unreadable", None),  # no version: not "another version (—)"
        ({"s": _pack({"gamma": 2})}, "unreadable", None),
        ({"v": "1", "s": _pack([1, 2, 3])}, "unreadable", None),
        ({"v": "1", "s": "A" * 9000}, "unreadable", None),
    ],
)
def test_bad_links_keep_the_rest_and_name_what_was_dropped(params, code, name):
    state, problems = decode(params, OFFERED)
    assert [p.code for p in problems] == [code]
    if name is not None:
        assert problems[0].params["name"] == name
    assert state.gamma == 4 and state.pair == "embedded"  # defaults where dropped


def test_a_zip_bomb_is_not_inflated():
    bomb = base64.urlsafe_b64encode(zlib.compress(b"{" + b" " * 10_000_000)).decode()
    assert len(bomb) < 20_000
    state, problems = decode({"v": "1", "s": bomb.rstrip("=")}, OFFERED)
    assert state == LessonState() and [p.code for p in problems] == ["unreadable"]


def _drive(session: SpeculativeSession, steps: list[tuple]) -> None:
    for step in steps:
        if session.phase == "finished":
            return
        if step[0] == "edit":
            if session.phase == "verify" and session.steps.drafts:
                session.steps.edit_draft(min(step[1], len(session.steps.drafts)), step[2])
        elif step[0] == session.phase:
            getattr(session, step[0])()


STEP = st.one_of(
    st.sampled_from([("propose",), ("verify",), ("commit",)]),
    st.tuples(st.just("edit"), st.integers(1, 4), st.integers(0, 299)),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 1000),
    temperature=st.sampled_from([0.0, 1.0]),
    steps=st.lists(STEP, max_size=20),
)
def test_replaying_the_link_state_gives_the_same_session(tiny_pair, seed, temperature, steps):
    config = SessionConfig(gamma=3, temperature=temperature, seed=seed, max_new_tokens=24)
    session = SpeculativeSession(tiny_pair, PROMPT, config)
    _drive(session, steps)
    base = LessonState(pair="custom", max_new_tokens=24)
    state = state_of(session, base, PROMPT)
    state_back, problems = decode(encode(state), OFFERED)
    assert state_back == state and problems == []
    again = replay(tiny_pair, state_back)
    assert again.problems == [] and again.state == state
    assert timeless_json(again.session.history) == timeless_json(session.history)
    assert (
        again.session.phase == session.phase and again.session.steps.drafts == session.steps.drafts
    )
    assert again.session.kv_state() == session.kv_state()


def test_step_back_undoes_one_edit_or_phase_at_a_time(tiny_pair):
    config = SessionConfig(gamma=3, temperature=1.0, seed=4, max_new_tokens=30)
    session = SpeculativeSession(tiny_pair, PROMPT, config)
    states = []
    base = LessonState(pair="custom", max_new_tokens=30)

    def snap() -> None:
        states.append(
            (
                state_of(session, base, PROMPT),
                timeless_json(session.history),
                session.phase,
                session.steps.drafts,
                session.kv_state(),
            )
        )

    snap()
    session.propose()
    snap()
    session.steps.edit_draft(2, 7)
    snap()
    session.verify()
    snap()
    session.commit()
    snap()
    session.propose()
    snap()
    state = states[-1][0]
    for expected in reversed(states[:-1]):
        state = step_back(state)
        back = replay(tiny_pair, state)
        assert state == expected[0]
        assert (
            timeless_json(back.session.history),
            back.session.phase,
            back.session.steps.drafts,
            back.session.kv_state(),
        ) == expected[1:]
    assert step_back(state) is None


def test_replay_drops_what_cannot_be_done_and_says_so(tiny_pair):
    base = LessonState(pair="custom", prompt=PROMPT, max_new_tokens=6, gamma=2)
    out = replay(tiny_pair, replace(base, round=50))  # past the end of the text
    assert [p.code for p in out.problems] == ["round_beyond_end"]
    assert out.session.phase == "finished" and out.state.round == len(out.session.history)
    out = replay(tiny_pair, replace(base, round=0, phase="verify", edits=((0, 1, 10**6),)))
    assert [p.code for p in out.problems] == ["edit_dropped"] and out.state.edits == ()
    out = replay(tiny_pair, replace(base, prompt="To be " * 40))  # over the 64-token context
    assert out.session is None and [p.code for p in out.problems] == ["prompt_dropped"]
    assert out.problems[0].params == {"reason": "prompt_too_long"}


@pytest.fixture(scope="module")
def embedded_scenarios(embedded_pair):
    return {f.key: f.state for f in find_scenarios(embedded_pair)}


def test_every_scenario_is_found_and_replays_its_outcome(embedded_pair, embedded_scenarios):
    assert set(embedded_scenarios) == set(SCENARIOS)
    expect = {
        "first_error_3": ["accepted", "accepted", "rejected", "discarded"],
        "first_error_1": ["rejected"] + ["discarded"] * 3,
        "all_accepted": ["accepted"] * 4,
        "sampled_rejection": ["accepted", "rejected", "discarded", "discarded"],
    }
    for key, state in embedded_scenarios.items():
        assert state is not None, key
        out = replay(embedded_pair, state)
        assert out.problems == [] and out.session.phase == "commit"
        checks = out.session.steps.current_verify.checks
        statuses = [c.status for c in checks]
        assert len("&".join(f"{k}={v}" for k, v in encode(state).items())) < 2000
        if key in expect:
            assert statuses == expect[key]
        if key == "all_accepted":
            assert out.session.steps.current_verify.kind == "bonus"
        if key == "sampled_rejection":
            assert state.temperature == 1.0 and checks[1].u >= checks[1].accept_prob
        if key == "one_hot_edit":
            assert checks[0].edited and checks[0].q == 1.0 and statuses[0] == "accepted"
            assert checks[0].accept_prob == pytest.approx(checks[0].p) and checks[0].p < 1
        if key == "eos_cut":
            assert "cut" in statuses and statuses[0] == "accepted"
            assert out.session.current_record.kind == "stopped"
        if key == "lookup_run":
            assert state.drafter == "ngram" and statuses.count("accepted") >= 4


def test_trace_file_round_trip_and_bad_files(tiny_pair):
    config = SessionConfig(gamma=3, temperature=1.0, seed=2, max_new_tokens=20)
    session = SpeculativeSession(tiny_pair, PROMPT, config)
    session.run(max_rounds=3)
    state = state_of(session, LessonState(pair="custom", max_new_tokens=20), PROMPT)
    text = export_json(session, state)
    back = parse(text.encode())
    assert back.pair == "custom" and back.state == state
    assert to_jsonable(back.rounds) == to_jsonable(session.history)
    assert back.prompt_len == session.prompt_len
    rows = list(csv.reader(io.StringIO(export_csv(session))))
    assert rows[0][:3] == ["round", "position", "token_id"]
    assert rows[1][9] == session.history[0].verify.checks[0].status
    assert len(rows) == 1 + sum(len(r.verify.checks) for r in session.history)
    doc = json.loads(text)
    for bad, code in [
        (b"x" * 5_000_001, "trace_too_large"),
        (b"\xff\xfe", "trace_malformed"),
        (b"[1, 2]", "trace_malformed"),
        (json.dumps({**doc, "version": 9}).encode(), "trace_version"),
        (json.dumps({**doc, "rounds": [{"round_index": 0}]}).encode(), "trace_malformed"),
        (json.dumps({**doc, "prompt_len": 0}).encode(), "trace_malformed"),
    ]:
        with pytest.raises(TraceFileError) as info:
            parse(bad)
        assert info.value.code == code
    odd = parse(json.dumps({**doc, "lesson": {"gamma": 999}}).encode())
    assert odd.state is None and to_jsonable(odd.rounds) == to_jsonable(back.rounds)  # read-only


def test_cli_prints_the_scenario_links(capsys, embedded_pair):
    from urllib.parse import parse_qs, urlsplit

    from specdec_core.__main__ import main

    assert main(["scenarios", "--pair", "embedded", "--base-url", "http://h:1/", "--json"]) == 0
    links = json.loads(capsys.readouterr().out)
    assert list(links) == list(SCENARIOS)
    for url in links.values():
        parts = urlsplit(url)
        assert url.startswith("http://h:1/?") and len(url) < 2000
        state, problems = decode(parse_qs(parts.query), ["embedded"])
        assert problems == [] and state.prompt and state.phase == "commit"


# ---------------------------------------------------------------- processors
SPEAKER = ("regex", r"(ROMEO|JULIET|NURSE): [A-Za-z ,.;'!?]{1,80}\n")


def test_processor_settings_survive_the_url_form_and_name_the_session_config():
    state = LessonState(
        repetition_penalty=1.3,
        frequency_penalty=-0.5,
        presence_penalty=0.25,
        no_repeat_ngram_size=3,
        grammar=SPEAKER,
        prompt="ROMEO",
    )
    assert decode(encode(state), OFFERED) == (state, [])
    config = state.config()
    assert config.penalties == PenaltyConfig(1.3, -0.5, 0.25, 3)
    assert config.grammar == GrammarSpec(*SPEAKER)
    assert LessonState(prompt="ROMEO").with_config(config) == state
    # a state without processors encodes none of their fields (old links stay the same)
    plain = LessonState(prompt="ROMEO")
    raw = zlib.decompress(base64.urlsafe_b64decode(encode(plain)["s"] + "=="))
    assert json.loads(raw) == {"prompt": "ROMEO"}
    assert plain.config().grammar is None and not plain.config().penalties.active
    assert decode({"v": "2", "s": _pack({"grammar": []})}, OFFERED) == (LessonState(), [])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("repetition_penalty", 0.0),
        ("repetition_penalty", 10.5),
        ("repetition_penalty", "1.2"),
        ("repetition_penalty", float("nan")),
        ("frequency_penalty", 2.5),
        ("presence_penalty", -3),
        ("presence_penalty", True),
        ("no_repeat_ngram_size", 11),
        ("no_repeat_ngram_size", -1),
        ("no_repeat_ngram_size", 2.5),
        ("grammar", ["regex"]),
        ("grammar", [[], []]),
        ("grammar", ["lisp", "(a)"]),
        ("grammar", ["regex", "   "]),
        ("grammar", ["regex", "a" * 2001]),
        ("grammar", ["json_schema", 7]),
        ("grammar", "regex:a+"),
    ],
)
def test_a_bad_processor_field_is_dropped_alone(field, value):
    state, problems = decode({"v": "2", "s": _pack({field: value, "gamma": 6})}, OFFERED)
    assert [(p.code, p.params["name"]) for p in problems] == [("bad_value", field)]
    assert state == LessonState(gamma=6)  # the rest of the link is kept


def test_a_link_with_processors_replays_the_same_session(embedded_pair):
    config = SessionConfig(
        gamma=3, max_new_tokens=12, repetition_penalty=1.5, grammar=GrammarSpec(*SPEAKER)
    )
    session = SpeculativeSession(embedded_pair, PROMPT, config)
    for step in (session.propose, session.verify, session.commit, session.propose):
        step()
    state = state_of(session, LessonState(max_new_tokens=12), PROMPT)
    assert state.grammar == SPEAKER and state.repetition_penalty == 1.5
    back, problems = decode(encode(state), OFFERED)
    assert back == state and problems == []
    again = replay(embedded_pair, back)
    assert again.problems == [] and again.session.config == config
    assert timeless_json(again.session.history) == timeless_json(session.history)
    assert again.session.steps.drafts == session.steps.drafts
    assert again.session.kv_state() == session.kv_state()
    assert parse(export_json(session, state).encode()).state == state  # the trace file too


# ------------------------------------------------------------------ drafters' own limits
@pytest.mark.parametrize(
    ("drafter", "gamma", "cap"),
    [("mtp", 8, 4), ("mtp", 5, 4)],  # K = 4 heads
)
def test_gamma_over_a_drafters_limit_is_capped_with_a_problem(drafter, gamma, cap):
    """A link naming the MTP heads (or the block drafter) with γ over what they can propose
    opens at γ = their limit (the shipped config's K / block size, read without loading the
    pair) with one ``gamma_capped`` problem, instead of a page that refuses to draw."""
    from specdec_core.ui.problems import message

    state, problems = decode({"v": "2", "s": _pack({"drafter": drafter, "gamma": gamma})}, OFFERED)
    assert (state.drafter, state.gamma) == (drafter, cap)
    assert problems == [Problem("gamma_capped", {"gamma": gamma, "cap": cap})]
    assert f"γ = {gamma}" in message(problems, "en") and f"至多提出 {cap}" in message(
        problems, "zh"
    )
    state, problems = decode({"v": "2", "s": _pack({"drafter": drafter, "gamma": cap})}, OFFERED)
    assert (state.gamma, problems) == (cap, [])  # at the limit: kept as linked
    state, problems = decode({"v": "2", "s": _pack({"drafter": "model", "gamma": 8})}, OFFERED)
    assert (state.gamma, problems) == (8, [])  # a draft model has no limit of its own
    state, problems = decode({"v": "2", "s": _pack({"drafter": "block", "gamma": 8})}, OFFERED)
    assert (state.gamma, problems) == (8, [])  # block size 8 = the links' largest γ


@pytest.mark.parametrize("drafter", ["eagle", "mtp", "block"])
def test_a_drafter_the_pair_does_not_ship_is_dropped(drafter):
    """gpt2 ships no EAGLE head, no MTP heads, no block drafter: the link opens with the
    default drafter and names the dropped one; the embedded pair keeps it."""
    offered = (*OFFERED, "gpt2")
    state, problems = decode({"v": "2", "s": _pack({"pair": "gpt2", "drafter": drafter})}, offered)
    assert (state.pair, state.drafter) == ("gpt2", "model")
    assert problems == [Problem("bad_value", {"name": "drafter"})]
    state, problems = decode({"v": "2", "s": _pack({"drafter": drafter})}, offered)
    assert (state.drafter, problems) == (drafter, [])
