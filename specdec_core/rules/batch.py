"""``rules/acceptance.verify_sampling`` vectorised over ``n`` independent single-position
verifications (γ = 1), for the acceptance-rule lab's Monte Carlo: draft ``y ~ q``, accept
iff ``u < min(1, p(y) / q(y))``, else emit a draw from ``r = norm([p − q]+)`` (``p`` when
``r`` is undefined) or, for teaching, from ``p`` (``resample_from="target"``, biased).
``tests/test_acceptance_batch.py`` checks it against the scalar rule on random rows.
"""

from __future__ import annotations

import torch

from specdec_core.rules.acceptance import ResampleFrom, residual_distribution


def accept_mask(p: torch.Tensor, q: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Which drafts are accepted, ``u < min(1, p(y)/q(y))`` elementwise (Leviathan et al.
    2023, Alg. 1): ``p, q`` ``[V]``, ``y`` ``[n]`` int64 with ``q(y) > 0``, ``u`` ``[n]`` in
    ``[0, 1)`` → ``[n]`` bool."""
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
    """``n ≥ 0`` independent single-position verifications of ``[V]`` float64/float32 CPU
    rows ``p, q``; draws from ``generator`` in order: all ``y``, all ``u``, then the
    rejected positions' tokens. Returns ``(tokens, accepted)``, ``[n]`` int64 and bool."""
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
