"""The tree step machine (``engine/tree/session.py``): node states on known cases, the KV
invariant (target cache, its hidden states and the draft cache equal fresh forwards over
the committed text) after tree rounds with a rejection at every depth, the views, the
step machine equal to ``generate_tree`` round by round, atomic steps, and the CLI."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
import torch
from conftest import run_json

from specdec_core.__main__ import main
from specdec_core.core.errors import ConfigError, PhaseError
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import ModelDrafter
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.records import summarize_tree
from specdec_core.engine.tree.session import TreeSession
from specdec_core.engine.tree.trace import TreeRoundTrace

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"
SHAPE = (2, 2, 1, 1)


class PoisonDrafter(ModelDrafter):
    """Drafts with the *target* model, so every greedy top-1 child is the target's own
    choice, except at depth ``poison``, where the target's favourite is removed from the
    logits: every child there is wrong and the walk stops at that depth. Like a
    feature-level drafter, it asks the target's cache to keep hidden states."""

    name = "poison"

    def __init__(self, pair, poison: int) -> None:
        super().__init__(pair.target)
        self.poison = poison
        self.session: TreeSession | None = None

    def attach(self, target: ModelCache) -> None:
        target.track_hidden = True

    def tree_level_logits(self, context: list[int], paths: list[list[int]]) -> torch.Tensor:
        return Drafter.tree_level_logits(self, context, paths)  # each node through tree_logits

    def tree_logits(self, context: list[int]) -> torch.Tensor:
        logits = super().tree_logits(context).clone()
        assert self.session is not None
        if len(context) - len(self.session.ids) + 1 == self.poison:
            logits[logits.argmax()] = float("-inf")
        return logits


def _poisoned(pair, poison: int, **config) -> TreeSession:
    drafter = PoisonDrafter(pair, poison)
    session = TreeSession(pair, PROMPT, SessionConfig(**config), drafter, SHAPE)
    drafter.session = session
    return session


@torch.inference_mode()
def _assert_fresh(cache: ModelCache) -> None:
    """Keys, values (and hidden states when kept) equal a fresh forward over cache.ids."""
    out = cache.model(
        input_ids=torch.tensor([cache.ids]), use_cache=True, output_hidden_states=cache.track_hidden
    )
    fresh = out.past_key_values
    assert cache.cache.get_seq_length() == len(cache.ids)
    for mine, ref in zip(cache.cache.layers, fresh.layers, strict=True):
        assert torch.allclose(mine.keys, ref.keys, atol=1e-5)
        assert torch.allclose(mine.values, ref.values, atol=1e-5)
    if cache.track_hidden:
        assert cache.hidden is not None and cache.hidden.shape[0] == len(cache.ids)
        assert torch.allclose(cache.hidden, out.hidden_states[-1][0].float(), atol=1e-5)


def _assert_invariant(session: TreeSession) -> None:
    target = session.target
    assert target.ids == session.ids[: target.kv_len] and target.kv_len == len(session.ids) - 1
    _assert_fresh(target)
    cached = session.drafter.cached_ids() or []
    assert cached == session.ids[: len(cached)]
    _assert_fresh_draft(session.drafter.kv)  # type: ignore[attr-defined]


