"""The speed page's token-wise vs block verification table (``ui/speed/block_rule.py``):
it shows the measured file's figures (``assets/measured/block_verification.json``, the
output of ``benchmarks/block_verification.py --json``) in both languages, and the file
covers every chain drafter at T = 0.7 and T = 1."""

from __future__ import annotations

import pytest
from conftest import html_tables, open_app

from specdec_core.ui.speed.block_rule import measured

DRAFTERS = {"model", "ngram", "early-exit", "eagle", "mtp", "block", "recurrent"}


def test_the_file_covers_every_chain_drafter_at_both_temperatures():
    data = measured()
    assert data is not None
    cells = {(r["drafter"], r["temperature"]) for r in data["rows"]}
    assert cells == {(d, t) for d in DRAFTERS for t in (0.7, 1.0)}
    for r in data["rows"]:
        assert 1.0 <= r["token_tokens_per_round"] <= data["gamma"] + 1
        assert 1.0 <= r["block_tokens_per_round"] <= data["gamma"] + 1
    assert data["prompts"] >= 10 and data["load_before"] > 0


@pytest.mark.parametrize(("lang", "title"), [("en", "block verification"), ("zh", "块验证")])
def test_the_speed_page_shows_the_measured_table(lang, title):
    at = open_app(lang=lang)
    at.switch_page("pages/speed.py").run()
    assert not at.exception, at.exception
    assert [e for e in at.expander if title in e.label]
    [table] = html_tables(at, "sp-bv")  # in the expander, headers wrapping
    data = measured()
    first = data["rows"][0]
    assert len(table) == len(data["rows"])
    assert list(table.iloc[0])[2:4] == [
        f"{first['token_tokens_per_round']:.2f}",
        f"{first['block_tokens_per_round']:.2f}",
    ]
