"""Logits → the *sampling distribution* (temperature, top-k, top-p), in float32.

The distributions ``p`` (target) and ``q`` (draft) that the acceptance rule compares are
the ones actually sampled from, i.e. *after* these transforms, for both models
(Leviathan et al. 2023, §2.3: "we can apply standard sampling methods such as argmax, top-k,
nucleus to the logits, and use the resulting distributions as p and q").

Temperature 0 means greedy decoding: the distribution is one-hot on the argmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specdec_core.core.errors import ConfigError

MAX_TEMPERATURE = 100.0


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become a sampling distribution.

    Attributes:
        temperature: ≥ 0 and ≤ ``MAX_TEMPERATURE``; 0 means greedy (one-hot argmax).
        top_k: keep the tokens whose score is at least the ``top_k``-th largest; 0
            disables. Ties at that score are all kept, so more than ``top_k`` tokens may
            survive (as transformers' ``TopKLogitsWarper`` does). Must be ≤ vocabulary
            size (checked by :meth:`validate` when the vocabulary size is known).
        top_p: nucleus mass in (0, 1]; 1 disables.

    Raises:
        ConfigError: from :meth:`validate` on NaN, negative or too-large values.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self, vocab_size: int | None = None) -> SamplingConfig:
        t = self.temperature
        if not isinstance(t, int | float) or math.isnan(t) or t < 0 or t > MAX_TEMPERATURE:
            raise ConfigError(
                f"temperature must be between 0 and {MAX_TEMPERATURE:g} (0 = greedy), got {t!r}"
            )
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top-k must be a whole number ≥ 0 (0 = off), got {self.top_k!r}")
        if vocab_size is not None and self.top_k > vocab_size:
            raise ConfigError(
                f"top-k must be at most the vocabulary size {vocab_size}, got {self.top_k}"
            )
        p = self.top_p
        if not isinstance(p, int | float) or math.isnan(p) or not 0.0 < p <= 1.0:
            raise ConfigError(f"top-p must be in (0, 1], got {p!r}")
        return self


def logits_to_probs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Turn logits into the distribution that is actually sampled from.

    Args:
        logits: ``[..., V]`` any float dtype.
        config: temperature / top-k / top-p.

    Returns:
        ``[..., V]`` float32 rows that sum to 1. Greedy (temperature 0): one-hot on the
        argmax (lowest index on ties). Order of transforms as in transformers'
        ``generate``: temperature, then top-k (ties with the ``k``-th score kept), then
        top-p (the smallest set of tokens whose mass reaches ``top_p``; the most likely
        token is always kept).
    """
    logits = logits.float()
    if config.greedy:
        return one_hot(logits.argmax(dim=-1), logits.shape[-1])
    # T = 1 divides by 1.0, which is exact: skip that pass over the row
    scores = logits if config.temperature == 1.0 else logits / config.temperature
    vocab = scores.shape[-1]
    if 0 < config.top_k < vocab:
        kth = torch.topk(scores, config.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if config.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        sorted_probs = sorted_scores.softmax(dim=-1)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop_sorted = mass_before >= config.top_p  # first token has mass_before 0: always kept
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores.softmax(dim=-1)


def one_hot(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``[...]`` int64 ids → ``[..., V]`` float32 one-hot rows."""
    out = torch.zeros(*ids.shape, vocab_size, dtype=torch.float32, device=ids.device)
    return out.scatter_(-1, ids.unsqueeze(-1), 1.0)


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance ``TV(p, q) = ½ Σ |p − q| = 1 − Σ min(p, q)``.

    Args:
        p, q: ``[..., V]`` probability rows (float32/float64).

    Returns:
        ``[...]`` same dtype; Leviathan et al. 2023, Lemma 3.3 (``α = 1 − TV``).
    """
    return 0.5 * (p - q).abs().sum(dim=-1)


#: A decision closer to its threshold than this (relative) is a *near-tie*: low-bit
#: differences between devices or thread counts (≈ 1e-6 on a float32 logit, more after a
#: softmax of small probabilities) could decide it the other way, so the record flags it
#: and the screen says so instead of silently differing. About 1 check in 10⁴ is flagged.
NEAR_TIE_REL = 1e-4


def near_tie_draw(u: float | None, accept_prob: float) -> bool:
    """Whether the sampling rule's ``u < a`` is a near-tie:
    ``|u − a| ≤ NEAR_TIE_REL · max(u, a)``. ``u`` is ``None`` (not drawn): never."""
    if u is None:
        return False
    return abs(u - accept_prob) <= NEAR_TIE_REL * max(u, accept_prob)


def near_tie_argmax(logits: torch.Tensor) -> bool:
    """Whether the argmax of a ``[V]`` row of logits (or log-probabilities: the same gaps)
    is a near-tie: its top two values closer than ``NEAR_TIE_REL`` nats, so the greedy
    choice could flip."""
    if logits.numel() < 2:
        return False
    top = torch.topk(logits.detach().float().cpu(), 2).values
    return float(top[0] - top[1]) <= NEAR_TIE_REL