def _assert_fresh_draft(cache: ModelCache) -> None:
    """The draft cache's keys and values equal a fresh forward over its ids on the same
    weights (the draft model runs int8 on a CPU: transformers' float32 forward is not its
    reference; a wrong row would be off by far more than the tolerance)."""
    if not cache.ids:
        assert cache.cache.get_seq_length() == 0
        return
    again = ModelCache(cache.model)
    again.weights, again.head = cache.weights, cache.head
    with torch.inference_mode():
        again.extend(cache.ids)
    assert cache.cache.get_seq_length() == len(cache.ids) == again.kv_len
    for mine, ref in zip(cache.cache.layers, again.cache.layers, strict=True):
        assert torch.allclose(mine.keys, ref.keys, atol=1e-4)
        assert torch.allclose(mine.values, ref.values, atol=1e-4)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_kv_invariant_after_a_rejection_at_every_depth(embedded_pair, depth):
    session = _poisoned(embedded_pair, depth, max_new_tokens=40)
    for _ in range(2):
        trace = session.run_round()
        record = trace.record
        assert record.kind == "correction" and record.accepted == depth - 1
        at_depth = [i for i, d in enumerate(record.depths) if d == depth]
        parent = record.path[-1] if record.path else -1
        checked = [i for i in at_depth if record.parents[i] == parent]
        assert checked and all(record.states[i] == "rejected" for i in checked)
        assert all(record.states[i] == "unchecked" for i in at_depth if i not in checked)
        deeper = [i for i, d in enumerate(record.depths) if d > depth]
        assert all(record.states[i] == "unchecked" for i in deeper)
        _assert_invariant(session)
    stats = session.steps.summary()
    assert stats.tokens_per_target_forward == depth  # depth − 1 path nodes + the correction


def test_node_states_on_known_cases(embedded_pair):
    session = _poisoned(embedded_pair, 2)
    proposed = session.propose()
    assert {n.state for n in proposed.tree.nodes} == {"tentative"} and len(
        proposed.tree.nodes
    ) == 12
    assert proposed.shape == (2, 2, 1, 1) and proposed.round_index == 0
    assert proposed.kv_after == session.kv_state()
    verified = session.verify()
    view = verified.tree
    assert session.current_record.path == (0,) and view.path == (0,)
    assert verified.target_forward_tokens == len(session.ids) + 12  # round 1: prompt + nodes
    assert session.current_stop_reason is None and verified.kv_after == session.kv_state()
    assert session.steps.current_verify is verified and session.steps.current_propose is proposed
    assert session.steps.attention_mask() is proposed.mask  # drawn at propose, kept
    assert [n.state for n in view.nodes] == ["accepted"] + ["rejected"] * 3 + ["unchecked"] * 8
    assert view.path == (0,) and view.kind == "correction"
    assert [n.parent for n in view.nodes] == [-1, -1, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7]
    assert view.nodes[0].accept_prob == 1.0 and view.nodes[1].accept_prob == 0.0
    assert view.nodes[4].accept_prob is None and view.nodes[4].p is None  # never checked
    want = embedded_pair.target(input_ids=torch.tensor([session.ids + [view.nodes[0].token.id]]))
    assert view.next_token.id == int(want.logits[0, -1].argmax())  # the target's correction
    # each step's "before" table is the one the step before left (kept, not rebuilt)
    assert verified.kv_before == proposed.kv_after
    commit_trace = session.commit()
    assert commit_trace.kv_before == verified.kv_after
    # the finished round holds its three step records and its record, nothing copied out
    done = session.history[-1]
    assert done.propose is proposed and done.verify is verified and done.commit is commit_trace
    assert done.record.path == (0,) and done.record.kind == commit_trace.kind == "correction"
    assert session.steps.compaction() is commit_trace.compaction and commit_trace.compaction.applied

    clean = _poisoned(embedded_pair, 99)  # no poison: the whole top-1 path is accepted
    clean.propose()
    view = clean.verify().tree
    acc, rej, unc = "accepted", "rejected", "unchecked"
    expected = [acc, rej, acc, rej, unc, unc, acc, unc, unc, unc, acc, unc]
    assert [n.state for n in view.nodes] == expected
    assert view.path == (0, 2, 6, 10) and view.kind == "bonus"
    assert [n.position for n in view.nodes] == [
        len(clean.ids) - 1 + d for d in (1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4)
    ]

    mask = clean.steps.attention_mask()
    assert mask.grid.shape == (12, 13) and mask.grid[:, 0].all()
    assert mask.prefix_len == len(clean.ids)
    assert [j - 1 for j in mask.grid[10].nonzero()[0] if j] == [0, 2, 6, 10]  # ancestors + self
    assert mask.grid[:, 1:].sum() == sum(d for d in (1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4))

    committed = len(clean.ids)
    plan = clean.steps.compaction()
    assert not plan.applied and plan.rows_before == committed + 12
    nodes = {s.node: s for s in plan.slots if s.node is not None}
    assert nodes[0].action == "kept" and nodes[0].new_slot == committed
    assert [(nodes[i].action, nodes[i].new_slot) for i in (2, 6, 10)] == [
        ("moved", committed + 1),
        ("moved", committed + 2),
        ("moved", committed + 3),
    ]
    assert all(nodes[i].action == "dropped" for i in (1, 3, 4, 5, 7, 8, 9, 11))
    committed_trace = clean.commit()
    done = committed_trace.compaction
    assert committed_trace.kind == "bonus" and committed_trace.stop_reason is None
    assert [t.id for t in committed_trace.appended] == clean.ids[committed:]
    assert len(committed_trace.appended) == 5 and committed_trace.kv_after == clean.kv_state()
    assert done.applied and done.rows_after == clean.target.kv_len == committed + 4
    kept = sorted((s for s in done.slots if s.new_slot is not None), key=lambda s: s.new_slot)
    assert [s.token.id for s in kept] == clean.target.ids
    _assert_invariant(clean)
    clean.propose()
    again = clean.verify()  # round 2 feeds the one committed token without KV + the nodes
    assert again.round_index == 1 and again.target_forward_tokens == 1 + len(again.tree.nodes)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_step_machine_equals_generate_tree_round_by_round(embedded_pair, temperature):
    config = SessionConfig(temperature=temperature, seed=4, max_new_tokens=30)
    run = generate_tree(embedded_pair, PROMPT, config, SHAPE)
    session = TreeSession(embedded_pair, PROMPT, config, "model", SHAPE)
    session.target.track_hidden = True  # the hidden states stay right in sampled rounds too
    while session.phase != "finished":
        session.run_round()
        _assert_invariant(session)
    assert session.records == run.records and session.generated_ids == run.output_ids
    assert session.stop_reason == run.stop_reason and session.text == run.text
    assert summarize_tree(session.records) == run.stats
    assert run.stats.tokens == len(run.output_ids)
    assert run.stats.target_forwards == run.target_forwards == len(run.records)


