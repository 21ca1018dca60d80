"""A lean GPT-2 forward over a loaded transformers model's own weights (no copy).

transformers stays the loader and the reference: :func:`gpt2_weights` takes references to
the parameters of a ``GPT2LMHeadModel`` (or a bare ``GPT2Model``, the EAGLE head's block),
and :func:`forward` runs the same math (Radford et al. 2019; nanoGPT's ``Block``) with the
same kernels (``addmm`` as ``Conv1D``, ``layer_norm``; attention as the batched
``matmul → softmax → matmul`` of ``scaled_dot_product_attention``'s math path), without
what a decoding round does not need: no output classes, cache objects, mask builders or
per-call config checks (on a CPU at batch 1, each op's Python and dispatch cost as much as
its arithmetic). A layer's keys and values go in one copy to a preallocated
:class:`~specdec_core.core.kvbuffer.KVBuffer`. Tests hold logits and hidden states equal
to transformers' forward within 1e-5 (one token, a k-token verify, a tree mask, after a
truncation) on the embedded pair and tiny random GPT-2s.

Shapes: ``T`` new positions, ``L`` cached rows, ``S = L + T``, ``d`` width, ``H`` heads,
``Dh = d / H``. Batch 1 throughout (a decoding session), so tensors carry no batch axis.

Deviations from transformers' GPT-2: dropout is never applied (eval only); ``gelu_new``
runs as ``F.gelu(approximate="tanh")`` (the same function; low bits differ, < 1e-6); the
attention scales the scores, not ``q`` and ``k`` (low bits differ);
``reorder_and_upcast_attn`` is not reproduced (it only changes half-precision rounding).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specdec_core.core.kvbuffer import KVBuffer

_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
Linear = tuple[torch.Tensor, torch.Tensor] | Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Block:
    """One transformer block's parameters (references into the loaded model).

    ``Conv1D`` weights are ``[in, out]``: ``y = addmm(bias, x, weight)``. A linear is
    that ``(weight, bias)`` pair, or a callable ``[T, in] → [T, out]`` float32 (a
    drafter's :class:`~specdec_core.core.int8_linear.Int8Linear`)."""

    ln_1: tuple[torch.Tensor, torch.Tensor]
    attn: Linear  # c_attn: [d, 3d], [3d]
    attn_proj: Linear  # [d, d], [d]
    ln_2: tuple[torch.Tensor, torch.Tensor]
    fc: Linear  # [d, 4d], [4d]
    mlp_proj: Linear  # [4d, d], [d]
    scale: float  # the attention's 1/sqrt(Dh) (÷ (layer + 1) when the config says so)


@dataclass(frozen=True)
class Gpt2Weights:
    """A GPT-2's parameters as plain tensors, read at call time (never copied).

    Attributes:
        wte: ``[V, d]`` token embedding (``None`` for a block driven by embeddings).
        wpe: ``[n_positions, d]`` position embedding.
        blocks: the transformer blocks in order.
        ln_f: final layer norm ``(weight, bias)``.
        lm_head: ``[V, d]`` output projection (``None`` for a bare ``GPT2Model``).
        heads: ``H``. eps: layer norms' epsilon. act: the MLP's activation.
    """

    wte: torch.Tensor | None
    wpe: torch.Tensor
    blocks: tuple[Block, ...]
    ln_f: tuple[torch.Tensor, torch.Tensor]
    lm_head: torch.Tensor | None
    heads: int
    eps: float
    act: nn.Module | None  # None: tanh GELU through F.gelu

    @property
    def width(self) -> int:
        return self.wpe.shape[1]

    def new_cache(self) -> KVBuffer:
        """An empty :class:`KVBuffer` for these blocks, on the weights' device and dtype."""
        w = self.wpe
        return KVBuffer(len(self.blocks), self.heads, self.width // self.heads, w.device, w.dtype)


def _pair(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    return module.weight, module.bias


def gpt2_weights(model: nn.Module) -> Gpt2Weights:
    """References to the weights of a transformers GPT-2 (``GPT2LMHeadModel`` or
    ``GPT2Model``; an early-exit model built from the target's first blocks works alike).

    Raises:
        ValueError: not a GPT-2 (no ``transformer.h`` / ``h`` blocks).
    """
    body = getattr(model, "transformer", model)
    if not hasattr(body, "h") or not hasattr(body, "wpe"):
        raise ValueError("the lean forward runs GPT-2 models only")
    config = body.config
    head_dim = config.n_embd // config.n_head
    blocks = []
    for i, layer in enumerate(body.h):
        scale = head_dim**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= float(i + 1)
        blocks.append(
            Block(
                _pair(layer.ln_1),
                _pair(layer.attn.c_attn),
                _pair(layer.attn.c_proj),
                _pair(layer.ln_2),
                _pair(layer.mlp.c_fc),
                _pair(layer.mlp.c_proj),
                scale,
            )
        )
    head = getattr(model, "lm_head", None)
    tanh = config.activation_function in _TANH_GELUS
    return Gpt2Weights(
        wte=body.wte.weight if head is not None else None,
        wpe=body.wpe.weight,
        blocks=tuple(blocks),
        ln_f=_pair(body.ln_f),
        lm_head=None if head is None else head.weight,
        heads=config.n_head,
        eps=config.layer_norm_epsilon,
        act=None if tanh else body.h[0].mlp.act,
    )


def causal_mask(length: int, new: int, device: torch.device) -> torch.Tensor | None:
    """``[T, S]`` bool, row ``t`` may see columns ``≤ L + t`` (``None`` when ``T = 1``:
    one new row sees everything cached)."""
    if new == 1:
        return None
    return torch.ones(new, length + new, dtype=torch.bool, device=device).tril(length)


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """``softmax(q kᵀ · scale + bias) v`` for ``q: [H, T, Dh]``, ``k, v: [H, S, Dh]``,
    ``bias: [T, S]`` (0 or −inf; ``None``: no mask) → ``[H, T, Dh]``. The math of
    ``scaled_dot_product_attention`` in three batched kernels, without its per-call checks;
    each row's result does not depend on the other rows (a tree level's row equals the
    same node's one-token forward bit for bit)."""
    scores = torch.bmm(q, k.transpose(1, 2))  # [H, T, S]
    if bias is None:
        scores = scores.mul_(scale)
    else:
        scores = torch.add(bias, scores, alpha=scale)
    return torch.bmm(torch.softmax(scores, dim=-1), v)


def linear(layer: Linear, x: torch.Tensor) -> torch.Tensor:
    """``x W + b`` for ``x: [T, in]``: ``addmm`` on a ``(W [in, out], b)`` pair (as
    ``Conv1D``), else the layer's own call."""
    if type(layer) is tuple:
        return torch.addmm(layer[1], x, layer[0])
    return layer(x)


def blocks(
    w: Gpt2Weights, kv: KVBuffer, x: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Run every block over ``x`` (``[T, d]``, embeddings at rows ``L..L+T−1`` of ``kv``)
    and the final layer norm; writes the new keys/values into ``kv`` and moves its length
    to ``L + T``. ``mask``: ``[T, S]`` bool (True = may attend) or ``None`` (``T = 1``).
    Returns ``[T, d]``, the LM head's input (transformers' last hidden state)."""
    T, d = x.shape
    H = w.heads
    start, end = kv.length, kv.length + T
    kv.reserve(end)
    bias = None if mask is None else torch.zeros(mask.shape, dtype=x.dtype, device=x.device)
    if bias is not None:  # [T, S]: 0 where a row may attend, −inf elsewhere
        bias.masked_fill_(~mask, float("-inf"))
    for i, b in enumerate(w.blocks):
        layer = kv.kv[i]  # [2, H, cap, Dh] (indexed: iterating a tensor costs more)
        h = torch.layer_norm(x, (d,), *b.ln_1, w.eps)
        qkv = linear(b.attn, h).view(T, 3, H, d // H)  # [T, 3, H, Dh]
        layer[:, :, start:end] = qkv[:, 1:].permute(1, 2, 0, 3)  # keys and values, one copy
        a = _attention(
            qkv[:, 0].transpose(0, 1), layer[0, :, :end], layer[1, :, :end], bias, b.scale
        )
        x = x + linear(b.attn_proj, a.transpose(0, 1).reshape(T, d))
        h = linear(b.fc, torch.layer_norm(x, (d,), *b.ln_2, w.eps))  # [T, 4d]
        h = F.gelu(h, approximate="tanh") if w.act is None else w.act(h)
        x = x + linear(b.mlp_proj, h)
    kv.length = end
    return torch.layer_norm(x, (d,), *w.ln_f, w.eps)


def forward(
    w: Gpt2Weights,
    kv: KVBuffer,
    ids: list[int],
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """One cached forward over ``ids`` after the ``L`` rows of ``kv``.

    Args:
        ids: ``T ≥ 1`` token ids. positions: ``[T]`` int64 position ids (default
            ``L..L+T−1``). mask: ``[T, L + T]`` bool, True where a row may attend
            (default causal: the cache and the rows up to its own).

    Returns:
        ``[T, d]`` last hidden states (after ``ln_f``) in the model's dtype; the LM head
        is :func:`logits`.

    Raises:
        IndexError: an id outside the vocabulary (as indexing the embedding raises).
    """
    assert w.wte is not None
    if len(ids) == 1:  # a view of the row: no index tensor made (a draft step)
        if not 0 <= ids[0] < w.wte.shape[0]:  # a slice would be empty or wrap, silently
            raise IndexError(f"token id {ids[0]} is outside the vocabulary")
        tokens = w.wte[ids[0] : ids[0] + 1]  # [1, d]
    else:
        tokens = w.wte[torch.tensor(ids, device=w.wte.device)]  # [T, d]
    return forward_embeds(w, kv, tokens, positions, mask)


def forward_embeds(
    w: Gpt2Weights,
    kv: KVBuffer,
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`forward` from ``[T, d]`` input embeddings (transformers' ``inputs_embeds``:
    the position embeddings are added here); the EAGLE head's block runs this way."""
    T, start = x.shape[0], kv.length
    x = x + (w.wpe[start : start + T] if positions is None else w.wpe[positions])
    if mask is None:
        mask = causal_mask(start, T, x.device)
    return blocks(w, kv, x, mask)


def logits(
    w: Gpt2Weights,
    hidden: torch.Tensor,
    columns: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``[T, V]`` float32 logits of the LM head on ``[T, d]`` hidden states, as ``hidden @
    head_columns(lm_head)``; ``columns``: ``[d, N]``, some of the head's rows transposed
    instead (a reduced draft vocabulary) → ``[T, N]``, or a callable ``[T, d] → [T, N]``
    float32 (a drafter's int8 head)."""
    assert w.lm_head is not None or columns is not None
    head = head_columns(w.lm_head) if columns is None else columns
    if not isinstance(head, torch.Tensor):
        return head(hidden)
    return torch.mm(hidden, head).float()


_COLUMNS: dict[int, tuple[weakref.ref, torch.Tensor]] = {}  # id(weight) → (weight, [d, V])
_COLUMNS_LOCK = threading.Lock()


def head_columns(weight: torch.Tensor) -> torch.Tensor:
    """``[V, d]`` LM head → ``[d, V]``, a contiguous transposed copy made once per weight
    tensor and process (dropped with the weight). ``hidden @ columns`` reads the head in
    the order the product runs; on a CPU here it is up to 1.8× faster than
    ``F.linear(hidden, weight)`` for a few rows (a k-token verify) and equal for one. The
    same values to float rounding (another kernel: low bits differ, < 1e-6)."""
    key = id(weight)
    entry = _COLUMNS.get(key)
    if entry is not None and entry[0]() is weight:
        return entry[1]
    with _COLUMNS_LOCK, torch.inference_mode(False), torch.no_grad():
        columns = weight.detach().t().contiguous()
        _COLUMNS[key] = (weakref.ref(weight, lambda _: _COLUMNS.pop(key, None)), columns)
    return columns
