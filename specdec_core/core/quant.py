"""Copies of a loaded pair with other numerics: a **weight-only fake-quantized**
target (int8 / int4, symmetric, per output channel) and the whole pair cast to bfloat16 or
float16. Made on load from the shared pair's own weights (nothing is downloaded); the
shared pair is never modified: every variant is a ``copy.deepcopy`` of its models.

Quantization (weight-only, "fake": the quantized weights are stored dequantized in float32,
so every forward runs the same float32 kernels as the original and only the weights'
values change). For each weight matrix ``W`` of the transformer's linear layers (GPT-2's
``Conv1D`` ``[in, out]`` and ``nn.Linear`` ``[out, in]``; attention and MLP projections),
per output channel ``j``:

    s_j = max_i |W_ij| / Q,    Ŵ_ij = s_j · clamp(round(W_ij / s_j), −Q, Q),

with ``Q = 127`` (int8) or ``Q = 7`` (int4) (symmetric "absmax" quantization, e.g.
Dettmers et al. 2022, LLM.int8(), §3.1, per-row/vector-wise; GPTQ, Frantar et al. 2023,
uses the same grid). The embeddings, the tied output head, layer norms and biases stay
float32 (as GPTQ and most weight-only schemes keep them). Speculative decoding with such
a target is lossless **with respect to the quantized target**, not the original one.

Pure model code: torch and transformers; nothing above ``core`` is imported.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Literal

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from specdec_core.core.errors import ConfigError
from specdec_core.core.models import ModelPair

QuantKind = Literal["none", "int8", "int4"]
QUANT_KINDS: tuple[str, ...] = ("none", "int8", "int4")
#: The largest magnitude of each kind's symmetric integer grid.
QUANT_LEVELS: dict[str, int] = {"int8": 127, "int4": 7}
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
_CACHE_SIZE = 6  # variants kept (a few MB each on the embedded pair)
#: Largest model (parameters) copied for a variant: gpt2-medium (355 M) fits, a 774 M or
#: 1.5 B target would add GBs per variant on a shared classroom server.
MAX_COPY_PARAMS = 400_000_000
_lock = threading.Lock()
_cache: OrderedDict[tuple, tuple[weakref.ref, PreTrainedModel, PreTrainedModel]] = OrderedDict()


def check_quant(kind: object) -> str:
    """``kind`` if it names a quantization, else an error.

    Raises:
        ConfigError: code ``quant_unknown`` (``kind``: the value, ``choices``).
    """
    if not isinstance(kind, str) or kind not in QUANT_KINDS:
        shown = str(kind)[:40]
        raise ConfigError(
            f"target quantization must be one of {', '.join(QUANT_KINDS)}, got {shown!r}",
            "quant_unknown",
            kind=shown,
            choices=", ".join(QUANT_KINDS),
        )
    return kind


def quantize_codes(
    weight: torch.Tensor, kind: str, out_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The integer codes and scales of :func:`quantize_weight` (module doc).

    Args:
        weight: a 2-D float tensor. kind: ``int8`` or ``int4``.
        out_dim: the axis of the output channels (``Conv1D``: 1, ``nn.Linear``: 0).

    Returns:
        ``(q, s)``: ``q`` float32 of ``weight``'s shape, integers in ``[−Q, Q]``; ``s``
        float32 broadcastable to it (size 1 along the input axis), 1 for an all-zero
        channel. ``s·q`` are the dequantized weights.

    Raises:
        ConfigError: ``kind`` is not ``int8``/``int4`` (``quant_unknown``).
    """
    levels = QUANT_LEVELS.get(kind)
    if levels is None:
        shown = str(kind)[:40]
        raise ConfigError(
            f"weights quantize to int8 or int4, got {shown!r}",
            "quant_unknown",
            kind=shown,
            choices="int8, int4",
        )
    w = weight.float()
    reduce = 1 - out_dim  # the input axis
    scale = w.abs().amax(dim=reduce, keepdim=True) / levels
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero channel
    return torch.clamp(torch.round(w / scale), -levels, levels), scale


def quantize_weight(weight: torch.Tensor, kind: str, out_dim: int) -> torch.Tensor:
    """Symmetric per-output-channel fake quantization of one weight matrix (module doc).

    Args:
        weight: ``[..]`` float tensor (2-D). kind: ``int8`` or ``int4``.
        out_dim: the axis of the output channels (``Conv1D``: 1, ``nn.Linear``: 0).

    Returns:
        A new tensor of ``weight``'s shape and dtype: the dequantized values ``s·q``, where
        ``q`` takes at most ``2Q + 1`` integer values per channel.

    Raises:
        ConfigError: ``kind`` is not ``int8``/``int4`` (``quant_unknown``).
    """
    q, scale = quantize_codes(weight, kind, out_dim)
    return (q * scale).to(weight.dtype)


def _quantized_layers(model: nn.Module) -> list[tuple[str, nn.Module, int]]:
    """``(name, module, out_dim)`` of every linear layer that is quantized: each
    ``Conv1D`` / ``nn.Linear`` except the output head (tied to the input embedding)."""
    head = model.get_output_embeddings() if isinstance(model, PreTrainedModel) else None
    found: list[tuple[str, nn.Module, int]] = []
    for name, module in model.named_modules():
        if module is head:
            continue
        if isinstance(module, Conv1D):
            found.append((name, module, 1))
        elif isinstance(module, nn.Linear):
            found.append((name, module, 0))
    return found


