"""The drafter interface: ``propose(context, gamma, ...) -> Draft`` and what else every
draft source provides, plus the one draw a model drafter makes per position.

Modelled on transformers' ``CandidateGenerator``: a drafter proposes up to γ candidate
tokens after the committed context, with the distributions ``q_1..q_γ`` they were drawn
from. A drafter without a distribution returns one-hot rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from specdec_core.core.kvcache import ModelCache
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, one_hot

DraftMethod = Literal["probabilistic", "greedy"]


@dataclass(frozen=True)
class Draft:
    """Candidates from one proposal.

    Attributes:
        ids: ``[γ']`` int64 on CPU, ``γ' ≤ γ`` (a drafter may propose fewer).
        probs: ``[γ', V]`` float32 on CPU, the rows ``q_i`` each ``ids[i]`` was drawn from
            (one-hot for deterministic proposals).
        forwards: draft-model forwards run.
        ms: wall time in milliseconds.
    """

    ids: torch.Tensor
    probs: torch.Tensor
    forwards: int
    ms: float


class Drafter(Protocol):
    """What every draft source provides (all methods required; no hidden capabilities).

    ``propose`` is the general proposal with the rows ``q_i`` (the step machine and the
    sampled fast path); ``propose_argmax`` is the same proposal at temperature 0 without
    building one-hot rows (the greedy fast path; it must return exactly the ids
    ``propose`` returns at temperature 0). ``forward_ms`` is the time spent inside draft
    model forwards so far (0.0 for a drafter without a model). ``attach`` is called by
    every engine path once, right after it creates the target's cache (a feature-level
    drafter keeps a reference to read the target's hidden states; others ignore it).
    ``tree_logits`` serves tree drafting (``tree.py``): the drafter's next-token logits
    after any context, or ``None`` for a drafter without a distribution. ``forwards``
    counts the draft forwards that really ran since the drafter was made (one call may run
    several, or none: the EAGLE head catching up on features); ``tree.draft_tree`` reports
    a tree's draft forwards as its difference, the way ``Draft.forwards`` counts a chain's.
    """

    name: str

    def propose(
        self,
        context: list[int],
        gamma: int,
        sampling: SamplingConfig,
        method: DraftMethod,
        generator: torch.Generator,
    ) -> Draft: ...

    def propose_argmax(self, context: list[int], gamma: int) -> tuple[list[int], int]:
        """``([γ'] drafted ids, forwards run)`` at temperature 0, ``γ' ≤ gamma``."""
        ...

    def cached_ids(self) -> list[int] | None:
        """Ids covered by the drafter's KV cache (``None`` if it keeps none)."""
        ...

    def rollback(self, length: int) -> int:
        """Crop the drafter's cache to ``length`` positions; returns positions removed."""
        ...

    @property
    def forward_ms(self) -> float:
        """Milliseconds spent in draft-model forwards since the drafter was made."""
        ...

    @property
    def forwards(self) -> int:
        """Draft forwards run since the drafter was made (model or head forwards; 0 for a
        drafter without a model)."""
        ...

    def attach(self, target: ModelCache) -> None:
        """Called once with the target's cache before the first proposal."""
        ...

    def tree_logits(self, context: list[int]) -> torch.Tensor | None:
        """``[V]`` float32 logits for the token after ``context`` (committed ids followed by
        a tree path), from and extending the drafter's own cache (one forward over the ids
        it lacks); ``None`` when the drafter has no distribution (tree drafting refused)."""
        ...


def sync_device() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def draw_proposal(
    logits: torch.Tensor,
    sampling: SamplingConfig,
    method: DraftMethod,
    generator: torch.Generator,
) -> tuple[int, torch.Tensor]:
    """One drafted token from one row of draft logits.

    Args:
        logits: ``[V]`` draft logits (any device).

    Returns:
        ``(token_id, q)`` with ``q`` the ``[V]`` float32 CPU row the token was drawn from:
        the processed distribution (``probabilistic``) or one-hot on its argmax
        (``greedy``, and always at temperature 0).
    """
    probs = logits_to_probs(logits, sampling).cpu()
    if method == "greedy" or sampling.greedy:
        token = int(probs.argmax().item())
        return token, one_hot(torch.tensor(token), probs.shape[-1])
    token = int(torch.multinomial(probs, 1, generator=generator).item())
    return token, probs
