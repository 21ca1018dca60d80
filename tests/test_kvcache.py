"""KV bookkeeping: DynamicCache.crop semantics of the installed transformers, and the
invariant that each kept cache equals a fresh forward over the committed tokens."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from specdec_core.core.int8_linear import draft_int8
from specdec_core.core.kvcache import ModelCache, common_prefix_len
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession


def test_dynamic_cache_crop_semantics(tiny_pair):
    """transformers 5.x: crop(-n) removes n tokens, crop(positive) raises."""
    model = tiny_pair.target
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.arange(1, 8)[None], cache=cache, use_cache=True)
    assert cache.get_seq_length() == 7
    cache.crop(-2)
    assert cache.get_seq_length() == 5
    with pytest.raises(ValueError):
        cache.crop(3)


def test_model_cache_extend_crop_matches_fresh_forward(tiny_pair):
    kv = ModelCache(tiny_pair.target)
    ids = [5, 17, 42, 8, 99, 3, 250, 11]
    kv.extend(ids[:6])
    assert kv.crop(3) == 3 and kv.kv_len == 3 and kv.cache.get_seq_length() == 3
    logits = kv.extend(ids[3:])
    with torch.inference_mode():
        fresh = tiny_pair.target(input_ids=torch.tensor([ids])).logits[0]
    assert torch.allclose(logits, fresh[3:], atol=1e-5)
    assert kv.sync_to(ids + [1, 2]) == [1, 2]
    assert kv.sync_to(ids[:4] + [7]) == [7] and kv.kv_len == 4
    assert kv.sync_to(ids[:4]) == [ids[3]] and kv.kv_len == 3  # last token always re-fed


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len([], [1]) == 0


def _next_logits_from_cache(kv: ModelCache, committed: list[int]) -> torch.Tensor:
    """Next-token logits using the kept cache: feed what it lacks (without mutating the
    real cache: work on a copy of the ids bookkeeping by cropping back afterwards)."""
    before = kv.kv_len
    assert kv.ids == committed[:before]
    logits = kv.extend(committed[before:])[-1]
    kv.crop(before)
    return logits


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kv_invariant_after_random_rounds_edits_and_stops(tiny_pair, seed):
    rng = random.Random(seed)
    config = SessionConfig(
        gamma=rng.randint(1, 6),
        temperature=rng.choice([0.0, 0.8, 1.3]),
        top_k=rng.choice([0, 20]),
        top_p=rng.choice([1.0, 0.9]),
        draft_method=rng.choice(["probabilistic", "greedy"]),
        seed=seed,
        max_new_tokens=rng.randint(10, 30),
        repropose_after_edit=rng.random() < 0.7,
    )
    session = SpeculativeSession(tiny_pair, "First Citizen:\nWe are", config)
    while session.phase != "finished":
        proposed = session.propose()
        if proposed.gamma and rng.random() < 0.5:
            pos = rng.randint(1, proposed.gamma)
            session.steps.edit_draft(pos, rng.randrange(tiny_pair.vocab_size))
        session.verify()
        commit = session.commit()
        state = commit.kv_after
        committed = session.ids
        assert state.committed_len == len(committed)
        assert state.target_kv_len == session.target.cache.get_seq_length() == len(committed) - 1
        draft_cache = session.drafter.kv.cache.get_seq_length()
        assert state.draft_kv_len == draft_cache <= len(committed) - 1
        assert session.drafter.cached_ids() == committed[:draft_cache]
        assert [r.state for r in state.rows][-1] == "committed-no-KV-yet"
        with torch.inference_mode():
            fresh = tiny_pair.target(input_ids=torch.tensor([committed])).logits[0, -1]
        assert torch.allclose(_next_logits_from_cache(session.target, committed), fresh, atol=1e-4)
        # the draft model runs int8 weights on a CPU: a fresh forward with the same weights
        drafter = session.drafter
        assert drafter.int8 == draft_int8(str(session.target.device))
        again = ModelCache(tiny_pair.draft)
        again.weights, again.head = drafter.kv.weights, drafter.kv.head
        fresh_draft = again.extend(committed)[-1]
        assert torch.allclose(
            _next_logits_from_cache(drafter.kv, committed), fresh_draft, atol=1e-4
        )
    assert session.stop_reason in {"eos", "max_new_tokens", "context_limit"}
