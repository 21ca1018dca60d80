"""AppTest of the acceptance-rule lab page: presets, the displayed exact and Monte Carlo
numbers, editing, step-through rows, temperature and the Chinese UI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.core import models
from specdec_core.core.errors import RuleInputError
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import ModelDrafter
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.rules.lab.exact import RULES
from specdec_core.rules.lab.rows import PRESETS, rows_from_slice
from specdec_core.ui.loader import cached_pair

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "pages/acceptance_lab.py"

# (exact final distributions shown in the table, the wrong rule's, its TV to p)
EXPECTED = {
    "textbook": ([0.6, 0.3, 0.1], [0.44, 0.42, 0.14], 0.16),
    "identical": ([0.25, 0.25, 0.5], [0.25, 0.25, 0.5], 0.0),
    "forbidden": ([0.0, 0.7, 0.3], [0.0, 0.75, 0.25], 0.05),
    "one_hot": ([0.6, 0.3, 0.1], [0.42, 0.51, 0.07], 0.21),
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


def open_page(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


# the page's read-only tables, told apart by their (language-neutral) column names
COLUMNS = {
    "rl_norm_table": ["token", "p", "q"],
    "rl_final_table": ["token", "p", *RULES],
    "rl_rule_summary": ["rule", "acceptance", "tv"],
    "rl_mc_table": ["rule", "rate", "exact", "chi2", "dof", "pvalue", "verdict"],
    "rl_tree_table": ["token", "p", "residual", "naive"],
    "rl_tree_summary": ["rule", "accept_any", "tv_to_p"],
}


def table(at: AppTest, name: str):
    found = [df.value for df in at.dataframe if list(df.value.columns) == COLUMNS[name]]
    assert len(found) == 1, name
    return found[0]


def metric(at: AppTest, label: str) -> float:
    return float(next(m for m in at.metric if m.label == label).value)


def check_shown(at: AppTest, preset: str) -> None:
    correct, wrong, wrong_tv = EXPECTED[preset]
    final = table(at, "rl_final_table")
    np.testing.assert_allclose(final["p"], correct, atol=1e-9)
    np.testing.assert_allclose(final["correct"], correct, atol=1e-9)
    np.testing.assert_allclose(final["resample_p"], wrong, atol=1e-9)
    np.testing.assert_allclose(final["one_hot"], correct, atol=1e-9)
    summary = table(at, "rl_rule_summary")
    np.testing.assert_allclose(summary["tv"], [0.0, wrong_tv, 0.0], atol=1e-9)
    pr = PRESETS[preset]
    assert summary["acceptance"][2] == pytest.approx(pr.p[pr.one_hot_token], abs=1e-9)
    # Monte Carlo at the default N and seed 0: the correct rules pass, the wrong one fails
    mc = table(at, "rl_mc_table")
    p_values = dict(zip(RULES, mc["pvalue"], strict=True))
    assert p_values["correct"] > 0.01 and p_values["one_hot"] > 0.01
    if wrong_tv > 0:
        assert p_values["resample_p"] < 1e-6
    np.testing.assert_allclose(mc["exact"], summary["acceptance"], atol=1e-12)


def test_textbook_preset_on_first_load(app_on_tiny_pair):
    at = open_page()
    check_shown(at, "textbook")
    norm = table(at, "rl_norm_table")
    np.testing.assert_allclose(norm["q"], [0.2, 0.5, 0.3], atol=1e-12)
    assert metric(at, "A = Σ min(p, q)") == pytest.approx(0.6)
    assert metric(at, "β = 1 − A") == pytest.approx(0.4)
    assert metric(at, "Σ [p − q]+") == pytest.approx(0.4)
    assert metric(at, "TV(p, q)") == pytest.approx(0.4)
    assert metric(at, "1 − TV(p, q)") == pytest.approx(0.6)
    mc = table(at, "rl_mc_table")
    assert mc["rate"][0] == pytest.approx(0.6, abs=0.02)  # empirical acceptance ≈ A
    assert at.selectbox(key="rl_y").value == 1  # one-hot draft proposes t2: A = 0.3
    # accepted drafts alone follow min(p, q)/A, not p
    accepted = {m.label: float(m.value) for m in at.metric if "/" not in m.value}  # not 10/9
    assert accepted["χ² p-value vs min(p, q)/A"] > 0.01
    assert accepted["χ² p-value vs p"] < 1e-6
    # the step-through preset is disabled with an explanation (no verified round)
    assert at.button(key="rl_preset_step").disabled
    assert any("No verified round yet" in c.value for c in at.caption)


@pytest.mark.parametrize("preset", ["identical", "forbidden", "one_hot", "textbook"])
def test_each_preset_button(app_on_tiny_pair, preset):
    at = open_page()
    at.button(key="rl_preset_forbidden").click().run()  # go elsewhere first …
    at.button(key=f"rl_preset_{preset}").click().run()  # … then load the preset under test
    assert not at.exception
    check_shown(at, preset)
    if preset == "identical":
        assert any("never used" in c.value for c in at.caption)  # residual 0/0 not evaluated


def test_edit_resize_and_bad_input(app_on_tiny_pair):
    at = open_page()
    at.number_input(key="rl_ntok").set_value(5).run()
    norm = table(at, "rl_norm_table")
    assert list(norm["token"]) == ["t1", "t2", "t3", "t4", "t5"]
    np.testing.assert_allclose(norm["p"], np.array([0.6, 0.3, 0.1, 0.1, 0.1]) / 1.2, atol=1e-12)
    np.testing.assert_allclose(table(at, "rl_final_table")["correct"], norm["p"], atol=1e-9)
    # a cell edit (seeded through the editor's state, as AppTest requires)
    editor_key = f"rl_editor_{at.session_state['rl_ver']}"
    at.session_state[editor_key] = {
        "edited_rows": {0: {"q": -1.0}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert at.error and "q weights must be ≥ 0" in at.error[0].value


def test_rows_from_the_step_through_round(app_on_tiny_pair):
    at = open_page()
    pair = at.session_state["pair"]
    session = SpeculativeSession(pair, "ROMEO:", SessionConfig(gamma=3, temperature=1.0))
    session.run_round()
    at.session_state["step_session"] = session
    at.run()
    assert not at.button(key="rl_preset_step").disabled
    at.selectbox(key="rl_step_pos").set_value(1).run()
    at.button(key="rl_preset_step").click().run()
    assert not at.exception
    norm = table(at, "rl_norm_table")
    check = session.history[-1].verify.checks[0]
    assert len(norm) == 8 and list(norm["token"])[-1] == "other"
    assert norm["p"].sum() == pytest.approx(1.0, abs=1e-9)
    rows = rows_from_slice(check.dist, keep=[check.token.id])
    np.testing.assert_allclose(norm["p"], rows.p, atol=1e-12)
    np.testing.assert_allclose(norm["q"], rows.q, atol=1e-12)
    ids = [tok.id for tok in rows.tokens]
    assert check.token.id in ids  # the drafted token is always named …
    assert at.selectbox(key="rl_y").value == ids.index(check.token.id)  # … and is the one-hot y
    slice_ids = check.dist.token_ids.tolist()
    for tok, p_shown in zip(rows.tokens, norm["p"][:7], strict=True):  # the real p(token)
        assert p_shown == pytest.approx(float(check.dist.p[slice_ids.index(tok.id)]), abs=1e-6)
    final = table(at, "rl_final_table")
    np.testing.assert_allclose(final["correct"], norm["p"], atol=1e-9)
    assert any("round 1, position 1" in i.value for i in at.info)


def test_temperature_and_chinese(app_on_tiny_pair):
    at = open_page("zh")
    assert "接受规则实验室" in at.title[0].value
    np.testing.assert_allclose(
        table(at, "rl_final_table")["resample_p"], [0.44, 0.42, 0.14], atol=1e-9
    )
    at.slider(key="rl_temp").set_value(0.0).run()
    assert metric(at, "T = 0.00 时的 A") == 0.0  # greedy rows: argmax t1 vs t2
    assert metric(at, "T = 1 时的 A（即编辑后的分布）") == pytest.approx(0.6)
    assert not at.exception


@pytest.mark.parametrize(
    ("lang", "header"),
    [("en", "Several candidates at one node (a token tree)"), ("zh", "同一节点的多个候选（树）")],
)
def test_tree_node_section(app_on_tiny_pair, lang, header):
    at = open_page(lang)
    assert any(header in h.value for h in at.header)
    assert at.selectbox(key="rl_tree_k").value == 2  # textbook rows, two siblings
    tree = table(at, "rl_tree_table")
    np.testing.assert_allclose(tree["p"], [0.6, 0.3, 0.1], atol=1e-12)
    np.testing.assert_allclose(tree["residual"], [0.6, 0.3, 0.1], atol=1e-12)
    np.testing.assert_allclose(tree["naive"], [0.44, 0.42, 0.14], atol=1e-12)
    summary = table(at, "rl_tree_summary")
    np.testing.assert_allclose(summary["tv_to_p"], [0.0, 0.16], atol=1e-12)
    np.testing.assert_allclose(summary["accept_any"], [0.68, 0.84], atol=1e-12)
    assert any("β = 0.4000" in m.value for m in at.markdown)  # the closed form's β
    if lang == "en":
        at.selectbox(key="rl_tree_k").set_value(3).run()
        assert not at.exception
        tree = table(at, "rl_tree_table")
        np.testing.assert_allclose(tree["naive"], [0.376, 0.468, 0.156], atol=1e-12)
        np.testing.assert_allclose(tree["residual"], [0.6, 0.3, 0.1], atol=1e-12)
        at.selectbox(key="rl_tree_k").set_value(1).run()
        assert any("both rules give p" in c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_position_with_one_token_is_refused_and_the_rows_stay(app_on_tiny_pair, lang):
    """At temperature 0 a draft that agrees with the target has p = q = one-hot on it: the
    lab says so (one message) and keeps the rows it had (all sections still drawn)."""
    at = open_page(lang)
    before = table(at, "rl_norm_table")
    pair = at.session_state["pair"]
    config = SessionConfig(gamma=2, temperature=0.0)
    session = SpeculativeSession(pair, "ROMEO:", config, drafter=ModelDrafter(pair.target))
    session.run_round()
    check = session.history[-1].verify.checks[0]
    assert check.status == "accepted" and check.dist.token_ids.tolist() == [check.token.id]
    with pytest.raises(RuleInputError) as refused:
        rows_from_slice(check.dist, keep=[check.token.id])
    assert refused.value.code == "one_token"
    at.session_state["step_session"] = session
    at.run()
    at.selectbox(key="rl_step_pos").set_value(1).run()
    at.button(key="rl_preset_step").click().run()
    assert not at.exception
    words = {"en": "all their mass on one token", "zh": "全部概率放在同一个 token 上"}[lang]
    assert len(at.error) == 1 and words in at.error[0].value
    assert table(at, "rl_norm_table").equals(before)
    table(at, "rl_final_table")  # the later sections are still drawn


def _frame(at: AppTest, first_columns: list[str]):
    found = [
        df.value
        for df in at.dataframe
        if list(df.value.columns)[: len(first_columns)] == first_columns
    ]
    assert len(found) == 1, first_columns
    return found[0]


@pytest.mark.parametrize(
    ("lang", "header"),
    [
        ("en", "State beyond the KV cache: the wrong ways"),
        ("zh", "KV 缓存之外的状态：错误的做法"),
    ],
)
def test_state_section_the_broadcast_penalty_exactly(app_on_tiny_pair, lang, header):
    """Section 8's hand-made case at its defaults (presence ln 2, θ = 1, γ = 2, two
    tokens): per-prefix = target alone, broadcast TV 37/336, ignored 17/112; without a
    penalty every TV is 0; the pair's measurement runs on the button."""
    at = open_page(lang)
    assert any(header in h.value for h in at.header)
    laws = _frame(at, ["outcome", "target", "per_prefix", "broadcast", "ignored"])
    np.testing.assert_allclose(laws["per_prefix"], laws["target"], atol=1e-12)
    assert list(laws["outcome"][:3]) == ["A A", "A B", "A C"]
    tv = 0.5 * np.abs(laws["broadcast"] - laws["target"]).sum()
    assert tv == pytest.approx(37 / 336, abs=1e-7)
    metrics = [m.value for m in at.metric if "/" not in m.value][-3:]  # not section 9's 10/9
    assert metrics == ["0", "0.1101", "0.1518"]
    if lang == "en":
        at.selectbox(key="rl_st_presence").set_value(0.0).run()
        assert not at.exception
        laws = _frame(at, ["outcome", "target", "per_prefix", "broadcast", "ignored"])
        for rule in ("per_prefix", "broadcast", "ignored"):
            np.testing.assert_allclose(laws[rule], laws["target"], atol=1e-12)
        assert "rl_st_mc" not in at.session_state
        at.button(key="rl_st_mc_run").click().run()
        assert not at.exception
        mc = _frame(at, ["rule", "r0", "r1", "r2", "tv"])
        assert mc["tv"][0] == "—" and all(float(v) < 1 for v in mc["tv"][1:])
        assert at.session_state["rl_st_mc"].n_samples == 100
