"""Weight-only int8 linear layers for the drafters' lean forward (the target never uses
them: it is the reference and stays float32).

A linear layer ``y = x W + b`` keeps its weight as int8 codes and one scale per output
channel, on the grid of :func:`~specdec_core.core.quant.quantize_codes` (symmetric absmax,
``Q = 127``), and runs as ``torch._weight_int8pack_mm`` (the CPU kernel of torchao's
int8 weight-only path): bfloat16 activations in, bfloat16 out, the int8 weight widened
inside the kernel. On a CPU at batch 1 a draft step reads its weights from L3, so a
quarter of the bytes is most of the gain (a 256 × 1024 product here: 31 µs cold vs 52 µs
float32). Only each linear's input is cast to bfloat16 and its output back; the residual
stream, layer norms, attention and KV cache stay float32 (bfloat16 ``bmm`` is slower
here, and a float32 activation into the kernel is slower still).

Deviations from :func:`~specdec_core.core.quant.quantize_weight`: the scales are stored
in bfloat16 (the kernel's), so the layer computes ``x_bf16 · (q · bf16(s))`` rounded to
bfloat16, plus the float32 bias. The drafter's ``q`` is what it computes; the rules use
exactly that ``q``, so speculative decoding stays lossless.

Which drafters: those whose ``int8_by_default`` is set (the draft model; not EAGLE,
whose input features' float32 low bits move with the thread count and would show in its
``q`` once rounded to bfloat16). ``SPECDEC_DRAFT_WEIGHTS=float32`` switches every drafter
to its float32 weights, ``=int8`` every one to int8 (a comparison); devices without the
kernel (CUDA here, or a build without it) and widths it cannot read (:func:`int8_fits`)
run float32 silently.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from dataclasses import dataclass, replace

import torch

from specdec_core.core.lean_gpt2 import Gpt2Weights
from specdec_core.core.quant import quantize_codes

#: ``SPECDEC_DRAFT_WEIGHTS``: ``float32`` every drafter runs float32, ``int8`` every one
#: int8 where the kernel exists (comparisons); unset: each drafter's ``int8_by_default``.
ENV = "SPECDEC_DRAFT_WEIGHTS"
#: The kernel reads ``x`` and the codes in blocks of 16 along ``in`` (torch 2.13 CPU): at
#: another input width it reads past each row (garbage, or a segfault at 8, 24, 40, 100).
IN_BLOCK = 16


@dataclass(frozen=True)
class Int8Linear:
    """``x W + b`` with ``W`` as int8 codes and bfloat16 per-channel scales.

    Attributes:
        codes: ``[out, in]`` int8. scales: ``[out]`` bfloat16.
        bias: ``[out]`` float32 or ``None``.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    bias: torch.Tensor | None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``[T, in]`` float32 → ``[T, out]`` float32."""
        y = torch._weight_int8pack_mm(x.to(torch.bfloat16), self.codes, self.scales)
        return y.float() if self.bias is None else torch.add(self.bias, y)

    def dequantized(self) -> torch.Tensor:
        """``[in, out]`` float32: the weight this layer multiplies by, ``q · bf16(s)``."""
        return (self.codes.float() * self.scales.float()[:, None]).t()


def quantize_linear(weight: torch.Tensor, bias: torch.Tensor | None, out_dim: int) -> Int8Linear:
    """An :class:`Int8Linear` of ``weight`` (2-D; ``out_dim``: its output axis, ``Conv1D``
    ``[in, out]``: 1, ``nn.Linear`` ``[out, in]``: 0) and ``bias`` (a fresh copy)."""
    with torch.inference_mode(False), torch.no_grad():
        q, scale = quantize_codes(weight.detach(), "int8", out_dim)
        if out_dim == 1:
            q, scale = q.t(), scale.t()
        codes = q.to(torch.int8).contiguous()
        scales = scale.reshape(-1).to(torch.bfloat16).contiguous()
        kept = None if bias is None else bias.detach().float().clone()
    return Int8Linear(codes, scales, kept)


_CACHE: dict[int, tuple[weakref.ref, Int8Linear]] = {}  # id(weight) → (weight, layer)
_LOCK = threading.Lock()


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None, out_dim: int) -> Int8Linear:
    """:func:`quantize_linear`, made once per weight tensor and process (dropped with the
    weight; as :func:`~specdec_core.core.lean_gpt2.head_columns`)."""
    key = id(weight)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is weight:
        return entry[1]
    with _LOCK:
        layer = quantize_linear(weight, bias, out_dim)
        _CACHE[key] = (weakref.ref(weight, lambda _: _CACHE.pop(key, None)), layer)
    return layer


def int8_weights(w: Gpt2Weights) -> Gpt2Weights:
    """``w`` with every block's four linears as :class:`Int8Linear` (``Conv1D`` layout);
    embeddings, layer norms and the LM head unchanged (the head's columns:
    :func:`int8_linear` on them, ``out_dim = 1``)."""

    def layer(pair: tuple[torch.Tensor, torch.Tensor]) -> Int8Linear:
        return int8_linear(pair[0], pair[1], 1)

    blocks = tuple(
        replace(
            b,
            attn=layer(b.attn),
            attn_proj=layer(b.attn_proj),
            fc=layer(b.fc),
            mlp_proj=layer(b.mlp_proj),
        )
        for b in w.blocks
    )
    return replace(w, blocks=blocks)


def int8_fits(w: Gpt2Weights) -> bool:
    """Whether the kernel reads every linear of ``w`` (float32 blocks) correctly: the
    width ``d`` (attention, MLP input, LM head; an EAGLE ``fc`` reads ``2d``) and each
    MLP's inner width are multiples of :data:`IN_BLOCK`."""
    inner = {b.mlp_proj[0].shape[0] for b in w.blocks if type(b.mlp_proj) is tuple}
    return all(k % IN_BLOCK == 0 for k in {w.width, *inner})


@functools.cache
def kernel_available(device: str) -> bool:
    """Whether ``device`` runs ``torch._weight_int8pack_mm`` (CPUs only: on CUDA the
    drafters keep float32; probed once with a tiny product)."""
    if torch.device(device).type != "cpu":
        return False
    try:
        x = torch.ones(1, 32, dtype=torch.bfloat16)
        codes = torch.ones(8, 32, dtype=torch.int8)
        y = torch._weight_int8pack_mm(x, codes, torch.ones(8, dtype=torch.bfloat16))
    except (AttributeError, RuntimeError, NotImplementedError, TypeError):
        return False
    return bool(y.shape == (1, 8) and float(y[0, 0]) == 32.0)


def int8_runs(w: Gpt2Weights, device: str | torch.device) -> bool:
    """Whether ``w`` on ``device`` can run int8: the kernel exists there
    (:func:`kernel_available`) and reads every width of ``w`` (:func:`int8_fits`)."""
    return kernel_available(str(device)) and int8_fits(w)


def draft_int8(device: str | torch.device, by_default: bool = True) -> bool:
    """Whether a drafter on ``device`` runs int8 weights: the kernel exists there and
    ``SPECDEC_DRAFT_WEIGHTS`` says ``int8``, or is unset and ``by_default`` (the drafter's
    ``int8_by_default``); never with ``float32``."""
    choice = os.environ.get(ENV, "")
    if choice == "float32" or not (by_default or choice == "int8"):
        return False
    return kernel_available(str(device))
