"""Table headers that a ``st.dataframe`` would cut (it never wraps one): the rule lab's
Monte Carlo verdict column keeps its significance level in the help, so its header fits
at 1024 px in zh; the every-source table sizes each column to its header and cells.
AppTest on the tiny pair; :func:`header_width` itself measured on the real labels."""

from __future__ import annotations

import json

import pytest
from test_page_acceptance_lab import app_on_tiny_pair, open_page  # noqa: F401 - fixture

from specdec_core.ui.i18n import tr
from specdec_core.ui.render import header_width


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_monte_carlo_verdict_header_is_short_and_its_help_names_the_level(
    app_on_tiny_pair,  # noqa: F811 - the fixture
    lang,
):
    at = open_page(lang)
    [mc] = [d for d in at.dataframe if "verdict" in d.value.columns]
    config = json.loads(mc.proto.columns)
    verdict = config["verdict"]
    assert verdict["label"] == tr("rl_col_verdict", lang)
    assert "0.01" not in verdict["label"] and "0.01" in verdict["help"]
    assert header_width(verdict["label"]) <= 80  # ≈ 2 words: no cut at 1024 px


def test_header_width_covers_the_header_and_the_cells():
    pred = tr("src_col_tokens_pred", "en")  # "tokens / round (predicted)": cut at 1440 before
    assert header_width(pred) >= 7 * len(pred)
    zh = tr("src_col_tokens_pred", "zh")
    assert header_width(zh) >= 13 * sum(ord(c) > 0x2E80 for c in zh)
    assert header_width("α", ["0.71", "Draft model with a long name"]) == header_width(
        "Draft model with a long name"
    )
    assert header_width("x", ["y" * 500]) == 24 + 400  # a cell counts up to 400 px
