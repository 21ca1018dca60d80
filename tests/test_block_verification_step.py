"""The step page under block verification (``ui/step/block_checks.py``): the checks table
shows p′ and h, token-wise's decision with the same u, and ★ where block verification
kept a draft token-wise would not have; the page says it in both languages."""

from __future__ import annotations

import pytest
from conftest import click_button, html_tables, open_app

from specdec_core.core.trace import TokenInfo
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.rules.acceptance import BlockDecision
from specdec_core.ui.step.strip_checks import check_columns


def _check(position: int, status: str, p: float, q: float, u: float) -> PositionCheck:
    tok = TokenInfo(40 + position, f"t{position}", f"t{position}")
    return PositionCheck(position, tok, p, q, min(1.0, p / q), u, status, tok, False, 0.5, None)


def test_block_columns_against_token_wise_with_the_same_u():
    """Token-wise rejects y_1 (u = 0.6 ≥ a = 0.5); block verification keeps both drafts
    (p′_2 = 1: y_2 pays y_1 back). The verdict column is block's, the token-wise column
    says rejected / not reached, starred where block kept."""
    checks = (
        _check(1, "accepted", 1 / 3, 2 / 3, 0.6),
        _check(2, "accepted", 2 / 3, 1 / 3, 0.9),
    )
    block = BlockDecision(
        weights=(0.5, 1.0),
        stop_probs=(0.0, 1.0),
        u=(0.6, 0.9),
        kept=2,
        token_wise=0,
        resample_position=3,
        residual_mass=1.0,
        residual_ids=(1, 0),
        residual_probs=(2 / 3, 1 / 3),
    )
    cols = check_columns(checks, greedy=False, block=block)
    assert cols["p′ (block weight)"] == ["0.5000", "1.000"]
    assert cols["h (block test)"] == ["0", "1.000"]
    assert cols["token-wise, same u"] == ["rejected ★", "not reached ★"]
    assert cols["u"] == ["0.6000", "0.9000"]
    assert cols["a = min(1, p/q)"] == ["0.5000", "1.000"]
    plain = check_columns(checks, greedy=False)
    assert "token-wise, same u" not in plain and "h (block test)" not in plain


@pytest.mark.parametrize(
    ("lang", "verify", "column", "says"),
    [
        ("en", "② Verify", "token-wise, same u", "Block verification"),
        ("zh", "② 验证", "逐 token 验证（相同 u）", "块验证"),
    ],
)
def test_the_step_page_shows_the_block_rule(embedded_pair, lang, verify, column, says):
    at = open_app(lang=lang)
    at.sidebar.slider(key="cfg_temperature").set_value(1.0).run()
    at.sidebar.radio(key="cfg_verification").set_value("block").run()
    assert not at.exception, at.exception
    propose = "① Propose" if lang == "en" else "① 提议"
    click_button(at, propose)
    click_button(at, verify)
    checks = html_tables(at, "checks-table")[0]
    assert column in checks.columns and len(checks) >= 1
    assert all(x != "—" for x in checks["u"])  # every u is tested, backwards
    # the block rule's note, under the table in the strip's element, its bold as HTML
    [element] = [h.value for h in at.get("html") if "checks-table" in h.value]
    assert '<div class="sd-note" ' in element and f"<b>{says}</b>" in element


@pytest.mark.parametrize(
    ("lang", "says"), [("en", "token-wise verification"), ("zh", "逐 token 验证")]
)
def test_a_tree_with_block_verification_is_refused_in_words(embedded_pair, lang, says):
    """Block verification verifies a chain: asking for a tree says so (translated) and
    the page keeps working."""
    at = open_app(lang=lang)
    at.sidebar.slider(key="cfg_temperature").set_value(1.0).run()
    at.sidebar.radio(key="cfg_verification").set_value("block").run()
    at.segmented_control(key=f"step_mode_{lang}").set_value("tree").run()
    assert not at.exception, at.exception
    shown = [e.value for e in at.error] + [w.value for w in at.warning]
    assert any(says in x for x in shown), shown
