"""The speculative-sampling rule of :mod:`specdec_core.rules.acceptance`, vectorised over
``n`` independent single-position verifications (γ = 1) — what the acceptance-rule
lab's Monte Carlo runs.

Same rule, same notation as :func:`specdec_core.rules.acceptance.verify_sampling`
(Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2): draft ``y ~ q``, draw
``u ~ U[0, 1)``, accept ``y`` iff ``u < a = min(1, p(y) / q(y))``, otherwise emit a draw
from ``r = norm([p − q]+)`` (``p`` when ``r`` is undefined, as ``verify_sampling`` does)
— or, for teaching only, from ``p`` (``resample_from="target"``, the biased rule).
``tests/test_acceptance_batch.py`` checks these against the scalar rule on random rows.
"""

from __future__ import annotations

import torch

from specdec_core.rules.acceptance import ResampleFrom, residual_distribution


def accept_mask(p: torch.Tensor, q: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``u < min(1, p(y)/q(y))`` elementwise (Leviathan et al. 2023, Alg. 1).

    Args:
        p, q: ``[V]`` probability rows (target, draft).
        y: ``[n]`` int64 drafted tokens, each with ``q(y) > 0``.
        u: ``[n]`` uniforms in ``[0, 1)``.

    Returns:
        ``[n]`` bool: which drafts are accepted.
    """
    ratio = (p[y] / q[y]).clamp(max=1.0)  # a = min(1, p(y)/q(y)), [n]
    return u < ratio


def rejection_source(
    p: torch.Tensor, q: torch.Tensor, resample_from: ResampleFrom = "residual"
) -> torch.Tensor:
    """The row a rejected position's token is drawn from: ``r = norm([p − q]+)`` (``p``
    where ``[p − q]+`` has no mass: ``p == q``, a rejection is then a probability-0 event)
    or ``p`` itself for ``resample_from="target"``. ``[V] → [V]``."""
    if resample_from == "target":
        return p
    residual = residual_distribution(p, q)
    return p if residual is None else residual


def sample_position(
    p: torch.Tensor,
    q: torch.Tensor,
    n: int,
    generator: torch.Generator,
    resample_from: ResampleFrom = "residual",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` independent single-position verifications at once.

    Args:
        p, q: ``[V]`` float64 (or float32) CPU probability rows.
        n: number of draws ≥ 0.
        generator: CPU ``torch.Generator``; draws in order: all ``y``, all ``u``, then the
            resampled tokens for the rejected draws.
        resample_from: ``"residual"`` (correct) or ``"target"`` (biased, for teaching).

    Returns:
        ``(tokens, accepted)``: ``[n]`` int64 emitted tokens and ``[n]`` bool acceptance.
    """
    if n == 0:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.bool)
    y = torch.multinomial(q, n, replacement=True, generator=generator)  # [n]
    u = torch.rand(n, generator=generator, dtype=torch.float64)  # [n]
    accepted = accept_mask(p, q, y, u)
    tokens = y.clone()
    n_rejected = int((~accepted).sum())
    if n_rejected:
        source = rejection_source(p, q, resample_from)
        tokens[~accepted] = torch.multinomial(
            source, n_rejected, replacement=True, generator=generator
        )
    return tokens, accepted
