"""The rule lab's block-verification section (``rules/lab/block.py``, ``ui/lab/block.py``):
the paper's {a, b} numbers as exact fractions, the lab's copy of the rule against the
engine's, block ≥ token-wise ≤ ideal on random rows, both rules exact, the Monte Carlo's
χ² (and that it tells the two rules apart), and the page in both languages."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from specdec_core.rules.block import block_weights
from specdec_core.rules.lab import block as B
from specdec_core.rules.lab.montecarlo import chi_square
from specdec_core.ui.lab.block import fractions_over_one_denominator

APP = str(Path(__file__).resolve().parents[1] / "app.py")
F = Fraction


def test_the_papers_example_exactly():
    lab = B.block_lab(B.AB_P, B.AB_Q, B.AB_GAMMA)
    assert lab.expected == {"token": F(10, 9), "block": F(11, 9), "ideal": F(12, 9)}
    three = [lab.expected[k] for k in ("token", "block", "ideal")]
    assert fractions_over_one_denominator(three) == ["10/9", "11/9", "12/9"]
    # kept 0 / 1 / 2: token-wise 1/3, 2/9, 4/9; block 1/3, 1/9, 5/9 (mass moves to "keep 2")
    assert lab.lengths["token"] == (F(1, 3), F(2, 9), F(4, 9))
    assert lab.lengths["block"] == (F(1, 3), F(1, 9), F(5, 9))
    for rule in ("token", "block"):  # both exact: the output's tokens follow p
        assert lab.first[rule] == B.AB_P and lab.second[rule] == B.AB_P
        assert lab.tv[rule] == 0.0


def test_the_key_step_of_block_ab():
    """Block "a b": p'_1 = 1/2, p'_2 = 1; at i = 1 the scaled target ½p = (1/6, 1/3) stays
    under q = (2/3, 1/3): no excess, h_1 = 0, the mass flows on; at i = 2 nothing is
    drafted after the block, so the excess is p itself and h_2 = p'_2 = 1."""
    steps = B.block_steps([1 / 3, 2 / 3], [2 / 3, 1 / 3], (0, 1))
    assert [s.weight for s in steps] == pytest.approx([1.0, 0.5, 1.0])
    assert steps[1].scaled_p == pytest.approx((1 / 6, 1 / 3))
    assert steps[1].excess == pytest.approx((0.0, 0.0)) and steps[1].stop_prob == 0.0
    assert steps[2].q == (0.0, 0.0) and steps[2].excess == pytest.approx((1 / 3, 2 / 3))
    assert steps[2].stop_prob == pytest.approx(1.0)
    assert steps[0].excess == pytest.approx((0.0, 1 / 3))  # token-wise's [p − q]+ at i = 0


@pytest.mark.parametrize("seed", range(6))
def test_the_labs_copy_is_the_engines_rule_and_block_sits_between(seed):
    rng = np.random.default_rng(seed)
    v, gamma = (3, 3) if seed % 2 else (4, 2)
    p, q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
    for block in itertools.product(range(v), repeat=gamma):
        pt = torch.tensor(np.tile(p, (gamma + 1, 1)))
        qt = torch.tensor(np.tile(q, (gamma, 1)))
        engine = block_weights(torch.tensor(block), qt, pt).keep_probs
        assert B.keep_law(list(p), list(q), block, "block") == pytest.approx(engine, abs=1e-12)
    lab = B.block_lab(list(p), list(q), gamma)
    e = lab.expected
    assert e["token"] - 1e-12 <= e["block"] <= e["ideal"] + 1e-12
    assert lab.tv["token"] < 1e-12 and lab.tv["block"] < 1e-12
    assert lab.first["block"] == pytest.approx(tuple(p), abs=1e-12)


def test_monte_carlo_fits_both_rules_and_tells_them_apart():
    mc = B.block_monte_carlo([1 / 3, 2 / 3], [2 / 3, 1 / 3], 2, 20_000, seed=0)
    for rule in ("token", "block"):
        assert mc.length_fit[rule].consistent and mc.first_fit[rule].consistent
    token_law = np.array([1 / 3, 2 / 9, 4 / 9])
    assert chi_square(mc.lengths["block"], token_law).p_value < 1e-6  # block ≠ token-wise
    assert mc.more_than_token > 0
    assert int(mc.lengths["block"].sum()) == 20_000


def test_a_gamma_over_the_limit_is_one_clear_error():
    with pytest.raises(B.RuleInputError) as exc:
        B.block_lab([0.5] * 8, [0.5] * 8, 4)  # 8^4 blocks
    assert exc.value.code == "block_gamma"


@pytest.mark.parametrize(("lang", "words"), [("en", "Block verification"), ("zh", "块验证")])
def test_the_lab_page_shows_the_three_fractions(lang, words):
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page("pages/acceptance_lab.py")
    at.run()
    assert not at.exception, at.exception
    assert any(words in h.value for h in at.header)
    metrics = {m.value for m in at.metric}
    assert {"10/9", "11/9", "12/9"} <= metrics
    [button] = [b for b in at.button if b.key == "rl_bv_mc"]
    button.click().run()
    assert not at.exception, at.exception
    assert any("20,000" in c.value for c in at.caption)
