"""The lean GPT-2 forward (:mod:`specdec_core.core.lean_gpt2`) over a batch of ``B`` rows:
the batch-size sweep's batched target-only lane, so that it runs the same math with the
same kernels as the engine's one-prompt decoding it is compared with (at ``B = 1`` both
make the same tokens; transformers' forward with a ``DynamicCache`` was about half as fast
there on a CPU, which made the sweep's crossover an artefact of the code path).

Shapes: ``B`` rows, ``T`` new positions, ``S`` positions cached after this call, ``d``
width, ``H`` heads, ``Dh = d / H``. The cache is one preallocated tensor per call site,
``[n_layer, 2, B, H, capacity, Dh]``; rows are left-padded, so a column is a real token of
row ``b`` or padding, the same for every later step.

Deviations from :func:`lean_gpt2.blocks`: attention runs as ``matmul`` over ``[B, H, …]``
instead of ``bmm`` over ``[H, …]`` (low bits may differ); a padding query row attends to
itself only (its output is never read, and a row of −inf would make NaN).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec_core.core.lean_gpt2 import Gpt2Weights, linear, logits


def new_batch_cache(w: Gpt2Weights, batch: int, capacity: int) -> torch.Tensor:
    """Zeros ``[n_layer, 2, B, H, capacity, Dh]`` on the weights' device and dtype."""
    heads, width = w.heads, w.width
    shape = (len(w.blocks), 2, batch, heads, capacity, width // heads)
    return torch.zeros(shape, device=w.wpe.device, dtype=w.wpe.dtype)


def batch_forward(
    w: Gpt2Weights,
    kv: torch.Tensor,
    start: int,
    ids: torch.Tensor,
    positions: torch.Tensor,
    key_mask: torch.Tensor,
) -> torch.Tensor:
    """One cached forward of ``B`` rows over ``T`` new ids each.

    Args:
        kv: :func:`new_batch_cache`; columns ``0..start−1`` hold the rows' earlier keys and
            values, this call writes ``start..start+T−1``.
        ids: ``[B, T]`` int64. positions: ``[B, T]`` int64 position ids.
        key_mask: ``[B, S]`` bool, ``S = start + T``: True where a column is a real token.

    Returns:
        ``[B, T, d]`` last hidden states (after ``ln_f``); the LM head is :func:`batch_logits`.
    """
    B, T = ids.shape
    d, H = w.width, w.heads
    end = start + T
    assert w.wte is not None
    x = w.wte[ids] + w.wpe[positions]  # [B, T, d]
    rows = torch.arange(start, end, device=ids.device)[:, None]  # [T, 1] absolute query
    cols = torch.arange(end, device=ids.device)[None, :]  # [1, S]
    allowed = (cols <= rows)[None] & key_mask[:, None, :]  # [B, T, S]: causal, real keys
    allowed |= (cols == rows)[None]  # a padding row sees itself: no all −inf row
    bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device)
    bias = bias.masked_fill_(~allowed, float("-inf"))[:, None]  # [B, 1, T, S]
    for i, b in enumerate(w.blocks):
        layer = kv[i]  # [2, B, H, cap, Dh]
        h = torch.layer_norm(x, (d,), *b.ln_1, w.eps).reshape(B * T, d)
        qkv = linear(b.attn, h).view(B, T, 3, H, d // H)  # [B, T, 3, H, Dh]
        layer[:, :, :, start:end] = qkv[:, :, 1:].permute(2, 0, 3, 1, 4)  # [2, B, H, T, Dh]
        q = qkv[:, :, 0].transpose(1, 2)  # [B, H, T, Dh]
        scores = torch.matmul(q, layer[0, :, :, :end].transpose(-1, -2))  # [B, H, T, S]
        a = torch.matmul(
            torch.softmax(torch.add(bias, scores, alpha=b.scale), dim=-1), layer[1, :, :, :end]
        )
        x = x + linear(b.attn_proj, a.transpose(1, 2).reshape(B * T, d)).view(B, T, d)
        h = linear(b.fc, torch.layer_norm(x, (d,), *b.ln_2, w.eps).reshape(B * T, d))
        h = F.gelu(h, approximate="tanh") if w.act is None else w.act(h)
        x = x + linear(b.mlp_proj, h).view(B, T, d)
    return torch.layer_norm(x, (d,), *w.ln_f, w.eps)


def batch_logits(w: Gpt2Weights, hidden: torch.Tensor) -> torch.Tensor:
    """``[B, V]`` float32 logits of the LM head on ``[B, d]`` hidden states (one row per
    batch row): :func:`lean_gpt2.logits`, the same transposed head."""
    return logits(w, hidden)
