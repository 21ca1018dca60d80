"""The MTP heads: lossless greedy output on held-out prompts (chain γ 1 /
2 / 4, Medusa trees), the first tokens' distribution at T = 1 equal to the target's (χ²),
no target forward beyond one per round and no drafter state, ``propose_argmax`` ==
``propose`` at T = 0, the depth rule after an edit, a grammar, the error on a pair without
heads, the CLI and the training script on tiny models."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from conftest import HELDOUT_TOKENS, REPO, run_json
from scipy.stats import chi2

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import EMBEDDED_DIR
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.mtp import MtpDrafter
from specdec_core.drafters.mtp_heads import MtpConfig, MtpHeads, load_mtp_heads
from specdec_core.drafters.registry import (
    DRAFTER_NAMES,
    TREE_DRAFTERS,
    drafters_for,
    make_named_drafter,
)
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.generate import generate_tree

HEADS_DIR = EMBEDDED_DIR / "mtp"
NEW_TOKENS = HELDOUT_TOKENS  # the length of ``heldout_greedy``


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _alone(pair, prompt: str) -> list[int]:
    """The target alone's greedy ids (:data:`NEW_TOKENS` new tokens)."""
    config = SessionConfig(max_new_tokens=NEW_TOKENS)
    return generate(pair, prompt, config, mode="autoregressive").output_ids


def _mtp(pair) -> MtpDrafter:
    drafter = make_named_drafter(pair, "mtp")
    assert isinstance(drafter, MtpDrafter)
    return drafter


# ---------------------------------------------------------------- the shipped heads
def test_heads_files_safetensors_and_report():
    assert (HEADS_DIR / "model.safetensors").is_file() and (HEADS_DIR / "config.json").is_file()
    assert not list(HEADS_DIR.glob("*.bin")) and not list(HEADS_DIR.glob("*.pt"))
    report = json.loads((HEADS_DIR / "training_report.json").read_text())
    assert report["seed"] == 0 and 0 < report["seconds"] <= 20 * 60
    assert report["config"]["heads"] == 4 and report["weights_dtype"] == "float16"
    # 4 × (256² + 256) parameters, float16 (+ the safetensors header)
    assert report["parameters"] == 4 * (256 * 256 + 256)
    size = (HEADS_DIR / "model.safetensors").stat().st_size
    assert size == report["weights_bytes"] and 2 * report["parameters"] <= size < 2**20
    heads = report["per_head"]
    assert [h["head"] for h in heads] == [1, 2, 3, 4]
    # training moved every head beyond the identity it started from (the target's own row)
    for h in heads:
        assert h["target_mean_min_pq"] > h["identity_mean_min_pq"] + 0.02, h
    # further ahead is harder
    assert heads[0]["target_top1_agreement"] > heads[3]["target_top1_agreement"]
    assert (HEADS_DIR / "README.md").is_file()


def test_registry_and_shared_heads(embedded_pair, tiny_pair):
    assert DRAFTER_NAMES.index("mtp") == DRAFTER_NAMES.index("eagle") + 1
    assert "mtp" in TREE_DRAFTERS
    assert "mtp" in drafters_for(embedded_pair) and "mtp" not in drafters_for(tiny_pair)
    a, b = _mtp(embedded_pair), _mtp(embedded_pair)
    assert a.heads is b.heads is load_mtp_heads(embedded_pair)  # loaded once per process
    assert a.max_gamma == 4 and a.cached_ids() is None and a.rollback(3) == 0


def test_pair_without_heads_gives_a_clear_error(tiny_pair):
    with pytest.raises(ConfigError, match="has no MTP heads") as info:
        make_named_drafter(tiny_pair, "mtp")
    assert info.value.code == "mtp_missing"
    strings = json.loads((REPO / "assets/strings/common.json").read_text(encoding="utf-8"))
    entry = strings["err_mtp_missing"]
    assert "{pair}" in entry["en"] and "{pair}" in entry["zh"] and "MTP" in entry["zh"]


