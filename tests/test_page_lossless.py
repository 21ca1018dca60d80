"""AppTest of the lossless page (pages/lossless.py): renders in en and zh, the lossy-rule
enumeration shown with its exact values, one translated message for bad input (the rows
and knobs kept), the rule lab's rows."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.numerics import verify_vs_decode
from specdec_core.bench.quantized import quant_figures
from specdec_core.bench.same_seed import first_tokens_test, same_seed_texts
from specdec_core.core import models
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.ui.loader import cached_pair
from tests.conftest import open_app

PAGE = "pages/lossless.py"
LAB = "pages/acceptance_lab.py"

# the page's tables, told apart by their (language-neutral) column names
COLUMNS = {
    "ll_rule_summary": ["rule", "acceptance", "tv", "lossless"],
    "ll_final_table": ["token", "p", "q", "exact", "typical", "threshold", "passes"],
}


@pytest.fixture(scope="module")
def app_on_tiny_pair(tiny_dirs):
    """Run the app on the tiny pair (in-process: patch the preset, not the env)."""
    mp = pytest.MonkeyPatch()
    tiny = models.Preset("embedded", str(tiny_dirs["target"]), str(tiny_dirs["draft"]), "tiny")
    mp.setitem(models.PRESETS, "embedded", tiny)
    cached_pair.clear()
    yield
    cached_pair.clear()
    mp.undo()


def open_page(lang: str = "en"):
    at = open_app(lang=lang)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def table(at, name: str):
    found = [df.value for df in at.dataframe if list(df.value.columns) == COLUMNS[name]]
    assert len(found) == 1, name
    return found[0]


def check_summary(at, acceptance, tv):
    summary = table(at, "ll_rule_summary")
    np.testing.assert_allclose(summary["acceptance"], acceptance, atol=1e-12)
    np.testing.assert_allclose(summary["tv"], tv, atol=1e-12)
    return summary


@pytest.mark.parametrize(
    ("lang", "title", "lossless", "passes"),
    [("en", "Where “lossless” ends", "✓", "✓ / ✗"), ("zh", "“无损”的边界在哪里", "✓", "✓ / ✗")],
)
def test_renders_with_the_textbook_enumeration(app_on_tiny_pair, lang, title, lossless, passes):
    at = open_page(lang)
    assert at.title[0].value == title
    assert not at.error
    headers = [h.value for h in at.header]
    assert [h[0] for h in headers] == ["①", "②", "③", "④"]  # the four edges, in order
    assert len(at.button(key="ll_run_seed").label) > 4  # each study waits for its button
    assert "ll_res_seed" not in at.session_state  # nothing heavy runs on page load
    # textbook rows, δ = 0.3, ε = 0.09, top-1: typical's bar is ε = 0.09, all three pass
    summary = check_summary(at, [0.6, 1.0, 0.7], [0.0, 0.4, 0.29])
    assert list(summary["lossless"]) == [lossless, "✗", "✗"]
    final = table(at, "ll_final_table")
    np.testing.assert_allclose(final["exact"], [0.6, 0.3, 0.1], atol=1e-12)
    np.testing.assert_allclose(final["typical"], [0.2, 0.5, 0.3], atol=1e-12)
    np.testing.assert_allclose(final["threshold"], [0.38, 0.59, 0.03], atol=1e-12)
    assert list(final["passes"]) == ["✓ / ✓", "✓ / ✓", passes]
    assert any("0.0900" in c.value for c in at.caption)  # the typical bar, written out


def test_knobs_and_presets_change_the_enumeration(app_on_tiny_pair):
    at = open_page()
    at.slider(key="ll_delta").set_value(0.5).run()
    check_summary(at, [0.6, 1.0, 0.2], [0.0, 0.4, 0.08])  # only t1 passes the threshold
    at.number_input(key="ll_eps").set_value(0.2).run()  # bar 0.5·e^−H = 0.204: t3 fails
    np.testing.assert_allclose(table(at, "ll_final_table")["typical"], [0.38, 0.59, 0.03])
    at.button(key="ll_preset_identical").click().run()
    at.slider(key="ll_delta").set_value(0.3).run()
    # q = p, and still lossy: only t3 (0.5) passes the threshold
    summary = check_summary(at, [1.0, 1.0, 0.5], [0.0, 0.0, 0.25])
    assert list(summary["lossless"]) == ["✓", "✓", "✗"]


def test_typed_rows(app_on_tiny_pair):
    at = open_page()
    at.text_input(key="ll_p_text").set_value("4 4 2").run()
    at.text_input(key="ll_q_text").set_value("2, 2, 6").run()
    assert not at.error
    at.slider(key="ll_delta").set_value(1.0).run()
    final = table(at, "ll_final_table")
    np.testing.assert_allclose(final["p"], [0.4, 0.4, 0.2], atol=1e-12)
    # a tie for the top-1: the lower index passes, 0.8 of q is redrawn from p
    np.testing.assert_allclose(final["threshold"], [0.52, 0.32, 0.16], atol=1e-12)


@pytest.mark.parametrize(
    ("lang", "p_text", "q_text", "message"),
    [
        ("en", "0.5, x, 1", None, "Nothing was changed: Every p weight must be a number."),
        ("zh", "0.5, x, 1", None, "p 的每个权重都必须是数字。"),
        ("en", "1, 2", None, "Need 3 to 8 tokens (got 2)."),
        ("en", None, "1, 1, 1, 1", "p has 3 weights and q has 4: give both rows as many."),
        ("zh", None, "1, -1, 1", "q 的权重必须 ≥ 0。"),
        ("en", "0, 0, 0", None, "The p weights add up to 0"),
    ],
)
def test_bad_rows_give_one_message_and_keep_the_rows(
    app_on_tiny_pair, lang, p_text, q_text, message
):
    at = open_page(lang)
    at.slider(key="ll_delta").set_value(0.5).run()
    key, text = ("ll_p_text", p_text) if p_text is not None else ("ll_q_text", q_text)
    at.text_input(key=key).set_value(text).run()
    assert not at.exception
    assert len(at.error) == 1 and message in at.error[0].value
    assert at.text_input(key="ll_p_text").value == "0.6, 0.3, 0.1"  # the last good rows
    assert at.text_input(key="ll_q_text").value == "0.2, 0.5, 0.3"
    assert at.slider(key="ll_delta").value == 0.5
    check_summary(at, [0.6, 1.0, 0.2], [0.0, 0.4, 0.08])
    at.run()
    assert not at.error  # the message is shown once


def test_a_crafted_epsilon_gives_one_message_and_the_default(app_on_tiny_pair):
    at = open_page()
    at.session_state["ll_eps"] = 5.0  # Streamlit brings it to the widget's minimum, 0
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "ε must be a number above 0 and at most 1" in at.error[0].value
    check_summary(at, [0.6, 1.0, 0.7], [0.0, 0.4, 0.29])  # δ 0.3, ε 0.09, top-1 again
    at.run()
    assert not at.error


@pytest.mark.parametrize(
    ("lang", "message"),
    [
        ("en", "ε must be a number above 0 and at most 1 (got 0"),
        ("zh", "ε 必须是大于 0 且不超过 1 的数"),
    ],
)
def test_epsilon_zero_typed_gives_one_message(app_on_tiny_pair, lang, message):
    at = open_page(lang)
    at.number_input(key="ll_eps").set_value(0.0).run()
    assert not at.exception
    assert len(at.error) == 1 and message in at.error[0].value
    assert at.number_input(key="ll_eps").value == pytest.approx(0.09)
    check_summary(at, [0.6, 1.0, 0.7], [0.0, 0.4, 0.29])


def test_rows_from_the_rule_lab(app_on_tiny_pair):
    at = open_page()
    assert at.button(key="ll_from_lab").disabled  # the lab was never opened
    at.switch_page(LAB).run()
    at.button(key="rl_preset_forbidden").click().run()
    at.switch_page(PAGE).run()
    at.button(key="ll_from_lab").click().run()
    assert not at.exception
    final = table(at, "ll_final_table")
    np.testing.assert_allclose(final["p"], [0.0, 0.7, 0.3], atol=1e-12)
    np.testing.assert_allclose(final["q"], [0.5, 0.4, 0.1], atol=1e-12)
    np.testing.assert_allclose(final["exact"], [0.0, 0.7, 0.3], atol=1e-12)
    # typical (bar 0.09): t2, t3 pass; t1 (p = 0) never does
    np.testing.assert_allclose(final["typical"], [0.0, 0.75, 0.25], atol=1e-12)


def test_a_lesson_link_can_name_the_page():
    state = LessonState(page="lossless", lang="zh", seed=3)
    back, problems = decode(encode(state), ["embedded"])
    assert problems == [] and back.page == "lossless" and back.seed == 3


def test_studies_on_the_pair_show_the_backend_numbers(app_on_tiny_pair):
    """Each Run button on the tiny pair: the page shows what bench/lossless and
    bench/numerics return for the same inputs."""
    at = open_page()
    pair = at.session_state["pair"]
    prompt = held_out_prompts(12)[0]
    at.number_input(key="ll_n_seeds").set_value(10).run()
    at.button(key="ll_run_seed").click().run()
    assert not at.exception and not at.error
    texts = same_seed_texts(pair, prompt, 0, 32, 1.0, 4)
    test = first_tokens_test(pair, prompt, 10, 1, 4, 1.0, 0)
    shown = [m for m in at.metric if m.label == "TV(target alone, speculative)"]
    assert shown[0].value == f"{test.tv:.4f}"
    [verdict] = [v.value for v in [*at.success, *at.warning] if v.value.startswith("Over N = 10")]
    agree = test.p_value > 0.01 and test.tv <= test.null_quantiles[2]  # the page's rule
    assert ("first 1 token of" if agree else "first 1 token look") in verdict  # k = 1
    assert verdict.startswith(f"Over N = 10 seeds the {'first' if agree else 'two'}")
    html = "".join(h.value for h in at.get("html"))
    assert texts.alone[:10].replace("<", "&lt;") in html
    at.button(key="ll_run_numerics").click().run()
    assert not at.exception and not at.error
    rows = next(df.value for df in at.dataframe if "delta_float32" in df.value.columns)
    f32 = verify_vs_decode(pair, prompt, "float32", 4)
    np.testing.assert_allclose(
        rows["delta_float32"], [p.max_abs_delta for p in f32.positions], rtol=1e-6
    )
    assert (rows["delta_float32"] < 1e-4).all()  # float32: verify = decode up to rounding
    at.number_input(key="ll_q_prompts").set_value(5).run()
    at.number_input(key="ll_q_seeds").set_value(0).run()
    at.button(key="ll_run_quant").click().run()
    assert not at.exception and not at.error
    quant = next(df.value for df in at.dataframe if list(df.value.columns) == ["measure", "int8"])
    figs = quant_figures(pair, "int8", held_out_prompts(5), 16)
    shown = dict(zip(quant["measure"], quant["int8"], strict=True))
    assert shown["TV to float32 (first token, mean)"] == f"{figs.tv_first_mean:.4f}"
    assert shown["speculative = its own greedy"] == "5 / 5"
    assert shown["χ² p-value vs its own"] == "—"  # N seeds = 0: skipped
    at.number_input(key="ll_t_prompts").set_value(1).run()
    at.number_input(key="ll_t_seeds").set_value(1).run()
    at.button(key="ll_run_trade").click().run()
    assert not at.exception and not at.error
    trade = next(df.value for df in at.dataframe if "speedup" in df.value.columns)
    assert len(trade) == 10 and trade["tv"][0] == 0.0  # exact rule first: TV 0
    assert trade["speedup"][0] == pytest.approx(1.0)
    assert any(c.value.startswith("1 prompt × 1 seed, 32 tokens each") for c in at.caption)


@pytest.mark.parametrize(
    ("lang", "message"),
    [("en", "The prompt has 3202 tokens; this pair's context"), ("zh", "提示词有 3202 个 token")],
)
def test_a_prompt_too_long_gives_one_message_and_runs_nothing(app_on_tiny_pair, lang, message):
    at = open_page(lang)
    at.text_input(key="ll_prompt_own").set_value("to be or not " * 400).run()
    at.button(key="ll_run_seed").click().run()
    assert not at.exception
    assert len(at.error) == 1 and message in at.error[0].value
    assert "ll_res_seed" not in at.session_state
    check_summary(at, [0.6, 1.0, 0.7], [0.0, 0.4, 0.29])  # the rest of the page as it was
