"""The verification rules a chain's sampled round may use instead of the token-wise rule
(``rules/acceptance.verify_sampling``, the default, in ``engine/chain/round.verify``), as
one table from the settings:

* ``block`` — block verification (``rules/block.py``, Sun et al. 2025): the drafted block
  decided jointly, exact, never fewer drafts kept in expectation;
* a lossy rule (``rules/lossy.py``: Medusa's typical acceptance, a probability threshold),
  only from an explicit ``SessionConfig.acceptance``, never a default.

Each is a :data:`SampledRule` ``(draft_ids [γ] int64, q_rows [γ, V], p_rows [γ + 1, V],
generator) -> (Verdict, BlockDecision | None)``, drawing from the round's verification
stream. Greedy rounds never consult them (every rule decides as the greedy rule at T = 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specdec_core.core.settings import VerificationName
from specdec_core.rules.acceptance import BlockDecision, Verdict
from specdec_core.rules.block import verify_block
from specdec_core.rules.lossy import LossyRule, verify_lossy

SampledRule = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator],
    tuple[Verdict, BlockDecision | None],
]


@dataclass(frozen=True)
class LossyVerification:
    """A :class:`LossyRule` as a :data:`SampledRule` (it reads ``p`` alone, ``q`` unused)."""

    rule: LossyRule

    def __call__(
        self,
        draft_ids: torch.Tensor,
        q_rows: torch.Tensor,
        p_rows: torch.Tensor,
        rng: torch.Generator,
    ) -> tuple[Verdict, BlockDecision | None]:
        return verify_lossy(draft_ids, p_rows, rng, self.rule), None


#: ``SessionConfig.verification`` → its rule (``None``: the token-wise rule).
VERIFICATION_RULES: dict[str, SampledRule | None] = {"token": None, "block": verify_block}


def sampled_rule(verification: VerificationName, lossy: LossyRule | None) -> SampledRule | None:
    """The rule a chain's sampled rounds use instead of the token-wise one: ``lossy`` when
    set (``SessionConfig.validate`` refuses it with block verification), else the table's
    row for ``verification``; ``None`` for the token-wise rule."""
    return LossyVerification(lossy) if lossy is not None else VERIFICATION_RULES[verification]