# ---------------------------------------------------------------- the depth rule
def test_propose_argmax_equals_propose_and_the_depth_rule(embedded_pair, heldout_prompts):
    """With the target's KV over ``ids[:-1]`` (as after a round), drafts are heads 1..K on
    the last hidden row; a context 2 ids longer (an edit) gets heads 3..4 only; a context
    the target has not run gets nothing."""
    greedy = SessionConfig(gamma=6).sampling
    lm_head = embedded_pair.target.get_output_embeddings()
    for prompt in heldout_prompts[:3]:
        ids = embedded_pair.tokenizer.encode(prompt)
        drafters = [_mtp(embedded_pair) for _ in range(2)]
        for d in drafters:
            d.attach(ModelCache(embedded_pair.target))
        assert drafters[0].propose_argmax(ids, 4) == ([], 0)  # no hidden state yet
        assert drafters[0].head_evaluations == 0
        for d in drafters:
            d.target.extend(ids[:-1])
        fast, forwards = drafters[0].propose_argmax(ids, 6)
        draft = drafters[1].propose(ids, 6, greedy, "probabilistic", torch.Generator())
        # γ' = K drafts, no model forward, one head evaluation per draft
        assert fast == draft.ids.tolist() and len(fast) == 4
        assert forwards == draft.forwards == 0
        assert drafters[0].head_evaluations == drafters[1].head_evaluations == 4
        assert torch.equal(draft.probs.sum(-1), torch.ones(4))  # one-hot rows at T = 0
        with torch.inference_mode():
            h = embedded_pair.target(
                torch.tensor([ids[:-1]]), output_hidden_states=True
            ).hidden_states[-1][0, -1]
            heads = drafters[0].heads
            expected = [int(lm_head(heads.block(k, h)).argmax()) for k in range(1, 5)]
        assert fast == expected
        edited, n = drafters[0].propose_argmax(ids + fast[:2], 4)
        assert (edited, n) == (fast[2:], 0) and drafters[0].head_evaluations == 6
        assert drafters[0].propose_argmax(ids, 2) == (fast[:2], 0)
        assert drafters[0].head_evaluations == 8


def test_confidence_stop_computes_only_the_rows_it_drafts(embedded_pair, heldout_prompts):
    """With a confidence stop the heads are evaluated one at a time: a proposal that the
    stop ends after y_1 counts 1 head evaluation, not K; without the stop all K rows are
    computed (in one batch) and all K drafted. Model forwards stay 0 either way."""
    ids = embedded_pair.tokenizer.encode(heldout_prompts[0])
    drafter = _mtp(embedded_pair)
    drafter.attach(ModelCache(embedded_pair.target))
    drafter.target.extend(ids[:-1])
    free, forwards = drafter.propose_argmax(ids, 4)
    assert len(free) == 4 and forwards == 0 and drafter.head_evaluations == 4
    stopped, forwards = drafter.propose_argmax(ids, 4, confidence=1.0)  # top prob < 1
    assert stopped == free[:1] and forwards == 0 and drafter.head_evaluations == 5
    config = SessionConfig(
        gamma=4, max_new_tokens=NEW_TOKENS, gamma_schedule="confidence", confidence=0.9999
    )
    drafter = _mtp(embedded_pair)
    run = generate(embedded_pair, heldout_prompts[0], config, drafter=drafter)
    drafted = sum(len(r.drafted) for r in run.records)
    assert drafted == len(run.records) - 1  # 1 per round but the first (no hidden state)
    assert drafter.head_evaluations == drafted and run.stats.draft_forwards == 0


