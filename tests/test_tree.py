"""Tree verification (``engine/tree/round.py``, ``engine/tree/generate.py``): the
tree-mask forward equals chain forwards of every root-to-node path; greedy tree decoding
equals target-only greedy; the target's cache after tree rounds equals a fresh forward over
the committed text; one rule says why a tree setting is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.sampling import SamplingConfig
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import ModelDrafter
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import (
    check_tree_settings,
    generate_tree,
    parse_shape,
    tree_refusal,
)
from specdec_core.engine.tree.round import compact, draft_tree, tree_forward, walk

REPO = Path(__file__).resolve().parents[1]
PROMPTS = ["First Citizen:\nWe are accounted poor", "ROMEO:\nBut soft", "To be, or not"]


@torch.inference_mode()
def _chain_logits(model, ids: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


@pytest.mark.parametrize("shape", [(2, 2, 1, 1), (3, 1), (1, 1, 1)])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_tree_forward_equals_chain_forwards(tiny_pair, shape, temperature):
    ids = tiny_pair.tokenizer.encode(PROMPTS[0])
    target, draft = ModelCache(tiny_pair.target), ModelDrafter(tiny_pair.draft)
    target.extend(ids[:-3])  # a cached prefix and three pending committed tokens
    gen = torch.Generator().manual_seed(1)
    tree, forwards = draft_tree(draft, ids, shape, SamplingConfig(temperature), gen)
    assert 1 <= len(tree.tokens) <= 12 and forwards >= 1
    logits, fed = tree_forward(target, ids, tree)
    assert logits.shape[0] == 1 + len(tree.tokens) and fed == 3 + len(tree.tokens)
    assert torch.allclose(logits[0], _chain_logits(tiny_pair.target, ids), atol=1e-5)
    for i in range(len(tree.tokens)):
        path = [tree.tokens[j] for j in tree.path(i)]
        expected = _chain_logits(tiny_pair.target, ids + path)
        assert torch.allclose(logits[1 + i], expected, atol=1e-5), (i, path)


def test_compaction_leaves_the_cache_of_a_plain_decode(tiny_pair):
    ids = tiny_pair.tokenizer.encode(PROMPTS[1])
    target, draft = ModelCache(tiny_pair.target), ModelDrafter(tiny_pair.draft)
    gen = torch.Generator().manual_seed(0)
    tree, _ = draft_tree(draft, ids, (2, 2, 2), SamplingConfig(0.0), gen)
    logits, _ = tree_forward(target, ids, tree)
    deepest = max(range(len(tree.tokens)), key=lambda i: tree.depths[i])
    path = tree.path(deepest)  # keep a path that is not the first branch everywhere
    tokens = [tree.tokens[i] for i in path]
    compact(target, len(tree.tokens), path, tokens)
    assert target.ids == ids + tokens and target.cache.get_seq_length() == len(ids) + len(tokens)
    nxt = target.extend([0])[-1]  # the cache continues exactly like a plain decode
    assert torch.allclose(nxt, _chain_logits(tiny_pair.target, ids + tokens + [0]), atol=1e-5)
    verdict = walk(tree, logits, SamplingConfig(0.0), gen)
    assert verdict.kind in ("correction", "bonus")


@pytest.mark.parametrize("shape", [(1,), (2, 2, 1, 1), (2, 1, 1, 1, 1, 1, 1, 1)])
@pytest.mark.parametrize("prompt", PROMPTS[1:])  # the embedded pair's test below has 30
def test_greedy_tree_equals_target_greedy(tiny_pair, shape, prompt):
    config = SessionConfig(max_new_tokens=30)
    tree = generate_tree(tiny_pair, prompt, config, shape)
    plain = generate(tiny_pair, prompt, config, mode="autoregressive")
    assert tree.output_ids == plain.output_ids and tree.stop_reason == plain.stop_reason
    assert tree.target_forwards == len(tree.nodes_per_round) <= 30
    assert sum(tree.committed_per_round) == len(tree.output_ids)


def test_greedy_tree_on_the_embedded_pair_advances_more_per_forward(embedded_pair):
    prompt = "ROMEO:\nBut soft, what light through yonder window breaks?"
    config = SessionConfig(gamma=4, max_new_tokens=48)
    tree = generate_tree(embedded_pair, prompt, config, (2, 2, 1, 1))
    chain = generate(embedded_pair, prompt, config)
    plain = generate(embedded_pair, prompt, config, mode="autoregressive")
    assert tree.output_ids == chain.output_ids == plain.output_ids
    chain_rate = len(chain.output_ids) / chain.stats.target_forwards
    assert tree.tokens_per_target_forward >= chain_rate  # more candidates, never fewer tokens


def test_sampled_tree_runs_and_respects_the_budget(tiny_pair):
    config = SessionConfig(temperature=1.0, seed=3, max_new_tokens=25)
    run = generate_tree(tiny_pair, PROMPTS[0], config, (2, 2, 2, 2))
    assert (len(run.output_ids), run.stop_reason) == (25, "max_new_tokens")  # seeded: no EOS
    assert max(run.nodes_per_round) <= 12
    with pytest.raises(ConfigError):
        generate_tree(
            tiny_pair, PROMPTS[0], SessionConfig(temperature=1.0, draft_method="greedy"), (2,)
        )


@pytest.mark.parametrize("text", ["", "0,1", "5", "1,1,1,1,1,1,1,1,1", "a,b"])
def test_bad_tree_shapes(text):
    with pytest.raises(ConfigError):
        parse_shape(text)
    assert parse_shape("2,2,1,1") == (2, 2, 1, 1)


@pytest.fixture(scope="module")
def heldout(embedded_pair):
    """The 30 held-out prompts of ``benchmarks/measure_acceptance.py`` and the target's
    own greedy continuations (12 tokens: enough for a depth-8 round)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from measure_acceptance import heldout_prompts

    prompts = heldout_prompts(30)
    config = SessionConfig(max_new_tokens=12)
    plain = [generate(embedded_pair, p, config, mode="autoregressive") for p in prompts]
    return prompts, config, [r.output_ids for r in plain]