def test_steps_are_atomic_and_phased(embedded_pair, monkeypatch):
    config = SessionConfig(temperature=1.0, seed=1, max_new_tokens=20)
    reference = TreeSession(embedded_pair, PROMPT, config, None, SHAPE)
    reference.run_round()
    session = TreeSession(embedded_pair, PROMPT, config, None, SHAPE)
    with pytest.raises(PhaseError):
        session.verify()
    session.propose()
    before = (session.target.kv_len, session.phase)

    def boom(*args, **kwargs):
        raise RuntimeError("walk failed")

    monkeypatch.setattr("specdec_core.engine.tree.session.walk", boom)
    with pytest.raises(RuntimeError):
        session.verify()  # the tree forward ran, then the walk raised
    monkeypatch.undo()
    assert session.target.cache.get_seq_length() == session.target.kv_len == before[0]
    assert session.phase == before[1]
    session.verify()  # the round's verification stream is made afresh: the same draws
    session.commit()
    assert session.records == reference.records

    lookup = TreeSession(embedded_pair, PROMPT, config, NgramDrafter(embedded_pair.vocab_size, 3))
    with pytest.raises(ConfigError, match="cannot draft a tree"):
        lookup.propose()
    assert lookup.phase == "propose" and lookup.steps.tree_view() is None
    with pytest.raises(ConfigError):
        TreeSession(embedded_pair, PROMPT, config, None, SHAPE, budget=17)


def test_tree_view_is_the_step_records_frozen_view(embedded_pair):
    """Every rerun of the page asks for the view: it is the same object (the figure cache
    keys on it), the propose record's until verify, then the verify record's."""
    session = TreeSession(embedded_pair, PROMPT, SessionConfig(max_new_tokens=12), None, SHAPE)
    assert session.steps.tree_view() is None
    proposed = session.propose()
    first = session.steps.tree_view()
    assert first is proposed.tree and session.steps.tree_view() is first
    assert {node.state for node in first.nodes} == {"tentative"}
    verified = session.verify()
    assert session.steps.tree_view() is verified.tree is session.steps.tree_view()
    assert "tentative" not in {node.state for node in verified.tree.nodes}  # the verdicts
    session.commit()
    assert session.steps.tree_view() is None