def test_sampled_rows_are_the_heads_distributions(embedded_pair, heldout_prompts):
    """At T = 1 each q_i is softmax of head i's logits (not conditioned on y_<i)."""
    sampling = SessionConfig(temperature=1.0).sampling
    ids = embedded_pair.tokenizer.encode(heldout_prompts[0])
    drafter = _mtp(embedded_pair)
    drafter.attach(ModelCache(embedded_pair.target))
    drafter.target.extend(ids[:-1])
    draft = drafter.propose(ids, 3, sampling, "probabilistic", torch.Generator().manual_seed(0))
    h = drafter.target.hidden[-1]
    with torch.inference_mode():
        for i in range(3):
            q = torch.softmax(drafter.lm_head(drafter.heads.block(i + 1, h)).float(), -1)
            torch.testing.assert_close(draft.probs[i], q)


# ---------------------------------------------------------------- lossless, greedy
def test_greedy_few_prompts_chain_and_tree(embedded_pair, heldout_prompts):
    """The quick check: 3 prompts, γ = 4 and a "2,2,1" tree; the first round drafts
    nothing (no hidden state yet); target forwards == rounds (no extra forward)."""
    for i in (0, 11, 23):
        drafter = _mtp(embedded_pair)
        config = SessionConfig(gamma=4, max_new_tokens=NEW_TOKENS)
        run = generate(embedded_pair, heldout_prompts[i], config, drafter=drafter)
        expected = _alone(embedded_pair, heldout_prompts[i])
        assert run.output_ids == expected
        assert run.records[0].drafted == () and len(run.records[1].drafted) == 4
        assert run.stats.target_forwards == run.stats.rounds == len(run.records)
        assert drafter.forwards == run.stats.draft_forwards == 0  # no model forward
        assert drafter.head_evaluations == sum(len(r.drafted) for r in run.records)
        tree = generate_tree(embedded_pair, heldout_prompts[i], config, (2, 2, 1), drafter="mtp")
        assert tree.output_ids == expected


@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_greedy_equals_target_on_heldout_prompts(
    embedded_pair, heldout_prompts, heldout_greedy, gamma
):
    config = SessionConfig(gamma=gamma, max_new_tokens=NEW_TOKENS)
    accepted = 0
    for prompt, expected in zip(heldout_prompts, heldout_greedy, strict=True):
        drafter = _mtp(embedded_pair)
        run = generate(embedded_pair, prompt, config, drafter=drafter)
        assert run.output_ids == expected, prompt
        assert run.stats.target_forwards == run.stats.rounds == len(run.records)
        assert drafter.cached_ids() is None
        assert all(len(r.drafted) <= min(gamma, 4) for r in run.records)
        accepted += sum(r.accepted for r in run.records)
    assert accepted > 0


@pytest.mark.parametrize("shape", [(2, 2, 1), (3, 1)])
def test_greedy_tree_equals_target_on_heldout_prompts(
    embedded_pair, heldout_prompts, heldout_greedy, shape
):
    config = SessionConfig(max_new_tokens=NEW_TOKENS)
    accepted = 0
    for prompt, expected in zip(heldout_prompts, heldout_greedy, strict=True):
        run = generate_tree(embedded_pair, prompt, config, shape, drafter="mtp")
        assert run.output_ids == expected, (prompt, shape)
        accepted += sum(r.accepted for r in run.records)
    assert accepted > 0


def test_greedy_with_a_grammar(embedded_pair):
    grammar = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
    for prompt in ("ROMEO:\nBut soft", "KING:\nWe"):
        config = SessionConfig(gamma=4, max_new_tokens=12, grammar=grammar)
        alone = generate(embedded_pair, prompt, config, mode="autoregressive")
        plain = generate(embedded_pair, prompt, SessionConfig(max_new_tokens=12), "autoregressive")
        assert alone.output_ids != plain.output_ids  # the grammar changes the output
        run = generate(embedded_pair, prompt, config, drafter=_mtp(embedded_pair))
        assert run.output_ids == alone.output_ids, prompt
        tree = generate_tree(embedded_pair, prompt, config, (2, 2, 1), drafter="mtp")
        assert tree.output_ids == alone.output_ids, prompt


