"""The batched lean forward (``core/lean_batch.py``) against the engine's one-row lean
forward: each left-padded row's logits equal its lone forward's (1e-5), and the batch
sweep's two target-only lanes make the same tokens at B = 1 on the embedded pair."""

from __future__ import annotations

import torch

from specdec_core.bench.batching import generate_batch, left_pad
from specdec_core.bench.runs import ignoring_eos
from specdec_core.core import lean_gpt2
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.lean_batch import batch_forward, batch_logits, new_batch_cache
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate

PROMPTS = ["First Citizen:\nWe are", "KING:\nO"]


def lone_logits(w: lean_gpt2.Gpt2Weights, ids: list[int], then: list[int]) -> torch.Tensor:
    """``[1 + len(then), V]``: the last prompt row, then one row per decoded token."""
    kv = w.new_cache()
    rows = [lean_gpt2.logits(w, lean_gpt2.forward(w, kv, ids)[-1:])]
    for tok in then:
        rows.append(lean_gpt2.logits(w, lean_gpt2.forward(w, kv, [tok])))
    return torch.cat(rows)


@torch.inference_mode()
def test_padded_rows_equal_their_lone_forwards(embedded_pair):
    w = lean_gpt2.gpt2_weights(embedded_pair.target)
    encoded = [encode_prompt(embedded_pair, p) for p in PROMPTS]
    assert len(encoded[0]) > len(encoded[1])  # the second row is padded
    ids, mask, positions = left_pad(encoded, 0)
    width = ids.shape[1]
    then = [[11, 12, 13], [21, 22, 23]]  # the same ids decoded after each prompt
    cache, keys = new_batch_cache(w, 2, width + 3), mask.bool()
    got = [batch_logits(w, batch_forward(w, cache, 0, ids, positions, keys)[:, -1])]
    for step in range(3):
        keys = torch.cat([keys, torch.ones(2, 1, dtype=torch.bool)], 1)
        positions = positions[:, -1:] + 1
        nxt = torch.tensor([[then[0][step]], [then[1][step]]])
        got.append(
            batch_logits(w, batch_forward(w, cache, width + step, nxt, positions, keys)[:, -1])
        )
    batched = torch.stack(got, dim=1)  # [B, 4, V]
    for b in range(2):
        torch.testing.assert_close(
            batched[b], lone_logits(w, encoded[b], then[b]), atol=1e-5, rtol=0
        )


def test_batched_and_sequential_target_only_agree_at_batch_one(embedded_pair):
    """The sweep's B = 1: the batched lane and the sequential target-only lane run the same
    lean forward on the same prompt, so they make the same tokens in as many forwards."""
    timed = ignoring_eos(embedded_pair)
    batched = generate_batch(timed, PROMPTS[:1], 24, stop_at_eos=False)
    alone = generate(timed, PROMPTS[0], SessionConfig(max_new_tokens=24), "autoregressive")
    assert list(batched.output_ids[0]) == alone.output_ids and len(alone.output_ids) == 24
    assert batched.forwards == alone.stats.target_forwards == 24


@torch.inference_mode()
def test_padded_rows_equal_transformers_forward_with_its_attention_mask(embedded_pair):
    """The reference: transformers' GPT-2 over the same left-padded batch, its attention
    mask and position ids; every real position's logits agree (1e-4)."""
    model = embedded_pair.target
    w = lean_gpt2.gpt2_weights(model)
    encoded = [encode_prompt(embedded_pair, p) for p in PROMPTS]
    ids, mask, positions = left_pad(encoded, 0)
    hidden = batch_forward(w, new_batch_cache(w, 2, ids.shape[1]), 0, ids, positions, mask.bool())
    got = lean_gpt2.logits(w, hidden.reshape(-1, w.width)).view(*ids.shape, -1)
    want = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    real = mask.bool()
    assert int((~real).sum()) > 0  # a padded row
    torch.testing.assert_close(got[real], want[real].float(), atol=1e-4, rtol=0)
