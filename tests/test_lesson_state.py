"""Lost-work and crash paths a student reaches with the normal UI: the lesson
survives a visit to another page and any number of settings changes, and a round that
drafted no tokens is a normal state on every page. AppTest on the embedded pair."""

from __future__ import annotations

from pathlib import Path

from conftest import click_button, start_app
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PROMPT = "KING:\nWhat say you, my lords, of this"


start = start_app
click = click_button


def committed(at: AppTest) -> int:
    return int(next(m.value for m in at.metric if m.label == "committed length"))


def test_prompt_and_rounds_survive_a_visit_to_the_rule_lab(embedded_pair):
    at = start()
    at.text_area(key="st_prompt").set_value(PROMPT).run()
    click(at, "Run one round")
    click(at, "Run one round")
    kept = committed(at)
    ids = list(at.session_state["step_session"].ids)
    at.switch_page("pages/acceptance_lab.py").run()
    assert not at.exception, at.exception
    at.switch_page("pages/step_through.py").run()
    assert not at.exception, at.exception
    assert at.text_area(key="st_prompt").value == PROMPT
    assert committed(at) == kept > len(embedded_pair.tokenizer.encode(PROMPT))
    assert at.session_state["step_session"].ids == ids
    assert not at.info or all("reset" not in i.value for i in at.info)


def test_any_number_of_settings_changes_keep_the_committed_text(embedded_pair):
    at = start()
    for _ in range(3):
        click(at, "Run one round")
    session = at.session_state["step_session"]
    prompt_len, kept, ids = session.prompt_len, committed(at), list(session.ids)
    for gamma in (5, 6, 3):
        at.sidebar.slider(key="cfg_gamma").set_value(gamma).run()
        assert not at.exception, at.exception
        session = at.session_state["step_session"]
        assert session.config.gamma == gamma
        assert committed(at) == kept and session.ids == ids
        assert session.prompt_len == prompt_len  # the original prompt boundary
    click(at, "Run one round")  # and the lesson goes on from there
    assert committed(at) > kept


def test_a_round_with_no_drafts_is_a_normal_state(embedded_pair):
    at = start()
    at.sidebar.number_input(key="cfg_max_new").set_value(1).run()
    click(at, "① Propose")
    assert at.session_state["step_session"].steps.drafts == []
    click(at, "② Verify")
    shown = " ".join(x.value for x in [*at.success, *at.info, *at.markdown])
    assert "All 0" not in shown and "drafted **no** tokens" in shown
    at.switch_page("pages/acceptance_lab.py").run()
    assert not at.exception, at.exception
    assert at.button(key="rl_preset_step").disabled
    assert any("drafted no tokens" in c.value for c in at.caption)
    at.switch_page("pages/step_through.py").run()
    click(at, "③ Commit / reject")
    assert at.session_state["step_session"].phase == "finished"
