"""The lean GPT-2 forward against transformers' forward (the reference): logits and last
hidden states within 1e-5 for one token, a k-token verify after a prefix, a tree mask and
after a truncation, on the embedded pair, early exit, the EAGLE head's block and tiny
random GPT-2s; the preallocated KV buffer's moves; half-precision copies keep
transformers' own forward."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

from specdec_core.core import lean_gpt2
from specdec_core.core.kvbuffer import FIRST_CAPACITY, KVBuffer
from specdec_core.core.kvcache import ModelCache
from specdec_core.drafters.model import early_exit_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ATOL = 1e-5
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module", params=["target", "draft", "early-exit", "tiny", "tiny-draft"])
def model(request, embedded_pair, tiny_pair):
    return {
        "target": lambda: embedded_pair.target,
        "draft": lambda: embedded_pair.draft,
        "early-exit": lambda: early_exit_model(embedded_pair.target, 2),
        "tiny": lambda: tiny_pair.target,
        "tiny-draft": lambda: tiny_pair.draft,
    }[request.param]()


def _ids(model, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(model.config.vocab_size) for _ in range(n)]


@torch.inference_mode()
def _fresh(model, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' forward over ``ids`` from nothing: ``([T, V] logits, [T, d] hidden)``."""
    out = model(input_ids=torch.tensor([ids], device=model.device), output_hidden_states=True)
    return out.logits[0].float(), out.hidden_states[-1][0].float()


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert torch.allclose(a, b, atol=ATOL), float((a - b).abs().max())


def test_one_token_and_a_verify_after_a_prefix_equal_transformers(model):
    ids = _ids(model, 20, 1)
    kv = ModelCache(model)
    kv.track_hidden = True
    rows = [kv.extend(ids[:12]), kv.extend(ids[12:13]), kv.extend(ids[13:])]  # 12, 1, 7
    logits, hidden = _fresh(model, ids)
    _close(torch.cat(rows), logits)
    _close(kv.hidden, hidden)
    assert kv.kv_len == kv.cache.get_seq_length() == 20
    # the LM head on the last rows only: the same values
    kv.crop(15)
    _close(kv.extend_keep(ids[15:], 2), logits[-2:])
    kv.crop(19)
    _close(kv.extend_last(ids[19:]), logits[-1])


def test_after_truncation_the_cache_equals_a_fresh_forward(model):
    ids, other = _ids(model, 20, 2), _ids(model, 6, 3)
    kv = ModelCache(model)
    kv.track_hidden = True
    kv.extend(ids)
    assert kv.crop(9) == 11 and kv.cache.get_seq_length() == 9
    row = kv.extend(other)
    logits, hidden = _fresh(model, ids[:9] + other)
    _close(row, logits[9:])
    _close(kv.hidden, hidden)
    for mine, ref in zip(kv.cache.layers, _fresh_cache(model, ids[:9] + other), strict=True):
        _close(mine.keys, ref.keys)
        _close(mine.values, ref.values)


@torch.inference_mode()
def _fresh_cache(model, ids: list[int]):
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
    return cache.layers


# A tree after 10 cached tokens: parents of nodes 0..5 (-1: the root, the last committed).
PARENTS = (-1, 0, 0, 1, 2, 4)


def _tree(prefix: int) -> tuple[list[int], torch.Tensor]:
    """Depth-based positions ``[N]`` and the ``[N, prefix + N]`` ancestor mask."""
    n = len(PARENTS)
    depth, allowed = [], torch.zeros(n, prefix + n, dtype=torch.bool)
    allowed[:, :prefix] = True
    for i, parent in enumerate(PARENTS):
        depth.append(0 if parent < 0 else depth[parent] + 1)
        allowed[i, prefix + i] = True
        if parent >= 0:
            allowed[i] |= allowed[parent]
    return [prefix + d for d in depth], allowed


@torch.inference_mode()
def test_a_tree_mask_equals_transformers_masked_forward(model):
    ids, nodes = _ids(model, 10, 4), _ids(model, len(PARENTS), 5)
    positions, allowed = _tree(10)
    kv = ModelCache(model)
    kv.track_hidden = True
    kv.extend(ids)
    mine = kv.extend_masked(nodes, positions, allowed, known=0)
    # transformers: a 4-D additive mask and explicit positions on top of its own cache
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    out = model(
        input_ids=torch.tensor([nodes]),
        cache=cache,
        use_cache=True,
        attention_mask=additive[None, None],
        position_ids=torch.tensor([positions]),
        output_hidden_states=True,
    )
    _close(mine, out.logits[0])
    _close(kv.hidden[10:], out.hidden_states[-1][0])
    # each node's row is the chain forward of its root-to-node path
    for i in range(len(PARENTS)):
        path, j = [], i
        while j >= 0:
            path.insert(0, nodes[j])
            j = PARENTS[j]
        _close(mine[i], _fresh(model, ids + path)[0][-1])
    # keeping one path gathers its rows into place: the cache is that chain's
    kv.keep_rows([10 + 0, 10 + 2, 10 + 4], [nodes[0], nodes[2], nodes[4]])
    assert kv.kv_len == kv.cache.get_seq_length() == 13
    chain = ids + [nodes[0], nodes[2], nodes[4]]
    for mine_layer, ref in zip(kv.cache.layers, _fresh_cache(model, chain), strict=True):
        _close(mine_layer.keys, ref.keys)
    _close(kv.hidden, _fresh(model, chain)[1])