def test_step_machine_with_an_edit(embedded_pair, heldout_prompts):
    for i in (0, 7):
        config = SessionConfig(gamma=4, max_new_tokens=NEW_TOKENS)
        session = SpeculativeSession(embedded_pair, heldout_prompts[i], config, _mtp(embedded_pair))
        rounds = edits = 0
        while session.phase == "propose":
            session.propose()
            if rounds >= 1 and len(session.steps.drafts) >= 2 and not edits:  # a student edits
                wrong = session.steps.target_preview(top_n=2)[1][1].id
                edit = session.steps.edit_draft(2, wrong)
                assert edit.reproposed and edit.drafted[1].id == wrong
                # re-proposed: depth 2 → heads 3 and 4 only, from the same hidden row
                again = _mtp(embedded_pair)
                again.attach(session.target)
                assert (
                    again.propose_argmax(session.ids + session.steps.drafts[:2], 4)[0]
                    == (session.steps.drafts[2:])
                )
                assert len(session.steps.drafts) == 4
                edits += 1
            session.verify()
            session.commit()
            rounds += 1
        assert edits == 1
        assert session.generated_ids == _alone(embedded_pair, heldout_prompts[i])
        assert session.target.forwards == rounds


def test_cli_json_with_mtp(capsys, embedded_pair):
    common = ("--pair", "embedded", "--prompt", "ROMEO:\nBut soft", "--max-new-tokens", "16")
    out = run_json(capsys, "run", *common, "--drafter", "mtp", "--json")
    ar = run_json(capsys, "run", *common, "--mode", "autoregressive", "--json")
    assert out["output_ids"] == ar["output_ids"] and out["text"] == ar["text"]
    assert out["stats"]["target_forwards"] == out["stats"]["rounds"]
    assert out["stats"]["acceptance_rate"] > 0.0
    assert out["rounds"][0]["drafted"] == []
    # the heads run no model forward (their head evaluations are not draft forwards)
    assert sum(len(r["drafted"]) for r in out["rounds"]) > 0
    assert out["stats"]["draft_forwards"] == 0


def test_verify_curve_times_the_mtp_draft_step(embedded_pair):
    """The speed page's cost model: the draft step of the heads is their own evaluation
    time per drafted token (no model cache of their own), measured, not zero."""
    from specdec_core.bench.curve import measure_forward_curve

    curve = measure_forward_curve(embedded_pair, "ROMEO:\nBut soft, what light", 3, 2, "mtp")
    assert len(curve.target_ms) == 3 and curve.draft_step_ms > 0


# ---------------------------------------------------------------- lossless, sampled
N_SAMPLES = 600
MIN_P = 5 / N_SAMPLES
CHI2_PROMPT = "KING:\nWe"


@torch.inference_mode()
def _exact_first(
    pair, prompt_ids: list[int], n: int, sampling: SamplingConfig, stale_last: bool = False
) -> dict[tuple[int, ...], float]:
    """Exact ``P(t_1..t_n)`` of the target alone with ``sampling`` for every outcome with
    probability ≥ :data:`MIN_P` (an end-of-text ends the outcome early), level by level
    (a prefix under MIN_P has no extension over it); one batched forward per level.
    ``stale_last``: the wrong hypothesis, token ``n`` drawn from the row *before* token
    ``n − 1`` (what emitting a q that ignores ``y_<i`` without the rule would give)."""
    eos = pair.eos_token_id
    done: dict[tuple[int, ...], float] = {}
    frontier: dict[tuple[int, ...], float] = {(): 1.0}
    rows: dict[tuple[int, ...], torch.Tensor] = {}
    for level in range(n):
        keys = list(frontier)
        batch = torch.tensor([prompt_ids + list(k) for k in keys])
        logits = pair.target(batch).logits[:, -1].float()
        for j, k in enumerate(keys):
            rows[k] = logits_to_probs(logits[j], sampling)
        nxt: dict[tuple[int, ...], float] = {}
        for k in keys:
            row = rows[k[:-1]] if stale_last and level == n - 1 else rows[k]
            joint = frontier[k] * row
            for t in (joint >= MIN_P).nonzero().flatten().tolist():
                (done if t == eos else nxt)[(*k, t)] = float(joint[t])
        frontier = nxt
    return {**done, **frontier}