def test_cli_tree_json(capsys, pair_arg):
    args = ["run", "--pair", pair_arg, "--prompt", "KING:\nWe", "--max-new-tokens", "12"]
    tree = run_json(capsys, *args, "--tree", "2,2,1,1", "--json")
    plain = run_json(capsys, *args, "--mode", "autoregressive", "--json")
    assert tree["output_ids"] == plain["output_ids"] and tree["tree"] == [2, 2, 1, 1]
    rounds = tree["rounds"]
    assert tree["stats"]["rounds"] == tree["stats"]["target_forwards"] == len(rounds)
    assert sum(len(r["appended"]) for r in rounds) == len(tree["output_ids"])
    assert tree["stats"]["tokens_per_target_forward"] == len(tree["output_ids"]) / len(rounds)
    first = rounds[0]
    assert first["nodes"] == len(first["tokens"]) == len(first["states"]) <= 12
    assert (first["accepted"], first["path"], first["kind"]) == (0, [], "correction")
    assert [r["kind"] for r in rounds] == ["correction"] * 11 + ["bonus"]  # none stopped
    assert all(r["accepted"] == len(r["path"]) for r in rounds)
    assert first["target_kv_len"] == first["committed_len"] - 1
    bads = (
        ["--tree", "2,0"],
        ["--tree", "x"],
        ["--tree", "2", "--drafter", "ngram"],
        ["--tree", "2", "--edit", "1:1=5"],
        ["--tree", "2", "--tree-budget", "40"],
    )
    for bad in bads:
        assert main([*args, *bad, "--json"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err
    bench = run_json(
        capsys,
        "bench",
        "--pair",
        pair_arg,
        "--tree",
        "2,1",
        "--max-new-tokens",
        "6",
        "--repeats",
        "1",
        "--json",
    )
    methods = [(r["method"], r["setting"]) for r in bench["rows"]]
    assert methods == [("target-only", ""), ("chain", "γ=4"), ("tree", "2,1")]
    assert all(r["tokens"] == 6 and r["ms_per_token"] > 0 for r in bench["rows"])
    assert json.dumps(bench)


def test_eagle_tree_counts_its_prefill_forward(embedded_pair):
    """The EAGLE drafter runs the target's prefill in its first proposal: the round's
    record counts it, so tokens per target forward agree between the fast path, the step
    machine and the records (a fresh user saw 4.4 reported against 3.67 measured)."""
    pytest.importorskip("specdec_core.drafters.eagle")
    from specdec_core.drafters.eagle_head import has_eagle_head

    if not has_eagle_head(embedded_pair):
        pytest.skip("no EAGLE head beside the embedded pair")
    config = SessionConfig(max_new_tokens=12)
    run = generate_tree(embedded_pair, "ROMEO:\nBut soft", config, (2, 2, 1, 1), drafter="eagle")
    assert [r.target_forwards for r in run.records][:2] == [2, 1]
    assert summarize_tree(run.records).target_forwards == run.target_forwards
    assert run.target_forwards == len(run.records) + 1
    session = TreeSession(embedded_pair, "ROMEO:\nBut soft", config, "eagle", (2, 2, 1, 1))
    session.run()
    assert [r.target_forwards for r in session.records] == [r.target_forwards for r in run.records]


def test_a_finished_tree_round_has_the_chains_fields():
    """A finished round of either shape: its step records and its record (the chain's
    student edits besides), nothing copied out of them."""
    chain = [f.name for f in fields(RoundTrace)]
    tree = [f.name for f in fields(TreeRoundTrace)]
    assert tree == [n for n in chain if n != "edits"]
    assert tree == ["round_index", "propose", "verify", "commit", "record"]
