"""The table from the settings to the rule a chain's sampled rounds use instead of the
token-wise one (``rules/verification.py``)."""

from __future__ import annotations

import typing

import torch

from specdec_core.core.settings import VerificationName
from specdec_core.rules.block import verify_block
from specdec_core.rules.lossy import LossyRule, verify_lossy
from specdec_core.rules.verification import (
    VERIFICATION_RULES,
    LossyVerification,
    sampled_rule,
)

# V = 4; drafts y_1 = 0, y_2 = 1
P_ROWS = torch.tensor([[0.6, 0.2, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.25, 0.25, 0.25, 0.25]])
Q_ROWS = torch.tensor([[0.4, 0.4, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1]])
DRAFTS = torch.tensor([0, 1])


def test_every_verification_setting_has_a_row():
    assert tuple(VERIFICATION_RULES) == typing.get_args(VerificationName)


def test_token_wise_is_no_rule_and_block_is_verify_block():
    assert sampled_rule("token", None) is None
    assert sampled_rule("block", None) is verify_block


def test_a_lossy_rule_comes_first_and_decides_as_verify_lossy():
    """threshold δ = 0.5, no top-k clause: p_1(0) = 0.6 passes, p_2(1) = 0.1 fails, so one
    draft is kept and the correction is drawn from p_2 with the stream's first draw."""
    lossy = LossyRule("threshold", delta=0.5, top_k=0)
    rule = sampled_rule("block", lossy)  # the settings refuse both; the lossy rule wins
    assert rule == LossyVerification(lossy)
    verdict, block = rule(DRAFTS, Q_ROWS, P_ROWS, torch.Generator().manual_seed(3))
    expected = verify_lossy(DRAFTS, P_ROWS, torch.Generator().manual_seed(3), lossy)
    assert block is None and verdict == expected
    assert (verdict.accepted, verdict.kind, verdict.accept_probs) == (1, "correction", (1.0, 0.0))
    assert verdict.u == ()  # a lossy rule draws no u
