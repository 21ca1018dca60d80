"""The step chart's slices: which tokens one drafted position's chart shows (the top ones
by ``max(p, q)`` plus the drafted and correction tokens), the greedy chart's context
tokens, and ``p`` before and after the history-dependent processors (the slice drawn and
the mass the processors set to 0), and block verification's residual on the shown tokens.
Pure numpy over :class:`DistSlice`; no figure library."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specdec_core.core.trace import DistSlice

__all__ = ["before_after_slice", "block_residual_slice", "masked_mass", "shown_indices"]

TOP_TOKENS = 8


def shown_indices(dist: DistSlice, keep: tuple[int | None, ...] = (), top: int = TOP_TOKENS):
    """Indices into the slice to draw: the ``top`` tokens by ``max(p, q)`` plus every id in
    ``keep`` (drafted, correction), in descending ``max(p, q)`` order."""
    rows = [r for r in (dist.p, dist.q) if r is not None]
    score = np.max(np.stack(rows), axis=0) if rows else np.zeros(len(dist.tokens))
    order = np.argsort(-score, kind="stable")
    ids = dist.token_ids.tolist()
    chosen = set(order[:top].tolist()) | {ids.index(k) for k in keep if k in ids}
    return [int(i) for i in order if int(i) in chosen]


def with_context_tokens(dist: DistSlice, context: DistSlice, top: int) -> DistSlice:
    """Greedy: ``dist`` holds one-hot rows (one or two tokens). Add the context's top tokens
    with ``p = q = min = excess = 0`` (exact: a one-hot row is 0 off its argmax), so the
    faint T = 1 bars have tokens to stand on."""
    ids = dist.token_ids.tolist()
    extra = [i for i, tid in enumerate(context.token_ids.tolist()) if tid not in ids][:top]
    if not extra:
        return dist

    def grow(values):
        return None if values is None else np.append(values, np.zeros(len(extra), values.dtype))

    return replace(
        dist,
        token_ids=np.append(dist.token_ids, context.token_ids[extra]),
        tokens=dist.tokens + tuple(context.tokens[i] for i in extra),
        p=grow(dist.p),
        q=grow(dist.q),
        min_pq=grow(dist.min_pq),
        excess=grow(dist.excess),
    )


def before_after_slice(after: DistSlice, before: DistSlice) -> DistSlice:
    """One slice for the chart of ``p`` before and after the history-dependent processors:
    ``p`` = after, ``q`` = before (``min`` / ``excess`` ``None``), over the tokens of
    ``before`` (which shows every token ``after`` shows, plus its own top tokens) whose
    ``p`` after is known: shown in ``after``, or any token when ``after`` keeps no mass
    outside its shown tokens (then every other token has ``p = 0`` after: masked). A
    token whose ``p`` after is unknown is left out; its mass stays in ``q_other``."""
    after_p = dict(zip(after.token_ids.tolist(), after.p.astype(float).tolist(), strict=True))
    before_p = before.p.astype(float)
    known = [
        i
        for i, tid in enumerate(before.token_ids.tolist())
        if tid in after_p or after.p_other <= 0.0
    ]
    ids = before.token_ids[known]
    q = before_p[known]
    p = np.array([after_p.get(int(tid), 0.0) for tid in ids], dtype=np.float64)
    return DistSlice(
        token_ids=ids,
        tokens=tuple(before.tokens[i] for i in known),
        p=p,
        q=q,
        min_pq=None,
        excess=None,
        p_other=max(0.0, 1.0 - float(p.sum())) if after.p_other > 0 else 0.0,
        q_other=max(0.0, 1.0 - float(q.sum())),
        min_other=0.0,
        excess_other=0.0,
    )


def masked_mass(after: DistSlice, before: DistSlice) -> tuple[float, bool]:
    """The mass ``p`` had before the processors on the tokens they set to 0 (masked by
    the grammar, banned by the no-repeat n-gram): ``Σ p_before(x) · [p_after(x) = 0]``.

    Returns:
        ``(mass, exact)``: exact when ``after`` keeps no mass outside its shown tokens
        (every token it does not show has ``p = 0`` after: ``1 − Σ`` of ``p_before`` over
        its shown tokens with ``p_after > 0``); otherwise a lower bound, the sum over the
        shown tokens whose ``p`` after is 0.
    """
    after_p = dict(zip(after.token_ids.tolist(), after.p.astype(float).tolist(), strict=True))
    before_p = dict(zip(before.token_ids.tolist(), before.p.astype(float).tolist(), strict=True))
    if after.p_other <= 0.0:
        kept = sum(before_p.get(tid, 0.0) for tid, v in after_p.items() if v > 0)
        return max(0.0, 1.0 - kept), True
    return sum(before_p[tid] for tid, v in after_p.items() if v == 0 and tid in before_p), False


def block_residual_slice(dist: DistSlice, weight: float, mass: float) -> DistSlice:
    """``dist`` with its ``excess`` row replaced by block verification's residual
    ``r_τ = norm([p′_τ · p − q]+)`` (``rules/block.py``), the row the next token was drawn
    from at the position after the ``τ`` drafts kept: on the shown tokens
    ``[weight · p − q]+ / mass``, with ``excess_other`` the rest of ``r_τ`` (``1 − Σ``).

    Args:
        dist: the slice at position ``τ + 1`` (``p`` and ``q`` both present).
        weight: ``p′_τ`` (1 when ``τ = 0``). mass: ``S_τ``, the full row's sum of
            ``[p′_τ · p − q]+`` (the round's ``BlockDecision.residual_mass``); ≤ 0: ``r`` is
            drawn as 0.
    """
    assert dist.p is not None and dist.q is not None
    excess = np.clip(weight * dist.p.astype(np.float64) - dist.q.astype(np.float64), 0.0, None)
    r = excess / mass if mass > 0.0 else np.zeros_like(excess)
    other = max(0.0, 1.0 - float(r.sum())) if mass > 0.0 else 0.0
    return replace(dist, excess=r.astype(np.float32), excess_other=other)
