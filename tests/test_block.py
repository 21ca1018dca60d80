"""The parallel block drafter (PARD-style): shipped weights and card, lossless
greedy output on held-out prompts at γ 1 / 4 / 8, exact sampling at T = 1 (χ² against the
target alone; the block's own proposal distribution is rejected by the same counts),
``propose_argmax`` = ``propose`` at T = 0, one draft forward per round whatever γ, a
drafter cache of committed ids only after every step, the tree refusal (engine and CLI),
the error on a pair without a block drafter, a grammar preset, and the training script on
tiny models."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from conftest import HELDOUT_TOKENS
from scipy.stats import chi2
from transformers import AutoModelForCausalLM

from specdec_core.__main__ import main as cli
from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec
from specdec_core.core.models import EMBEDDED_DIR
from specdec_core.core.sampling import SamplingConfig
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.block import BlockDrafter, has_block_drafter, make_block_drafter
from specdec_core.drafters.registry import (
    DRAFTER_NAMES,
    TREE_DRAFTERS,
    drafters_for,
    make_named_drafter,
)
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.generate import generate_tree, tree_refusal

BLOCK_DIR = EMBEDDED_DIR / "block"
N_SAMPLES = 600


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------------ weights, card
def test_shipped_weights_config_and_report():
    assert (BLOCK_DIR / "model.safetensors").is_file()
    assert not list(BLOCK_DIR.glob("*.bin")) and not list(BLOCK_DIR.glob("*.pt"))
    assert (BLOCK_DIR / "model.safetensors").stat().st_size < 4 * 2**20
    config = json.loads((BLOCK_DIR / "config.json").read_text())
    assert config["vocab_size"] == 4097 and config["block_mask_token_id"] == 4096
    assert config["block_size"] == 8 and config["dtype"] == "float16"
    model = AutoModelForCausalLM.from_pretrained(BLOCK_DIR, use_safetensors=True)
    assert model.config.vocab_size == 4097
    report = json.loads((BLOCK_DIR / "training_report.json").read_text())
    assert report["seed"] == 0 and 0 < report["seconds"] <= 20 * 60 and report["steps"] > 100
    assert report["block_size"] == 8 and report["mask_token_id"] == 4096
    block = report["block_top1_agreement_by_offset"]
    overlap = report["block_mean_min_pq_by_offset"]
    # the first row beats the draft model it started from; the mask rows learned something
    assert len(block) == 8 and block[0] > report["draft_top1_agreement_by_offset"][0] > 0.6
    assert block[1] > 0.15 and min(overlap[1:]) > 0.3
    for key in ("block_gamma4", "block_gamma8"):
        run = report["greedy_acceptance"][key]
        assert run["equals_target_alone"] and run["draft_forwards_per_round"] <= 1.0
        assert run["mean_accepted_per_round"] > 0.5
    card = (BLOCK_DIR / "README.md").read_text()
    assert "PARD" in card and str(report["steps"]) in card


def test_registry_lists_block_only_with_its_folder(embedded_pair, tiny_pair):
    assert "block" in DRAFTER_NAMES and "block" not in TREE_DRAFTERS
    assert DRAFTER_NAMES.index("block") > DRAFTER_NAMES.index("eagle")
    assert has_block_drafter(embedded_pair) and not has_block_drafter(tiny_pair)
    assert "block" in drafters_for(embedded_pair) and "block" not in drafters_for(tiny_pair)
    with pytest.raises(ConfigError, match="has no block drafter") as info:
        make_named_drafter(tiny_pair, "block")
    assert info.value.code == "block_missing"
    a, b = (make_named_drafter(embedded_pair, "block") for _ in range(2))
    assert isinstance(a, BlockDrafter) and a.kv.model is b.kv.model and a.kv is not b.kv
    assert a.max_gamma == 8 and a.vocab_size == embedded_pair.vocab_size == a.mask_id
    assert not a.can_draft_tree and a.tree_logits([1, 2]) is None


# ---------------------------------------------------------------------------- contract
def test_propose_argmax_equals_propose_one_forward(embedded_pair, heldout_prompts):
    """T = 0: the same ids from both paths, one forward each whatever γ, every row
    ``[V]`` one-hot on its id, and the cache back to the context (no mask inside)."""
    sampling = SamplingConfig(temperature=0.0)
    for prompt in heldout_prompts[:6]:
        ctx = embedded_pair.tokenizer.encode(prompt)
        for gamma in (1, 3, 8):
            fast, slow = (make_named_drafter(embedded_pair, "block") for _ in range(2))
            ids, forwards = fast.propose_argmax(ctx, gamma)
            draft = slow.propose(ctx, gamma, sampling, "probabilistic", torch.Generator())
            assert ids == draft.ids.tolist() and len(ids) == gamma
            assert forwards == draft.forwards == 1
            assert draft.probs.shape == (gamma, embedded_pair.vocab_size)
            assert draft.probs.argmax(-1).tolist() == ids and draft.probs.sum(-1).eq(1).all()
            assert fast.cached_ids() == slow.cached_ids() == ctx
            assert 4096 not in ids
    # a second proposal after more context catches up in the same single forward
    drafter = make_named_drafter(embedded_pair, "block")
    ctx = embedded_pair.tokenizer.encode(heldout_prompts[0])
    first, _ = drafter.propose_argmax(ctx, 4)
    longer = ctx + first[:2]
    ids, forwards = drafter.propose_argmax(longer, 4)
    assert forwards == 1 and drafter.cached_ids() == longer
    assert ids == make_named_drafter(embedded_pair, "block").propose_argmax(longer, 4)[0]


def test_rows_are_the_block_models_own_logits(embedded_pair):
    """``q`` at T = 1 is softmax of the model's rows at the last committed position and at
    each mask, sliced to ``V`` (a fresh forward without cache)."""
    drafter = make_named_drafter(embedded_pair, "block")
    ctx = embedded_pair.tokenizer.encode("KING:\nWe")
    draft = drafter.propose(
        ctx, 5, SamplingConfig(temperature=1.0), "probabilistic", torch.Generator().manual_seed(3)
    )
    with torch.inference_mode():
        logits = drafter.kv.model(input_ids=torch.tensor([ctx + [4096] * 4])).logits[0]
    expected = torch.softmax(logits[len(ctx) - 1 :, :4096].float(), -1)
    torch.testing.assert_close(draft.probs, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_one_forward_per_round_and_a_committed_cache(embedded_pair, heldout_prompts, gamma):
    """The step machine: every proposal that drafts runs exactly one draft forward; after
    such a propose the drafter's cache (and the KV table's draft column) holds exactly the
    committed ids, never a mask or a draft; after commit it is a prefix of them."""
    for temperature in (0.0, 1.0):
        config = SessionConfig(gamma=gamma, max_new_tokens=14, temperature=temperature, seed=5)
        session = SpeculativeSession(
            embedded_pair, heldout_prompts[3], config, make_named_drafter(embedded_pair, "block")
        )
        rounds = 0
        while session.phase == "propose":
            committed = list(session.ids)
            proposed = session.propose()
            drafter = session.drafter
            if not proposed.drafted:  # a last round with γ = 0 (budget reached): no forward
                assert proposed.draft_forwards == 0 and rounds > 0
                cached = drafter.cached_ids()
                assert cached == committed[: len(cached)]
            else:
                assert proposed.draft_forwards == 1 and drafter.cached_ids() == committed
                kv = proposed.kv_after
                assert kv.draft_kv_len == len(committed)
                assert [r.draft_kv for r in kv.rows] == [r.committed for r in kv.rows]
            session.verify()
            session.commit()
            cached = drafter.cached_ids()
            assert cached == session.ids[: len(cached)] and 4096 not in cached
            rounds += 1
        assert rounds >= 2


# ---------------------------------------------------------------------------- lossless
@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_greedy_equals_target_on_heldout_prompts(
    embedded_pair, heldout_prompts, heldout_greedy, gamma
):
    config = SessionConfig(gamma=gamma, max_new_tokens=HELDOUT_TOKENS)
    accepted = 0
    for prompt, expected in zip(heldout_prompts, heldout_greedy, strict=True):
        run = generate(
            embedded_pair, prompt, config, drafter=make_named_drafter(embedded_pair, "block")
        )
        assert run.output_ids == expected, prompt
        drafting = [r for r in run.records if r.drafted]
        assert run.stats.draft_forwards == len(drafting)  # one per round, whatever γ
        assert all(len(r.drafted) <= gamma for r in run.records)
        accepted += sum(r.accepted for r in run.records)
    assert accepted > 0


def test_greedy_with_a_grammar_preset(embedded_pair):
    speaker = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
    for prompt in ("KING:\nWe", "ROMEO:\nBut soft"):
        for gamma in (4, 8):
            config = SessionConfig(gamma=gamma, max_new_tokens=12, grammar=speaker)
            alone = generate(embedded_pair, prompt, config, mode="autoregressive").output_ids
            run = generate(
                embedded_pair, prompt, config, drafter=make_named_drafter(embedded_pair, "block")
            )
            assert run.output_ids == alone
            assert run.stats.draft_forwards == sum(1 for r in run.records if r.drafted)


def _chi2_p(counts: Counter, probs: dict, n: int) -> float:
    """Pearson χ² p-value of ``counts`` against ``probs`` over its outcomes expected ≥ 5
    times; the rest (and everything unlisted) pooled in one cell."""
    keys = [k for k in probs if probs[k] * n >= 5]
    cells = [(probs[k] * n, counts.get(k, 0)) for k in keys]
    cells.append((max(0.0, n - sum(e for e, _ in cells)), n - sum(o for _, o in cells)))
    if any(e <= 1e-9 and o > 0 for e, o in cells):
        return 0.0  # outcomes the hypothesis gives no mass
    cells = [(e, o) for e, o in cells if e > 1e-9]
    stat = sum((o - e) ** 2 / e for e, o in cells)
    return float(chi2.sf(stat, len(cells) - 1))


@torch.inference_mode()
def test_chi2_first_two_tokens_follow_the_target(embedded_pair):
    """T = 1, γ = 4: the first two generated tokens of speculative decoding with the block
    drafter, one run per seed 0..599, follow the target alone's exact ``P(t1, t2)`` and its
    second-token marginal (p > 1e-3); the block's own second row ``q_2`` (what an
    accept-everything bug would give the second token) is rejected by the same counts
    (p < 1e-6)."""
    pair = embedded_pair
    prompt = "KING:\nWe"
    ids = pair.tokenizer.encode(prompt)
    p1 = torch.softmax(pair.target(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
    firsts = (p1 >= 1e-3).nonzero().flatten().tolist()
    second = pair.target(input_ids=torch.tensor([ids + [t] for t in firsts])).logits[:, -1]
    exact: dict[tuple[int, int], float] = {}
    marginal = torch.zeros_like(p1)  # P(t2), summed over the listed t1 (a lower bound)
    for j, t1 in enumerate(firsts):
        joint = p1[t1] * torch.softmax(second[j].float(), -1)
        marginal += joint
        for t2 in (joint >= 1e-4).nonzero().flatten().tolist():
            exact[(t1, t2)] = float(joint[t2])
    q = make_named_drafter(pair, "block").propose(
        ids, 2, SamplingConfig(temperature=1.0), "probabilistic", torch.Generator()
    )
    exact_2 = {(t,): float(marginal[t]) for t in (marginal >= 1e-4).nonzero().flatten().tolist()}
    block_2 = {
        (t,): float(q.probs[1, t]) for t in (q.probs[1] >= 1e-4).nonzero().flatten().tolist()
    }
    tv = 0.5 * float((marginal - q.probs[1]).abs().sum())
    assert tv > 0.2  # the two hypotheses differ: the test can tell them apart
    counts: Counter = Counter()
    for seed in range(N_SAMPLES):
        config = SessionConfig(gamma=4, max_new_tokens=3, temperature=1.0, seed=seed)
        run = generate(pair, prompt, config, drafter=make_named_drafter(pair, "block"))
        counts[tuple(run.output_ids[:2])] += 1
    seconds = Counter()
    for key, n in counts.items():
        seconds[key[1:2]] += n
    assert _chi2_p(counts, exact, N_SAMPLES) > 1e-3
    assert _chi2_p(seconds, exact_2, N_SAMPLES) > 1e-3
    assert _chi2_p(seconds, block_2, N_SAMPLES) < 1e-6


# ------------------------------------------------------------------------------- refusals
def test_tree_is_refused_with_its_own_code(embedded_pair):
    assert tree_refusal("block", "probabilistic", 0.0) == "tree_block"
    assert tree_refusal(make_named_drafter(embedded_pair, "block"), "greedy", 0.0) == "tree_block"
    assert tree_refusal("ngram", "probabilistic", 0.0) == "tree_no_ngram"
    with pytest.raises(ConfigError, match="cannot draft a tree") as info:
        generate_tree(embedded_pair, "KING:\nWe", SessionConfig(), (2, 1), drafter="block")
    assert info.value.code == "tree_block"


def test_cli_block_chain_and_tree_refusal(capsys, embedded_pair):
    args = ["run", "--pair", "embedded", "--prompt", "KING:\nWe", "--max-new-tokens", "10"]
    assert cli([*args, "--drafter", "block", "--gamma", "6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    alone = generate(embedded_pair, "KING:\nWe", SessionConfig(max_new_tokens=10), "autoregressive")
    assert out["output_ids"] == alone.output_ids
    assert all(len(r["drafted"]) <= 6 for r in out["rounds"])
    assert cli([*args, "--drafter", "block", "--tree", "2,1", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "cannot draft a tree" in err and "\n" not in err
    # its own reason (one path per forward), not prompt lookup's "without probabilities"
    assert "one path per forward" in err and "without probabilities" not in err


def test_loading_the_block_drafter_prints_no_progress_bar(capfd, embedded_pair):
    """The block model loads quietly, as the pair does (``quiet_transformers``): a fresh
    load writes no "Loading weights" bar to stderr (a CLI error stays one line)."""
    from specdec_core.drafters import block

    block._MODELS.clear()  # force a real load in this process
    make_named_drafter(embedded_pair, "block")
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err and "it/s" not in captured.err


# ------------------------------------------------------------------------------- training
def test_training_script_on_tiny_models(tmp_path, tiny_dirs, tiny_pair, tiny_corpus, tiny_lossless):
    from specdec_core.training.block import main

    out = tmp_path / "block"
    report = main(
        [
            "--corpus", str(tiny_corpus),
            "--target", str(tiny_dirs["target"]),
            "--draft", str(tiny_dirs["draft"]),
            "--out", str(out),
            "--context", "16",
            "--block", "4",
            "--cuts", "3",
            "--batch", "2",
            "--max-steps", "3",
            "--threads", "1",
            "--accept-prompts", "2",
            "--accept-tokens", "6",
        ]
    )  # fmt: skip
    assert report["steps"] == 3 and report["block_size"] == 4
    assert json.loads((out / "training_report.json").read_text()) == report
    assert len(report["block_top1_agreement_by_offset"]) == 4
    assert report["greedy_acceptance"]["block_gamma4"]["equals_target_alone"]
    vocab = tiny_pair.vocab_size
    model = AutoModelForCausalLM.from_pretrained(out, use_safetensors=True).eval()
    assert model.config.vocab_size == vocab + 1 and model.config.block_mask_token_id == vocab
    tiny_lossless(BlockDrafter(model, vocab, 4))
    with pytest.raises(ValueError, match="not the last"):
        BlockDrafter(model, vocab - 1, 4)


def test_make_block_drafter_checks_the_vocabulary(embedded_pair):
    drafter = make_block_drafter(embedded_pair)
    assert drafter.mask_id == embedded_pair.vocab_size
