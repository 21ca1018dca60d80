"""``drafters/``: prompt lookup's matching rule, early exit's shared, untouched target, the
one proposal loop and the tree flag (the greedy losslessness of each drafter is in
``test_generate.py``); ``core/device.sync``."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from specdec_core.core.device import sync
from specdec_core.core.sampling import SamplingConfig
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import draw_proposal
from specdec_core.drafters.block import BlockDrafter
from specdec_core.drafters.draft_vocab import DraftVocab
from specdec_core.drafters.eagle import EagleDrafter
from specdec_core.drafters.model import EarlyExitDrafter, ModelDrafter, early_exit_model
from specdec_core.drafters.mtp import MtpDrafter
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.recurrent import RecurrentDrafter
from specdec_core.drafters.registry import (
    DRAFTER_NAMES,
    TREE_DRAFTERS,
    default_knob,
    make_named_drafter,
)


@pytest.mark.parametrize(
    ("context", "max_n", "gamma", "expected"),
    [
        ([1, 2, 3, 4, 5, 6, 7, 9, 2, 3, 4], 3, 3, [5, 6, 7]),  # planted repeat of 2 3 4
        ([1, 2, 3, 8], 3, 4, []),  # last token never seen before: nothing proposed
        ([5], 3, 4, []),  # a single token has no earlier text
        ([1, 2, 3, 4], 3, 0, []),  # γ = 0 asks for nothing
        ([2, 3, 9, 3, 7, 2, 3], 3, 2, [9, 3]),  # longest: "2 3" beats the later "3"
        ([2, 3, 9, 3, 7, 2, 3], 1, 2, [7, 2]),  # n = 1: the most recent earlier "3"
        ([4, 1, 8, 4, 1, 6, 4, 1], 2, 1, [6]),  # most recent occurrence of "4 1"
        ([7, 1, 1, 1, 1], 3, 4, [1, 1, 1, 1]),  # the copy runs on into its own output
        ([5, 6, 5, 6, 5, 6], 3, 5, [5, 6, 5, 6, 5]),  # period 2 < γ: still γ drafts
    ],
)
def test_prompt_lookup_table(context, max_n, gamma, expected):
    assert NgramDrafter(vocab_size=16, max_n=max_n).lookup(context, gamma) == expected


def test_prompt_lookup_proposal_is_one_hot_and_free():
    drafter = NgramDrafter(vocab_size=16, max_n=2)
    draft = drafter.propose([3, 4, 5, 3, 4], 3, SessionConfig().sampling, "probabilistic", None)
    assert draft.ids.tolist() == [5, 3, 4] and draft.forwards == 0
    assert torch.equal(draft.probs, torch.eye(16)[[5, 3, 4]])
    empty = drafter.propose([1, 2], 3, SessionConfig().sampling, "greedy", None)
    assert empty.ids.shape == (0,) and empty.probs.shape == (0, 16)
    assert drafter.cached_ids() is None and drafter.rollback(0) == 0 and drafter.knob == 2


def test_knobs_and_their_limits(tiny_pair):
    assert default_knob(tiny_pair, "ngram") == 3 and default_knob(tiny_pair, "early-exit") == 1
    model = make_named_drafter(tiny_pair, "model")
    assert isinstance(model, ModelDrafter) and model.kv.model is tiny_pair.draft
    assert model.forward_ms == 0.0 and model.cached_ids() == []
    assert make_named_drafter(tiny_pair, "ngram").knob == 3
    assert make_named_drafter(tiny_pair, "early-exit", 2).knob == 2
    for name, knob in [("ngram", 0), ("ngram", -1), ("early-exit", 0), ("early-exit", 3)]:
        with pytest.raises(ValueError):  # 0 is out of range, not "the default"
            make_named_drafter(tiny_pair, name, knob)


@pytest.fixture
def fresh_target() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=3,
        n_embd=32,
        n_head=2,
        vocab_size=64,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_early_exit_is_first_layers_final_norm_and_head(fresh_target, layers):
    """Logits = lm_head(ln_f(h_k)) after the target's first k blocks; k = all is the
    target; the drafter's own cache (k layers) gives a fresh forward's logits."""
    ids = torch.tensor([[5, 9, 2, 7, 7, 1, 30, 4]])
    shallow = early_exit_model(fresh_target, layers)
    body = fresh_target.transformer
    with torch.no_grad():
        hidden = fresh_target(input_ids=ids, output_hidden_states=True).hidden_states[layers]
        if layers < 3:  # the last hidden state already went through ln_f
            hidden = body.ln_f(hidden)
        expected = fresh_target.lm_head(hidden)
        assert torch.allclose(shallow(input_ids=ids).logits, expected, atol=1e-5)
        if layers == 3:
            assert torch.allclose(expected, fresh_target(input_ids=ids).logits, atol=1e-5)
    drafter = EarlyExitDrafter(fresh_target, layers)
    kv = drafter.kv
    incremental = torch.cat([kv.extend([5, 9, 2]), kv.extend([7]), kv.extend([7, 1, 30, 4])])
    assert torch.allclose(incremental, expected[0], atol=1e-5)
    assert len(kv.cache.layers) == layers and kv.kv_len == 8
    assert drafter.cached_ids() == ids[0].tolist() and drafter.rollback(3) == 5


def test_early_exit_leaves_the_shared_target_alone(fresh_target):
    fresh_target.train()  # a state early exit must not flip
    before = copy.deepcopy(fresh_target.state_dict())
    config_before = fresh_target.config.to_dict()
    flags = [(m.training, id(m)) for m in fresh_target.modules()]
    grads = [p.requires_grad for p in fresh_target.parameters()]
    shallow = early_exit_model(fresh_target, 2)
    assert shallow.transformer.h[1] is fresh_target.transformer.h[1]  # shared, not copied
    assert shallow.lm_head is fresh_target.lm_head and shallow.config.n_layer == 2
    assert fresh_target.config.to_dict() == config_before and len(fresh_target.transformer.h) == 3
    assert [(m.training, id(m)) for m in fresh_target.modules()] == flags
    assert [p.requires_grad for p in fresh_target.parameters()] == grads
    assert all(torch.equal(before[k], v) for k, v in fresh_target.state_dict().items())
    assert not shallow.training


def test_drafter_time_figure_legend_sits_below_the_axis_not_on_the_title():
    """The legend's top is 50 px under the plot area (below the tick labels and the x
    title), inside the bottom margin; the title keeps the top margin to itself."""
    from specdec_core.ui.figures.drafters import drafter_time_figure

    labels = {"draft": "drafting", "verify": "verification", "other": "other", "ms": "ms"}
    fig = drafter_time_figure(
        ["target alone", "draft model", "EAGLE head"],
        [0, 2, 1],
        [9, 3, 3],
        [1, 1, 1],
        labels,
        "Where the time goes",
    )
    lay = fig.layout
    plot_px = lay.height - lay.margin.t - lay.margin.b
    assert (lay.legend.yanchor, lay.legend.orientation) == ("top", "h")
    assert lay.legend.y < 0 and -lay.legend.y * plot_px == pytest.approx(50)
    assert lay.margin.b >= 50 + 50  # two legend rows fit under the gap
    assert plot_px == 48 * 3 + 30 and lay.margin.t == 50


def test_can_draft_tree_is_exactly_where_tree_logits_gives_logits(tiny_pair):
    """The interface's flag, read without running anything, agrees with ``tree_logits``;
    the tree drafters by name derive from it."""
    for name in DRAFTER_NAMES:
        if name == "eagle":
            assert EagleDrafter.can_draft_tree  # the tiny pair ships no head
            continue
        if name == "mtp":
            assert MtpDrafter.can_draft_tree  # the tiny pair ships no heads
            continue
        if name == "block":  # the tiny pair ships no block drafter; one row per depth
            assert not BlockDrafter.can_draft_tree
            continue
        if name == "recurrent":  # the tiny pair ships no recurrent model; one state per path
            assert not RecurrentDrafter.can_draft_tree
            continue
        drafter = make_named_drafter(tiny_pair, name)
        assert drafter.can_draft_tree == (drafter.tree_logits([1, 2, 3]) is not None), name
    assert TREE_DRAFTERS == ("model", "early-exit", "eagle", "mtp")


@pytest.mark.parametrize("name", ["model", "early-exit", "ngram"])
def test_propose_and_propose_argmax_agree_at_temperature_zero(tiny_pair, name):
    """The one serial loop behind both proposals: the same ids, the same forwards, and the
    rows ``q_i`` one-hot on them."""
    context = tiny_pair.tokenizer.encode("To be, or not to be, to be")
    a, b = make_named_drafter(tiny_pair, name), make_named_drafter(tiny_pair, name)
    draft = a.propose(context, 4, SamplingConfig(0.0), "probabilistic", torch.Generator())
    ids, forwards = b.propose_argmax(context, 4)
    assert draft.ids.tolist() == ids and draft.forwards == forwards == a.forwards
    assert forwards == (0 if name == "ngram" else 4)
    assert draft.probs.shape == (len(ids), tiny_pair.vocab_size)
    assert draft.probs.argmax(-1).tolist() == ids and torch.all(draft.probs.sum(-1) == 1.0)


@pytest.mark.parametrize(
    ("temperature", "method"), [(1.0, "probabilistic"), (0.7, "greedy"), (0.0, "probabilistic")]
)
def test_draw_proposal_over_a_reduced_head(temperature, method):
    """One draft from ``[N]`` subset logits: the id is the subset's, ``q`` the ``[N]`` row
    it was drawn from (``Drafter.propose`` widens the rows once), ``None`` for an argmax
    pick; the draw is ``torch.multinomial`` on that row from the generator, nothing else."""
    vocab = DraftVocab.of([7, 3, 11, 0, 5], 4, 12)  # ids 0, 3, 7, 11
    logits = torch.tensor([0.5, 2.0, -1.0, 1.5])
    sampling = SamplingConfig(temperature)
    token, q = draw_proposal(logits, sampling, method, torch.Generator().manual_seed(3), vocab)
    if temperature == 0.0 or method == "greedy":
        assert (token, q) == (3, None)  # the subset's argmax, index 1
        return
    row = torch.softmax(logits, -1)
    assert torch.equal(q, row)
    index = int(torch.multinomial(row, 1, generator=torch.Generator().manual_seed(3)))
    assert token == vocab.id_list[index]


def test_sync_is_a_no_op_off_cuda_and_syncs_on_cuda(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append(a))
    sync("cpu")
    sync(torch.device("cpu"))
    assert calls == []
    sync("cuda:0")
    sync(torch.device("cuda"))
    assert calls == [(), ()]


def test_the_drafter_table_rows(tiny_pair, embedded_pair):
    """One row per drafter: what the engine, the server and the pages read of it.

    | drafter    | tree refusal    | confidence | empty draft | HF peer | cost        |
    """
    from specdec_core.drafters.registry import (
        DRAFTERS,
        DrafterSpec,
        no_tree_code,
        preset_max_gamma,
        spec_of,
    )

    rows = {
        "model": (None, True, "drafter", True, "serial"),
        "ngram": ("tree_no_ngram", False, "ngram", False, "none"),
        "early-exit": (None, True, "drafter", False, "serial"),
        "eagle": (None, True, "drafter", False, "serial"),
        "mtp": (None, True, "drafter", False, "heads"),
        "block": ("tree_block", True, "drafter", False, "one_forward"),
        "recurrent": ("tree_recurrent", True, "drafter", False, "serial"),
    }
    assert tuple(DRAFTERS) == DRAFTER_NAMES == tuple(rows)
    for name, (no_tree, confidence, empty, hf, cost) in rows.items():
        spec = DRAFTERS[name]
        got = (spec.tree_code, spec.confidence, spec.empty_draft, spec.hf_assisted)
        assert got + (spec.draft_cost,) == (no_tree, confidence, empty, hf, cost), name
        # a row carries a refusal exactly when the drafter it makes cannot draft a tree
        made = make_named_drafter(embedded_pair, name)
        assert made.can_draft_tree == (no_tree is None) == spec.can_draft_tree, name
        assert no_tree_code(name) == (no_tree or "tree_no_ngram"), name
        assert spec.on_preset("embedded") and spec.on_pair(embedded_pair), name
    assert spec_of(None) is DRAFTERS["model"] and spec_of("nope") is None
    assert spec_of(make_named_drafter(tiny_pair, "ngram")) is DRAFTERS["ngram"]
    assert no_tree_code("block") == "tree_block" and no_tree_code("nope") == "tree_no_ngram"
    # a row whose code disagrees with its class is refused when the table is built
    with pytest.raises(ValueError, match="can_draft_tree"):
        DrafterSpec("x", NgramDrafter, lambda pair, _: NgramDrafter(pair.vocab_size, 3))
    with pytest.raises(ValueError, match="can_draft_tree"):
        DrafterSpec("x", ModelDrafter, lambda p, _: ModelDrafter(p.draft), tree_code="tree_block")
    # γ limits on a preset read from the shipped configs, equal to the loaded drafters'
    for name in DRAFTER_NAMES:
        cap = make_named_drafter(embedded_pair, name).max_gamma
        assert preset_max_gamma("embedded", name) == cap, name
    assert preset_max_gamma("embedded", "mtp") is not None
    assert preset_max_gamma("embedded", "block") is not None
    assert not DRAFTERS["eagle"].on_pair(tiny_pair) and DRAFTERS["ngram"].on_pair(tiny_pair)
