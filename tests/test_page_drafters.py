"""AppTest drives the "Where drafts come from" page on the embedded pair: run the three
drafters on a preset prompt and check the numbers shown, in both languages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
STRINGS = json.loads((REPO / "assets/strings/drafters.json").read_text("utf-8"))


def s(key: str, lang: str) -> str:
    return STRINGS[key][lang]


def start(lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page("pages/drafters.py").run()
    assert not at.exception, at.exception
    return at


def run_button(at: AppTest, lang: str):
    [button] = [b for b in at.button if b.label == s("dr_run", lang)]
    return button


def click_run(at: AppTest, lang: str) -> list:
    run_button(at, lang).click().run()
    assert not at.exception, at.exception
    return at.session_state["dr_results"][1]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_drafters_side_by_side(embedded_pair, lang):
    at = start(lang)
    assert at.text_area(key="dr_prompt").value == s("dr_prompt_repetitive", lang)
    n_layer = embedded_pair.target.config.n_layer
    at.number_input(key="cfg_max_new").set_value(16)  # the sidebar's
    at.select_slider(key="dr_knob_early").set_value(n_layer)  # all layers: the target
    results = click_run(at, lang)
    assert [(r.name, r.knob) for r in results] == [
        ("model", None),
        ("ngram", 3),
        ("early-exit", n_layer),
        ("eagle", None),
    ]
    assert all(r.new_tokens == 16 and r.same_as_target for r in results)
    assert results[2].acceptance_rate == 1.0

    # three metric cards: speed-up, α, mean accepted length — the engine's values
    shown = [(m.label, m.value) for m in at.metric]
    expected = []
    for r in results:
        expected += [
            (s("dr_metric_speedup", lang), f"{r.speedup:.2f}×"),
            (s("dr_metric_alpha", lang), f"{r.acceptance_rate:.2f}"),
            (s("dr_metric_mean", lang), f"{r.mean_accepted:.2f}"),
        ]
    assert shown == expected

    # the table: target alone first, then one row per drafter
    df = at.dataframe[0].value
    assert len(df) == 5 and df["speedup"].iloc[0] == "1.00×" and df["alpha"].iloc[0] == "—"
    assert list(df["speedup"].iloc[1:]) == [f"{r.speedup:.2f}×" for r in results]
    assert list(df["alpha"].iloc[1:]) == [f"{r.acceptance_rate:.2f}" for r in results]
    assert list(df["mean"].iloc[1:]) == [f"{r.mean_accepted:.2f}" for r in results]
    assert list(df["empty"].iloc[1:]) == [str(r.empty_rounds) for r in results]
    assert list(df["rounds"]) == ["16"] + [str(r.rounds) for r in results]
    assert list(df["draft_ms"].iloc[1:]) == [f"{r.draft_ms_per_round:.2f}" for r in results]
    assert list(df["same"]) == ["✓"] * 5
    assert any(c.value == s("dr_greedy_note", lang) for c in at.caption)

    # one token strip per drafter: accepted spans = accepted drafts
    strips = [h.proto.body for h in at.html if 'class="tok ' in h.proto.body]
    assert len(strips) == 4
    for body, r in zip(strips, results, strict=True):
        assert body.count("tok-accepted") == r.accepted
        assert body.count("tok-rejected") == sum(
            a < d for a, d in zip(r.accepted_per_round, r.drafted_per_round, strict=True)
        )
        assert "tok-discarded" not in body  # hidden until the toggle is on
    assert strips[2].count("tok-rejected") == 0  # all layers: nothing rejected

    # the "other drafters" table is rendered from the strings file
    assert any(s("dr_oth_eagle_method", lang) in m.value for m in at.markdown)


def test_novel_preset_prompt_lookup_only_and_errors(embedded_pair):
    at = start("en")
    at.radio(key="dr_preset").set_value("novel").run()
    assert at.text_area(key="dr_prompt").value == s("dr_prompt_novel", "en")
    at.checkbox(key="dr_use_model").uncheck()
    at.checkbox(key="dr_use_early-exit").uncheck()
    at.checkbox(key="dr_use_eagle").uncheck()
    at.select_slider(key="dr_knob_ngram").set_value(1)
    at.number_input(key="cfg_max_new").set_value(24)
    [r] = click_run(at, "en")
    assert (r.name, r.knob) == ("ngram", 1)
    assert r.drafted_per_round[0] == 0 and r.empty_rounds > 0  # nothing to copy at first
    assert [m.value for m in at.metric] == [
        f"{r.speedup:.2f}×",
        f"{r.acceptance_rate:.2f}",
        f"{r.mean_accepted:.2f}",
    ]
    at.toggle(key="dr_show_discarded").set_value(True).run()
    assert not at.exception

    # an empty prompt: a clear message, the last results stay
    at.text_area(key="dr_prompt").set_value("").run()
    assert at.info[0].value == s("dr_stale", "en")
    run_button(at, "en").click().run()
    assert at.error and at.error[0].value.startswith("Nothing was changed:")
    assert at.session_state["dr_results"][1] == [r]

    # no drafter chosen: the run button is disabled and says why
    at.checkbox(key="dr_use_ngram").uncheck().run()
    assert run_button(at, "en").disabled
    assert at.warning[0].value == s("dr_none_selected", "en")


def test_language_switch_keeps_the_preset_working(embedded_pair):
    """A radio keeps its value as its label: a label that changed with the language used
    to raise KeyError on the next click."""
    at = start("en")
    at.radio(key="dr_preset").set_value("novel").run()
    at.sidebar.radio(key="lang").set_value("zh").run()
    assert not at.exception, at.exception
    assert at.radio(key="dr_preset").value == "novel"
    at.radio(key="dr_preset").set_value("repetitive").run()
    assert not at.exception, at.exception
    assert "To-morrow" in at.text_area(key="dr_prompt").value
