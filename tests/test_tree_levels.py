"""Tree drafting one depth at a time: the draft model, early exit and the EAGLE head run
each tree level in ONE masked forward; the tree, its ``q`` rows and the runs equal
node-by-node drafting."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.kvcache import ModelCache
from specdec_core.core.sampling import SamplingConfig
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.eagle import EagleDrafter
from specdec_core.drafters.eagle_head import load_eagle_head
from specdec_core.drafters.model import EarlyExitDrafter, ModelDrafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.round import draft_tree

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PROMPT = "ROMEO:\nBut soft, what light through yonder window"


class NodeByNode(ModelDrafter):
    """The same draft model, one forward per expanded node (the reference)."""

    def tree_level_logits(self, context, paths):
        return Drafter.tree_level_logits(self, context, paths)


class EarlyNodeByNode(EarlyExitDrafter):
    def tree_level_logits(self, context, paths):
        return Drafter.tree_level_logits(self, context, paths)


class EagleNodeByNode(EagleDrafter):
    def tree_level_logits(self, context, paths):
        return Drafter.tree_level_logits(self, context, paths)


def _drafters(pair, kind: str) -> tuple[Drafter, Drafter]:
    if kind == "model":
        return ModelDrafter(pair.draft), NodeByNode(pair.draft)
    if kind == "eagle":
        made = (
            EagleDrafter(load_eagle_head(pair), pair.target),
            EagleNodeByNode(load_eagle_head(pair), pair.target),
        )
        for drafter in made:
            drafter.attach(ModelCache(pair.target))
        return made
    return EarlyExitDrafter(pair.target, 2), EarlyNodeByNode(pair.target, 2)


def _cached(drafter) -> int:
    """Rows in the drafter's own cache."""
    return (
        drafter.cache.get_seq_length()
        if isinstance(drafter, EagleDrafter)
        else drafter.kv.cache.get_seq_length()
    )


@pytest.mark.parametrize("kind", ["model", "early-exit", "eagle"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("shape", [(2, 2, 1, 1), (3, 2, 2)])
def test_a_level_forward_drafts_the_tree_node_by_node_drafting_drafts(
    embedded_pair, kind, temperature, shape
):
    ids = embedded_pair.tokenizer.encode(PROMPT)
    sampling = SamplingConfig(temperature=temperature)
    batched, serial = _drafters(embedded_pair, kind)
    for round_ in range(2):  # a second round on caches the first left behind
        context = ids + [17 + round_]
        trees = []
        for drafter in (batched, serial):
            gen = torch.Generator().manual_seed(round_)
            trees.append(draft_tree(drafter, context, shape, sampling, gen, budget=9))
        (tree, forwards), (ref, ref_forwards) = trees
        assert (tree.tokens, tree.parents, tree.depths) == (ref.tokens, ref.parents, ref.depths)
        assert tree.child_q.keys() == ref.child_q.keys()
        for j, q in tree.child_q.items():
            assert torch.allclose(q, ref.child_q[j], atol=1e-5)
        if kind == "eagle":  # feature catch-up, then one head step per level
            assert forwards <= ref_forwards  # (equal: identical siblings share entries)
        else:
            assert forwards == len(set(tree.depths))  # one forward per level expanded
            assert ref_forwards == len(ref.child_q)  # one per expanded node
        assert len(tree.tokens) == 9
        for drafter in (batched, serial):  # the next round's rollback drops the tree rows
            drafter.rollback(len(ids))
            assert _cached(drafter) == len(drafter.cached_ids()) - (kind == "eagle")
        assert _cached(batched) == _cached(serial)


@pytest.mark.parametrize("kind", ["model", "eagle"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_tree_run_equals_the_node_by_node_run(embedded_pair, kind, temperature):
    config = SessionConfig(temperature=temperature, seed=3, max_new_tokens=80)  # caches grow
    runs = [
        generate_tree(embedded_pair, PROMPT, config, (2, 2, 1, 1), drafter=drafter)
        for drafter in _drafters(embedded_pair, kind)
    ]
    assert runs[0].output_ids == runs[1].output_ids
    assert [r.tokens for r in runs[0].records] == [r.tokens for r in runs[1].records]
    assert runs[0].draft_forwards < runs[1].draft_forwards
    if temperature == 0.0:
        alone = generate(embedded_pair, PROMPT, config, "autoregressive")
        assert runs[0].output_ids == alone.output_ids