def _chi2_p(counts: Counter, probs: dict, n: int) -> float:
    """Pearson χ² p-value of ``counts`` against ``probs`` (bins fixed before sampling; the
    rest one "other" cell)."""
    cells = [(probs[k] * n, counts.get(k, 0)) for k in probs]
    cells.append((n - sum(e for e, _ in cells), n - sum(o for _, o in cells)))
    cells = [(e, o) for e, o in cells if e > 1e-9]
    stat = sum((o - e) ** 2 / e for e, o in cells)
    return float(chi2.sf(stat, len(cells) - 1))


def test_chi2_first_tokens_at_temperature_one(embedded_pair):
    """T = 1 with top-k 3 (the first three tokens have at most 27 outcomes, well filled
    by 600 runs), γ = 2, 4 new tokens: round 1 is the plain target step (token 1), round 2
    drafts tokens 2 and 3 with heads 1 and 2 (q rows that ignore y_<i). The first three
    tokens follow the target's exact joint distribution (χ² over 600 seeds), while the
    wrong hypothesis (token 3 drawn from the target's row before token 2, i.e. ignoring
    y_<i without the rule) is rejected."""
    pair = embedded_pair
    ids = pair.tokenizer.encode(CHI2_PROMPT)
    sampling = SessionConfig(temperature=1.0, top_k=3).sampling
    exact = _exact_first(pair, ids, 3, sampling)
    counts: Counter = Counter()
    drafted = accepted = 0
    for seed in range(N_SAMPLES):
        config = SessionConfig(gamma=2, max_new_tokens=4, temperature=1.0, top_k=3, seed=seed)
        run = generate(pair, CHI2_PROMPT, config, drafter=_mtp(pair))
        out = run.output_ids[:3]
        if pair.eos_token_id in out:
            out = out[: out.index(pair.eos_token_id) + 1]
        counts[tuple(out)] += 1
        drafted += sum(len(r.drafted) for r in run.records)
        accepted += sum(r.accepted for r in run.records)
    assert drafted > N_SAMPLES and 0.1 * drafted < accepted < drafted  # real verdicts ran
    assert len(exact) >= 5
    assert _chi2_p(counts, exact, N_SAMPLES) > 1e-3
    stale = _exact_first(pair, ids, 3, sampling, stale_last=True)
    assert _chi2_p(counts, stale, N_SAMPLES) < 1e-6


# ---------------------------------------------------------------- the training script
def test_training_script_on_tiny_models(tmp_path, tiny_dirs, tiny_pair, tiny_corpus, tiny_lossless):
    from specdec_core.training.mtp import main

    out = tmp_path / "mtp"
    args = ["--corpus", str(tiny_corpus), "--target", str(tiny_dirs["target"]), "--out", str(out)]
    args += ["--context", "32", "--batch", "4", "--max-steps", "3", "--threads", "1"]
    report = main(args)
    assert report["steps"] == 3 and report["parameters"] == 4 * (32 * 32 + 32)
    assert json.loads((out / "training_report.json").read_text()) == report
    assert [h["head"] for h in report["per_head"]] == [1, 2, 3, 4]
    heads = MtpHeads.load(out)
    assert heads.config == MtpConfig.for_target(tiny_pair.target.config)
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in heads.parameters())
    assert any(float(p.abs().sum()) > 0 for p in heads.parameters())  # it trained
    run = tiny_lossless(MtpDrafter(heads, tiny_pair.target))
    assert run.stats.target_forwards == run.stats.rounds
