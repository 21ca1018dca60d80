"""Batched target-only decoding: ``B`` prompts advance together, one target forward per
step for the whole batch. The baseline of the batch-size sweep on the speed page: batching
raises throughput (tokens/s summed over prompts) because one forward serves ``B`` rows,
which is the same spare parallel capacity speculative decoding spends on ``γ + 1``
positions of *one* prompt — so at some batch size speculation stops paying.

Greedy only (the sweep compares throughput; greedy makes the output comparable with the
single-prompt path). The forward is the engine's lean GPT-2 forward over ``B`` rows
(:mod:`specdec_core.core.lean_batch`), so the sweep's lanes all run the same math with the
same kernels: at ``B = 1`` this makes the tokens of the engine's target-only decoding.
Prompts of different lengths are left-padded; padded positions are masked out and position
ids start at 0 at each prompt's first real token, so every row computes what a lone
forward over its own prompt computes (up to float rounding).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec_core.core.device import sync
from specdec_core.core.errors import ConfigError, PromptError
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.lean_batch import batch_forward, batch_logits, new_batch_cache
from specdec_core.core.lean_gpt2 import gpt2_weights
from specdec_core.core.models import ModelPair


@dataclass(frozen=True)
class BatchResult:
    """One batched generation.

    Attributes:
        output_ids: per prompt, the generated ids (prompt excluded; up to and including
            EOS when ``stop_at_eos``).
        total_ms: wall time, first forward to last token (ms).
        forwards: target forwards run (each one over the whole batch).
    """

    output_ids: tuple[tuple[int, ...], ...]
    total_ms: float
    forwards: int

    @property
    def batch_size(self) -> int:
        return len(self.output_ids)

    @property
    def new_tokens(self) -> int:
        """Tokens generated, summed over the batch."""
        return sum(len(o) for o in self.output_ids)

    @property
    def tokens_per_s(self) -> float:
        """Throughput of the whole batch (tokens/s)."""
        return 1e3 * self.new_tokens / self.total_ms if self.total_ms > 0 else 0.0


def left_pad(
    prompts: Sequence[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-pad id lists to one ``[B, L_max]`` batch.

    Returns:
        ``(input_ids, attention_mask, position_ids)``, all ``[B, L_max]`` int64; the mask is
        0 on padding, positions count real tokens from 0 (padding gets 0).
    """
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    return ids, mask, positions


def generate_batch(
    pair: ModelPair,
    prompts: Sequence[str | list[int]],
    max_new_tokens: int,
    stop_at_eos: bool = True,
) -> BatchResult:
    """Greedy target-only decoding of ``B`` prompts at once (KV cache, one forward per step).

    Args:
        pair: loaded models (only the target is used; read-only).
        prompts: ``B ≥ 1`` prompts, text or ids (lengths may differ).
        max_new_tokens: tokens per prompt (≥ 1); cut so the longest prompt fits the context.
        stop_at_eos: a row that produced EOS stops (its later steps are ignored); the
            batch ends when every row has stopped. ``False``: every row gets
            ``max_new_tokens`` tokens (the sweep's setting, so all rows do equal work).

    Returns:
        :class:`BatchResult`.

    Raises:
        PromptError: an empty prompt, or a prompt that leaves no room in the context.
        ConfigError: ``max_new_tokens < 1`` or no prompts.
    """
    if not prompts:
        raise ConfigError("give at least one prompt")
    if max_new_tokens < 1:
        raise ConfigError(f"max new tokens must be ≥ 1, got {max_new_tokens}")
    encoded = [encode_prompt(pair, p) if isinstance(p, str) else list(p) for p in prompts]
    width = max(len(p) for p in encoded)
    steps = min(max_new_tokens, pair.context_length - width)
    if steps < 1 or min(len(p) for p in encoded) < 1:
        raise PromptError(f"a prompt must have 1..{pair.context_length - 1} tokens")
    eos = pair.eos_token_id
    pad = eos if eos is not None else 0
    device = pair.device
    input_ids, mask, positions = (t.to(device) for t in left_pad(encoded, pad))
    batch = len(encoded)
    weights = gpt2_weights(pair.target)  # the engine's lean forward, B rows at once
    cache = new_batch_cache(weights, batch, width + steps)
    key_mask = mask.bool()  # [B, S]: real tokens
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    tokens: list[torch.Tensor] = []
    forwards, length = 0, 0
    started = time.perf_counter()
    with torch.inference_mode():
        hidden = batch_forward(weights, cache, 0, input_ids, positions, key_mask)
        forwards, length = 1, width
        for step in range(steps):
            nxt = batch_logits(weights, hidden[:, -1]).argmax(dim=-1)  # [B]
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            tokens.append(nxt)
            if stop_at_eos and eos is not None:
                done |= nxt == eos
                if bool(done.all()):
                    break
            if step == steps - 1:
                break
            key_mask = torch.cat(
                [key_mask, torch.ones(batch, 1, dtype=torch.bool, device=device)], 1
            )
            positions = positions[:, -1:] + 1  # [B, 1]
            hidden = batch_forward(weights, cache, length, nxt[:, None], positions, key_mask)
            forwards, length = forwards + 1, length + 1
        generated = torch.stack(tokens, dim=1).tolist()  # [B, steps run]
    sync(device)
    total_ms = (time.perf_counter() - started) * 1e3
    rows = []
    for row in generated:
        if stop_at_eos and eos is not None and eos in row:
            row = row[: row.index(eos) + 1]
        rows.append(tuple(row))
    return BatchResult(tuple(rows), total_ms, forwards)