@torch.inference_mode()
def test_the_eagle_heads_step_equals_its_transformers_forward(embedded_pair):
    from specdec_core.drafters.eagle_head import load_eagle_head

    head = load_eagle_head(embedded_pair)
    d = head.config.width
    gen = torch.Generator().manual_seed(0)
    feats, embs = torch.randn(9, d, generator=gen), torch.randn(9, d, generator=gen)
    ref_cache = DynamicCache(config=head.block.config)
    lean_cache = head.new_cache()
    for a, b in ((0, 5), (5, 6), (6, 9)):
        ref = head(feats[None, a:b], embs[None, a:b], ref_cache)[0]
        _close(head.step(feats[a:b], embs[a:b], lean_cache), ref)
    lean_cache.truncate(4)  # a rollback, then new entries at positions 4, 5
    ref = head(feats[None, :6], embs[None, :6])[0]
    _close(head.step(feats[4:6], embs[4:6], lean_cache), ref[4:6])


@torch.inference_mode()
def test_the_result_does_not_depend_on_the_buffers_capacity(embedded_pair):
    """Bit for bit: a replay on a fresh buffer equals a session whose buffer grew."""
    w = lean_gpt2.gpt2_weights(embedded_pair.target)
    ids = _ids(embedded_pair.target, 30, 6)
    small, big = w.new_cache(), w.new_cache()
    big.reserve(8 * FIRST_CAPACITY)
    assert small.capacity == FIRST_CAPACITY and big.capacity == 8 * FIRST_CAPACITY
    for kv in (small, big):
        lean_gpt2.forward(w, kv, ids[:25])
    assert torch.equal(lean_gpt2.forward(w, small, ids[25:]), lean_gpt2.forward(w, big, ids[25:]))
    assert torch.equal(lean_gpt2.forward(w, small, [7]), lean_gpt2.forward(w, big, [7]))


def test_a_buffer_grown_inside_a_forward_moves_rows_outside_inference_mode(embedded_pair):
    """The tree's compaction runs outside inference mode on rows a forward wrote."""
    w = lean_gpt2.gpt2_weights(embedded_pair.target)
    kv = w.new_cache()
    with torch.inference_mode():
        lean_gpt2.forward(w, kv, _ids(embedded_pair.target, 2 * FIRST_CAPACITY, 8))
    assert kv.capacity == 2 * FIRST_CAPACITY
    row = kv.k[0, :, 100].clone()
    kv.keep_rows(90, [100])
    assert kv.length == 91 and torch.equal(kv.k[0, :, 90], row)
    kv.reserve(4 * FIRST_CAPACITY)
    assert torch.equal(kv.k[0, :, 90], row)


def test_the_buffer_grows_by_doubling_and_moves_rows():
    kv = KVBuffer(2, 1, 1, torch.device("cpu"), torch.float32)
    kv.k[:, 0, :5, 0] = torch.arange(5.0)
    kv.length = 5
    kv.reserve(FIRST_CAPACITY + 1)
    assert kv.capacity == 2 * FIRST_CAPACITY
    assert kv.k[1, 0, :5, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # rows kept on growth
    kv.keep_rows(2, [4, 3])  # keep 0, 1, then rows 4 and 3 in that order
    assert kv.length == 4 and kv.layers[0].keys[0, 0, :, 0].tolist() == [0.0, 1.0, 4.0, 3.0]
    kv.truncate(1)
    assert kv.get_seq_length() == 1 and kv.layers[1].keys.shape == (1, 1, 1, 1)


@pytest.mark.parametrize("device", DEVICES)
@torch.inference_mode()
def test_the_lean_forward_runs_on_every_device(device):
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=64)
    model = GPT2LMHeadModel(config).eval().to(device)
    ids = list(range(3, 40))
    kv = ModelCache(model)
    rows = torch.cat([kv.extend(ids[:30]), kv.extend(ids[30:])])
    assert rows.device.type == device and rows.dtype == torch.float32
    _close(rows, _fresh(model, ids)[0])


def test_a_model_that_is_not_gpt2_is_refused():
    with pytest.raises(ValueError, match="GPT-2"):
        lean_gpt2.gpt2_weights(torch.nn.Linear(2, 2))


@torch.inference_mode()
def test_a_half_precision_copy_runs_transformers_own_forward(embedded_pair):
    """bfloat16 copies (the numerics lesson) keep transformers' kernels, bit for bit."""
    model = copy.deepcopy(embedded_pair.target).to(torch.bfloat16)
    ids = _ids(model, 16, 7)
    kv = ModelCache(model)
    assert not kv.lean
    mine = [kv.extend(ids[:10]), kv.extend(ids[10:])]
    cache = DynamicCache(config=model.config)
    ref = [
        model(input_ids=torch.tensor([part]), cache=cache, use_cache=True).logits[0].float()
        for part in (ids[:10], ids[10:])
    ]
    assert all(torch.equal(a, b) for a, b in zip(mine, ref, strict=True))
    assert ModelCache(embedded_pair.target).lean


@pytest.mark.parametrize("bad", [[4096], [-1], [5, 4096]])
def test_an_id_outside_the_vocabulary_raises_and_leaves_the_cache(embedded_pair, bad):
    """One id alone is read as a slice of the embedding (a draft step): outside the
    vocabulary it raises as a batch of ids does, instead of an empty row (or, for −1, the
    last row) and a cache whose ids no longer match its rows."""
    assert embedded_pair.vocab_size == 4096
    cache = ModelCache(embedded_pair.target)
    cache.extend([10, 11])
    with pytest.raises(IndexError):
        cache.extend(bad)
    assert cache.ids == [10, 11] and cache.kv_len == 2