@pytest.mark.parametrize(
    ("shape", "budget", "drafter"),
    [
        ((3,), 12, "model"),
        ((2, 2, 1, 1), 12, "model"),
        ((2, 1, 1, 1, 1, 1, 1, 1), 16, "model"),
        ((2, 2, 1, 1), 12, "eagle"),
    ],
)
def test_greedy_tree_equals_target_greedy_on_the_heldout_prompts(
    embedded_pair, heldout, shape, budget, drafter
):
    """Depth γ = 1, 4, 8 on the embedded pair (and the EAGLE head's tree, by name): the
    committed text is the target's own."""
    if drafter == "eagle":
        try:
            make_named_drafter(embedded_pair, "eagle")
        except ValueError as exc:
            pytest.skip(f"no EAGLE head: {exc}")
    prompts, config, plain = heldout
    tokens = forwards = deepest = 0
    for prompt, want in zip(prompts, plain, strict=True):
        run = generate_tree(embedded_pair, prompt, config, shape, budget, drafter=drafter)
        assert run.output_ids == want, prompt
        tokens, forwards = tokens + len(run.output_ids), forwards + run.target_forwards
        deepest = max(deepest, *(r.depth for r in run.records))
    assert deepest == len(shape)  # the deepest level was drafted and verified
    assert tokens / forwards > 1.5  # measured: 1.9 (γ = 1), 3.6 (2,2,1,1), 3.8 (γ = 8), eagle 2.9


@pytest.mark.parametrize(
    ("drafter", "method", "temperature", "code"),
    [
        ("model", "probabilistic", 0.0, None),
        ("model", "greedy", 0.0, None),  # greedy draws nothing at T = 0
        ("model", "probabilistic", 0.7, None),
        ("model", "greedy", 0.7, "tree_needs_probabilistic"),
        ("early-exit", "greedy", 0.7, "tree_needs_probabilistic"),
        ("eagle", "probabilistic", 1.0, None),
        ("ngram", "probabilistic", 0.0, "tree_no_ngram"),
        ("ngram", "greedy", 0.7, "tree_no_ngram"),  # the drafter is named first
        ("no-such-drafter", "probabilistic", 0.0, "tree_no_ngram"),
        (None, "probabilistic", 0.0, None),  # None: the pair's draft model
    ],
)
def test_tree_refusal_table(drafter, method, temperature, code):
    """One rule says why a tree setting is refused, by a code the UI shows as
    ``err_<code>``; ``check_tree_settings`` raises it with that code."""
    assert tree_refusal(drafter, method, temperature) == code
    config = SessionConfig(temperature=temperature, draft_method=method)
    if code is None:
        check_tree_settings(config, drafter)
    else:
        with pytest.raises(ConfigError) as exc:
            check_tree_settings(config, drafter)
        assert exc.value.code == code


def test_tree_refusal_reads_the_drafter_flag(tiny_pair):
    lookup = NgramDrafter(tiny_pair.vocab_size, 3)
    assert tree_refusal(lookup, "probabilistic", 0.0) == "tree_no_ngram"
    assert tree_refusal(ModelDrafter(tiny_pair.draft), "probabilistic", 0.0) is None
    with pytest.raises(ConfigError, match="cannot draft a tree") as exc:
        generate_tree(tiny_pair, PROMPTS[0], SessionConfig(), (2,), drafter=lookup)
    assert exc.value.code == "tree_no_ngram"
    with pytest.raises(ConfigError, match="cannot draft a tree") as exc:  # the walk's own check
        draft_tree(lookup, [1, 2, 3], (2,), SamplingConfig(0.0), torch.Generator())
    assert exc.value.code == "tree_no_ngram"


def test_truncate_restores_a_cache_after_a_tree_forward(tiny_pair):
    """``ModelCache.truncate`` drops the tree rows a masked forward left beyond ``ids``."""
    ids = tiny_pair.tokenizer.encode(PROMPTS[2])
    target, draft = ModelCache(tiny_pair.target), ModelDrafter(tiny_pair.draft)
    target.track_hidden = True
    target.extend(ids[:-2])
    before = target.kv_len
    tree, _ = draft_tree(draft, ids, (2, 2), SamplingConfig(0.0), torch.Generator())
    tree_forward(target, ids, tree)
    assert target.kv_len == len(ids)  # the pending tokens joined ids, the nodes did not
    assert target.cache.get_seq_length() == len(ids) + len(tree.tokens)
    assert len(target.hidden) == target.cache.get_seq_length()
    target.truncate(before)
    assert target.kv_len == target.cache.get_seq_length() == len(target.hidden) == before
    nxt = target.extend(ids[before:])[-1]  # continues exactly like a plain decode
    assert torch.allclose(nxt, _chain_logits(tiny_pair.target, ids), atol=1e-5)
