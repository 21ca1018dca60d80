"""Probability slices for traces: the tokens a chart shows, with exact "other" buckets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from specdec_core.core.trace import DistSlice, TokenInfo


def dist_slice(
    p: torch.Tensor | None,
    q: torch.Tensor | None,
    extra: list[int],
    top_n: int,
    token: Callable[[int], TokenInfo],
) -> DistSlice:
    """Keep the top-``top_n`` tokens of ``p`` and of ``q`` plus ``extra`` ids.

    Args:
        p, q: ``[V]`` float32 CPU rows, either may be ``None`` (not both).
        extra: ids always shown (the drafted token, the correction).

    Returns:
        :class:`DistSlice` sorted by ``p`` (else ``q``) descending, with exact "other"
        buckets: ``1 − shown`` mass for ``p``/``q`` and the full-row sums of ``min(p, q)``
        and ``[p − q]+`` minus the shown part.
    """
    ref = p if p is not None else q
    assert ref is not None
    chosen: list[int] = []
    for row in (p, q):
        if row is not None:
            top = torch.topk(row, min(top_n, row.shape[-1]))
            chosen += top.indices[top.values > 0].tolist()  # never show zero-mass filler
    ids = torch.tensor(list(dict.fromkeys(chosen + extra)), dtype=torch.long)
    ids = ids[torch.argsort(ref[ids], descending=True, stable=True)]

    def part(row: torch.Tensor | None) -> tuple[np.ndarray | None, float]:
        if row is None:
            return None, 0.0
        shown = row[ids]
        return shown.numpy().astype(np.float32), float(row.sum() - shown.sum())

    both = p is not None and q is not None
    p_vals, p_other = part(p)
    q_vals, q_other = part(q)
    min_vals, min_other = part(torch.minimum(p, q) if both else None)
    exc_vals, exc_other = part((p - q).clamp_min(0.0) if both else None)
    return DistSlice(
        token_ids=ids.numpy(),
        tokens=tuple(token(int(t)) for t in ids.tolist()),
        p=p_vals,
        q=q_vals,
        min_pq=min_vals,
        excess=exc_vals,
        p_other=max(p_other, 0.0),
        q_other=max(q_other, 0.0),
        min_other=max(min_other, 0.0),
        excess_other=max(exc_other, 0.0),
    )
