"""Lesson links in the app (AppTest): a link replays its state, a reload keeps language and
round, step back restores the previous phase exactly, bad links give one message, "Run N
rounds" goes round by round, scenarios open their outcome, trace files import."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import open_app
from streamlit.testing.v1 import AppTest

from specdec_core.core.settings import SessionConfig
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import state_of, timeless_json
from specdec_core.lessons.scenarios import find_scenarios
from specdec_core.lessons.tracefile import export_json

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PROMPT = "ROMEO:\nBut soft, what light"


def session(at: AppTest):
    return at.session_state["lesson"].session


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def open_panel(at: AppTest) -> None:
    """Open the Lesson panel (a lazy expander: closed, nothing in it is drawn)."""
    at.session_state["lt_open"] = True
    at.run()
    assert not at.exception, at.exception


def test_a_link_replays_its_state_and_a_reload_keeps_it(embedded_pair):
    state = LessonState(
        lang="zh",
        gamma=3,
        temperature=1.0,
        seed=12,
        prompt=PROMPT,
        round=2,
        phase="verify",
        edits=((2, 1, 42),),
    )
    at = open_app(encode(state))
    s = session(at)
    assert at.session_state["lang"] == "zh" and at.text_area[0].value == PROMPT
    assert len(s.history) == 2 and s.phase == "verify" and s.steps.drafts[0] == 42
    assert s.config.temperature == 1.0 and s.config.seed == 12 and s.config.gamma == 3
    assert not [w for w in at.warning if "舍弃" in w.value]  # nothing dropped
    params = {
        k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
        for k in ("v", "lang", "s")
    }
    again = open_app(params)  # a reload is a new session with the same URL
    t = session(again)
    assert again.session_state["lang"] == "zh"
    assert (len(t.history), t.phase, t.steps.drafts) == (2, "verify", s.steps.drafts)
    assert timeless_json(t.history) == timeless_json(s.history)


def test_step_back_restores_the_previous_phase_exactly(embedded_pair):
    at = open_app(encode(LessonState(temperature=1.0, seed=3, prompt=PROMPT)))
    button(at, "btn_propose").click().run()
    before = session(at)
    snapshot = (before.phase, before.steps.drafts, before.kv_state(before.steps.current_statuses()))
    button(at, "btn_verify").click().run()
    assert session(at).phase == "commit"
    button(at, "btn_step_back").click().run()
    assert not at.exception
    s = session(at)
    assert (s.phase, s.steps.drafts, s.kv_state(s.steps.current_statuses())) == snapshot
    button(at, "btn_step_back").click().run()
    assert session(at).phase == "propose" and session(at).steps.drafts == []


@pytest.mark.parametrize(
    ("state", "dropped"),
    [
        (LessonState(prompt=PROMPT, round=99, max_new_tokens=20), "the text ends before"),
        (LessonState(prompt=PROMPT, phase="verify", edits=((0, 1, 999_999),)), "999999"),
        (LessonState(prompt="To be " * 200), "prompt"),
    ],
    ids=["round beyond the end", "token outside the vocabulary", "prompt over the context"],
)
def test_bad_links_open_the_nearest_state_with_one_message(embedded_pair, state, dropped):
    at = open_app(encode(state))
    [message] = [w.value for w in at.warning if "dropped" in w.value]
    assert dropped in message
    assert not at.exception and session(at) is not None


def test_a_forged_link_parameter_is_one_message(embedded_pair):
    at = open_app({"v": "1", "s": "%%%garbage", "lang": "xx"})
    [message] = [w.value for w in at.warning if "dropped" in w.value]
    assert "lang" in message
    assert at.session_state["lang"] == "en" and len(session(at).history) == 0


def test_run_n_rounds_goes_round_by_round(embedded_pair):
    at = open_app(encode(LessonState(prompt=PROMPT)))
    next(n for n in at.number_input if n.key == "st_n").set_value(3).run()
    button(at, "btn_run_n").click().run()
    assert not at.exception and len(session(at).history) == 3
    assert at.session_state["run_left"] == 0


def test_scenario_links_show_their_outcome(embedded_pair):
    found = {f.key: f.state for f in find_scenarios(embedded_pair)}
    at = open_app(encode(found["first_error_3"]))
    v = session(at).steps.current_verify
    assert [c.status for c in v.checks] == ["accepted", "accepted", "rejected", "discarded"]
    at = open_app(encode(found["lookup_run"]))
    assert at.session_state["lesson"].drafter == "ngram"
    assert [c.status for c in session(at).steps.current_verify.checks].count("accepted") >= 4
    at = open_app(encode(replace(found["all_accepted"], lang="zh")))
    assert session(at).steps.current_verify.kind == "bonus" and at.session_state["lang"] == "zh"


def test_a_scenario_opens_from_the_picker(embedded_pair):
    at = open_app()
    open_panel(at)
    if any(b.key == "btn_sc_find" for b in at.button):  # not yet searched in this process
        button(at, "btn_sc_find").click().run()
    at.radio(key="sc_choice_en").set_value(
        "Sampling: rejection at position 2, residual drawn"
    ).run()
    next(b for b in at.button if b.label == "Open this scenario").click().run()
    v = session(at).steps.current_verify
    assert [c.status for c in v.checks] == ["accepted", "rejected", "discarded", "discarded"]
    assert session(at).config.temperature == 1.0


def test_a_trace_file_round_trip_through_the_page(embedded_pair):
    at = open_app(encode(LessonState(temperature=1.0, seed=5, prompt=PROMPT)))
    button(at, "btn_round").click().run()
    button(at, "btn_round").click().run()
    s = session(at)
    text = export_json(s, state_of(s, LessonState(temperature=1.0, seed=5), PROMPT))
    assert json.loads(text)["pair"] == "embedded" and len(json.loads(text)["rounds"]) == 2


def test_the_link_panel_shows_the_link_and_its_qr_code(embedded_pair):
    from urllib.parse import parse_qs, urlsplit

    from specdec_core.lessons.link import decode

    at = open_app(encode(LessonState(prompt=PROMPT, round=1, phase="verify")))
    qr = [h for h in at.get("html") if "data:image/svg+xml" in h.proto.body]
    assert not qr and not at.code  # the panel is closed: no link, no QR code built
    open_panel(at)
    links = [c.value for c in at.code if "v=2" in c.value]  # + scenario links, if searched
    states = [decode(parse_qs(urlsplit(u).query), ["embedded"]) for u in links]
    mine = [s for s, problems in states if not problems and s.prompt == PROMPT]
    assert [(s.round, s.phase) for s in mine] == [(1, "verify")]
    qr = [h.proto.body for h in at.get("html") if "data:image/svg+xml" in h.proto.body]
    assert len(qr) == 1 and 'alt="QR code"' in qr[0]
    # AppTest serves http://localhost:8501: a link of this computer only says so by its QR
    local = [w for w in at.warning if "names this computer only (localhost)" in w.value]
    assert len(local) == 1


def test_a_round_cut_by_end_of_text_explains_no_correction(embedded_pair):
    """The eos_cut scenario after Verify: later drafts are cut, and the page neither marks
    nor explains a correction token (the round ends at the stop)."""
    found = {f.key: f.state for f in find_scenarios(embedded_pair)}
    at = open_app(encode(found["eos_cut"]))
    record = session(at).current_record
    assert record.kind == "stopped" and "cut" in record.statuses
    assert not [w for w in at.warning if "Rejected at position" in w.value]
    cut = record.statuses.count("cut")
    later = f"{cut} later draft is cut" if cut == 1 else f"{cut} later drafts are cut"
    assert any(later in i.value for i in at.info)


@pytest.mark.parametrize(
    ("params", "expected", "absent"),
    [
        ({"v": "1", "s": "abc"}, "the lesson state (unreadable or too large)", "prompt_empty"),
        ({"s": "abc"}, "the lesson state (unreadable or too large)", "another version"),
        ({"v": "9", "s": "abc"}, "a link of another version (9)", "None"),
    ],
)
def test_broken_links_name_what_was_dropped_in_words(embedded_pair, params, expected, absent):
    at = open_app(params)
    [message] = [w.value for w in at.warning if "dropped" in w.value]
    assert expected in message and absent not in message and "the prompt" not in message
    assert len(session(at).history) == 0 and at.text_area[0].value  # the default lesson


def test_values_the_pair_cannot_show_are_reset_with_one_message(embedded_pair):
    """A link made on a larger pair (top-k and max new tokens beyond the embedded pair's
    vocabulary of 4,096 and context of 256): the sidebar resets both, the page says so,
    and the lesson replays with the settings on screen."""
    state = LessonState(prompt=PROMPT, top_k=10_000, max_new_tokens=900, round=1)
    at = open_app(encode(state))
    [message] = [w.value for w in at.warning if "dropped" in w.value]
    assert "“top-k”" in message and "“max new tokens”" in message  # labels, not field names
    assert at.session_state["cfg_top_k"] == 0 and at.session_state["cfg_max_new"] == 80
    s = session(at)
    assert len(s.history) == 1 and s.config.top_k == 0 and s.config.max_new_tokens == 80


def _url_state(at: AppTest) -> LessonState:
    params = {k: at.query_params[k] for k in ("v", "lang", "s")}
    params = {k: v[0] if isinstance(v, list) else v for k, v in params.items()}
    state, problems = decode(params, ["embedded"])
    assert problems == []
    return state


@pytest.mark.parametrize("tree", [(), (2, 2, 1, 1)], ids=["chain", "tree"])
def test_a_link_the_sidebar_and_the_session_agree_after_one_conversion(
    embedded_pair, monkeypatch, tree
):
    """The link's settings are converted once (state → settings → the sidebar's widgets)
    and the session is built from the settings the sidebar then reports. The conversion is
    made to drift here (seed + 1): a second one on the way to the session would show as a
    session seed one above the sidebar's."""
    convert = LessonState.config

    def drifting(self: LessonState) -> SessionConfig:
        config = convert(self)
        return replace(config, seed=config.seed + 1)

    monkeypatch.setattr(LessonState, "config", drifting)
    link = LessonState(temperature=1.0, seed=11, prompt=PROMPT, round=1, phase="verify", tree=tree)
    at = open_app(encode(link))
    lesson = at.session_state["tree_lesson" if tree else "lesson"]
    assert (lesson.session.unit == "tree") == bool(tree)
    shown = at.number_input(key="cfg_seed").value
    assert shown == 12  # the one conversion (drifted once)
    assert lesson.session.config == at.session_state["config"]  # the sidebar's, unconverted
    assert lesson.session.config.seed == shown and _url_state(at).seed == shown
    assert (len(lesson.session.history), lesson.session.phase) == (1, "verify")
    # a later sidebar change: the session and the URL take the sidebar's new value
    at.number_input(key="cfg_seed").set_value(5).run()
    assert not at.exception
    lesson = at.session_state["tree_lesson" if tree else "lesson"]
    assert lesson.session.config == at.session_state["config"]
    assert lesson.session.config.seed == 5 and _url_state(at).seed == 5
