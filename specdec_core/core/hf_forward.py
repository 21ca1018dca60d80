"""transformers' own GPT-2 forward over a :class:`~specdec_core.core.kvbuffer.KVBuffer`:
the reference the lean forward (:mod:`specdec_core.core.lean_gpt2`) is tested against, and
the forward of the half-precision copies (``core/quant.variant_pair``), whose kernel
choices the numerics lesson measures (``bench/numerics.py``: in bfloat16 transformers'
verify and decode forwards sum in different orders; the lean forward happens not to).

Each call copies the buffer's rows into a ``DynamicCache``, runs the model, and writes the
new keys/values back, so every cache edit stays :class:`KVBuffer`'s. Slower than the lean
forward (a copy per call); never on the float32 fast path.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec_core.core.kvbuffer import KVBuffer


def hf_forward(
    model: PreTrainedModel,
    kv: KVBuffer,
    ids: list[int],
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`specdec_core.core.lean_gpt2.forward`'s contract through ``model(...)``.

    Args:
        ids: ``T`` token ids after the ``L`` rows of ``kv``. positions: ``[T]`` position
            ids. mask: ``[T, L + T]`` bool, True where a row may attend (made an additive
            ``[1, 1, T, L + T]`` mask: 0 where allowed, ``finfo.min`` elsewhere).

    Returns:
        ``[T, d]`` last hidden states (after ``ln_f``), the model's dtype.
    """
    start, new = kv.length, len(ids)
    cache = DynamicCache(config=model.config)
    for i, layer in enumerate(kv.layers):
        cache.update(layer.keys, layer.values, i)
    extra = {}
    if mask is not None:
        assert positions is not None, "a masked forward takes explicit positions"
        dtype = model.dtype
        additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        additive = additive.masked_fill(~mask, torch.finfo(dtype).min)
        extra = {"attention_mask": additive[None, None], "position_ids": positions[None]}
    out = model(
        input_ids=torch.tensor([ids], device=kv.k.device),
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
        output_hidden_states=True,
        **extra,
    )
    kv.reserve(start + new)
    for i, layer in enumerate(cache.layers):
        kv.k[i, :, start : start + new] = layer.keys[0, :, start:]
        kv.v[i, :, start : start + new] = layer.values[0, :, start:]
    kv.length = start + new
    return out.hidden_states[-1][0]  # [T, d]