@torch.no_grad()
def quantize_model(model: PreTrainedModel, kind: str) -> PreTrainedModel:
    """A deep copy of ``model`` with its linear layers' weights fake-quantized (module doc);
    ``model`` itself is unchanged. ``kind`` ``none`` returns ``model`` itself.

    Raises:
        ConfigError: unknown ``kind`` (``quant_unknown``).
    """
    if check_quant(kind) == "none":
        return model
    copied = copy.deepcopy(model)
    for _, module, out_dim in _quantized_layers(copied):
        module.weight.copy_(quantize_weight(module.weight, kind, out_dim))
    return copied.eval().requires_grad_(False)


def weight_error(model: PreTrainedModel, kind: str) -> float:
    """The relative Frobenius error ``‖Ŵ − W‖ / ‖W‖`` over all quantized weights of
    ``model`` together (a number, 0 for ``none``)."""
    if check_quant(kind) == "none":
        return 0.0
    num = den = 0.0
    for _, module, out_dim in _quantized_layers(model):
        w = module.weight.detach().float()
        num += float((quantize_weight(w, kind, out_dim) - w).pow(2).sum())
        den += float(w.pow(2).sum())
    return (num / den) ** 0.5 if den else 0.0


def check_dtype(name: object, device: str) -> torch.dtype:
    """The torch dtype named ``name`` if this device can run a model in it.

    Support is probed with one tiny ``linear`` + ``layer_norm`` + ``softmax`` in that
    dtype on the device (and ``torch.cuda.is_bf16_supported()`` for bfloat16 on CUDA):
    a device without the kernels refuses here, with a clear code, instead of failing
    inside a forward.

    Raises:
        ConfigError: ``dtype_unknown`` (``dtype``, ``choices``) or ``dtype_unsupported``
            (``dtype``, ``device``).
    """
    if not isinstance(name, str) or name not in DTYPES:
        shown = str(name)[:40]
        raise ConfigError(
            f"precision must be one of {', '.join(DTYPES)}, got {shown!r}",
            "dtype_unknown",
            dtype=shown,
            choices=", ".join(DTYPES),
        )
    dtype = DTYPES[name]
    if not dtype_supported(dtype, device):
        raise ConfigError(
            f"this device ({device}) cannot run a model in {name}",
            "dtype_unsupported",
            dtype=name,
            device=device,
        )
    return dtype


def dtype_supported(dtype: torch.dtype, device: str) -> bool:
    """Whether ``device`` runs the kernels a GPT-2 forward needs in ``dtype`` (probe; see
    :func:`check_dtype`)."""
    if dtype == torch.float32:
        return True
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return False
        if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            return False
    try:
        x = torch.ones(2, 4, dtype=dtype, device=device)
        y = nn.functional.linear(x, torch.ones(3, 4, dtype=dtype, device=device))
        nn.functional.layer_norm(y, (3,)).softmax(dim=-1)
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class Variant:
    """What a variant pair changes: ``quant`` (the target's weights) and ``dtype`` (both
    models' compute precision, a key of :data:`DTYPES`)."""

    quant: str = "none"
    dtype: str = "float32"

    @property
    def suffix(self) -> str:
        parts = [p for p in (self.quant, self.dtype) if p not in ("none", "float32")]
        return "+".join(parts)


def variant_pair(pair: ModelPair, quant: str = "none", dtype: str = "float32") -> ModelPair:
    """A :class:`ModelPair` sharing ``pair``'s tokenizer, with a fake-quantized copy of the
    target (``quant``) and/or both models cast to ``dtype`` (copies; same draft weights).
    ``pair`` itself when nothing changes. The copied models are cached (a few variants,
    per loaded pair), so repeated calls reuse them; the shared pair is never modified. The name
    gets a suffix (``"embedded+int8"``, ``"embedded+bfloat16"``).

    Raises:
        ConfigError: ``quant_unknown``, ``dtype_unknown``, ``dtype_unsupported``,
            ``variant_too_large`` (``params``, ``limit``: a target over
            :data:`MAX_COPY_PARAMS` parameters).
    """
    want = Variant(check_quant(quant), dtype)
    torch_dtype = check_dtype(dtype, pair.device)
    if not want.suffix:
        return pair
    params = sum(p.numel() for p in pair.target.parameters())
    if params > MAX_COPY_PARAMS:
        raise ConfigError(
            f"the target has {params / 1e6:.0f} M parameters; copies for other numerics are "
            f"made for models up to {MAX_COPY_PARAMS / 1e6:.0f} M",
            "variant_too_large",
            params=f"{params / 1e6:.0f} M",
            limit=f"{MAX_COPY_PARAMS / 1e6:.0f} M",
        )
    key = (id(pair.target), id(pair.draft), want)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0]() is pair.target:
            _cache.move_to_end(key)
            target, draft = hit[1], hit[2]
        else:
            target = quantize_model(pair.target, want.quant)
            draft = pair.draft
            if torch_dtype != torch.float32:
                if target is pair.target:
                    target = copy.deepcopy(target)
                target = target.to(torch_dtype)
                draft = copy.deepcopy(pair.draft).to(torch_dtype)
            _cache[key] = (weakref.ref(pair.target), target, draft)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    # the pair's other fields (EOS, context, …) come from the caller's pair each time
    return replace(pair, name=f"{pair.name}+{want.suffix}", target=target, draft=draft)


def quantized_pair(pair: ModelPair, kind: str) -> ModelPair:
    """:func:`variant_pair` with the target quantized to ``kind`` (``none``: ``pair``);
    the draft is the shared pair's own draft model (the same object)."""
    return variant_pair(pair, quant=kind)


def quant_json(kind: str) -> dict:
    """The CLI's extra top-level keys for ``--target-quant`` (none: ``{}``, so the JSON is
    unchanged)."""
    return {} if kind == "none" else {"target_quant": kind}
