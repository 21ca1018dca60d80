"""The benchmark, the batched baseline and the fast path's bookkeeping. Values are checked
for consistency (contract keys, sums, equalities), never for speed: timings on a shared
CPU are printed by ``benchmarks/bench_pairs.py``, not asserted."""

from __future__ import annotations

import json

import pytest
import torch

from specdec_core.__main__ import main
from specdec_core.bench.batching import generate_batch, left_pad
from specdec_core.bench.results import BatchPoint
from specdec_core.bench.runs import hf_generate, ignoring_eos
from specdec_core.bench.summary import summarize
from specdec_core.bench.sweeps import (
    batch_crossover,
    batch_sweep_point,
    best_point,
    gamma_sweep_point,
)
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import conditional_acceptance
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.rules.costmodel import (
    best_gamma,
    expected_tokens_given_position_rates,
    per_token_cost_ms,
    walltime_improvement,
)

PROMPT = "First Citizen:\nWe are"
PROMPTS = ["First Citizen:\nWe are", "ROMEO:\nBut soft", "KING:\nO", "Speak, speak."]


def test_bench_cli_json_contract_on_embedded_pair(capsys, embedded_pair):
    assert (
        main(["bench", "--pair", "embedded", "--max-new-tokens", "8", "--repeats", "1", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    # docs/ARCHITECTURE.md: autoregressive {tokens_per_s, ms_per_token}, speculative
    # {..., mean_accepted}, speedup, device, pair and, where it runs, hf_assisted
    assert {"autoregressive", "speculative", "speedup", "device", "pair"} <= out.keys()
    assert {"tokens_per_s", "ms_per_token"} <= out["autoregressive"].keys()
    assert {"tokens_per_s", "ms_per_token", "mean_accepted"} <= out["speculative"].keys()
    assert out["pair"] == "embedded" and out["device"] == "CPU"
    ar, sp, cm = out["autoregressive"], out["speculative"], out["cost_model"]
    assert ar["new_tokens"] == sp["new_tokens"] == 8  # EOS ignored: exactly the budget
    assert out["speedup"] > 0 and ar["tokens_per_s"] > 0 and sp["tokens_per_s"] > 0
    assert out["speedup"] == pytest.approx(sp["tokens_per_s"] / ar["tokens_per_s"])
    assert ar["ms_per_token"] == pytest.approx(1e3 / ar["tokens_per_s"])
    assert 0.0 <= sp["acceptance_rate"] <= 1.0 and 0.0 <= sp["mean_accepted"] <= out["gamma"]
    assert 0.0 <= cm["alpha"] <= 1.0 and cm["c"] > 0 and cm["forward_time_speedup"] > 0
    assert sum(sp["accepted_histogram"]) == sp["rounds"] == sp["target_forwards"]
    assert out["greedy_equal"] is True
    hf = out["hf_assisted"]  # transformers' assisted generation runs here
    assert hf["tokens_per_s"] > 0 and hf["equal_to_target"] is True
    assert 0.0 <= hf["mean_accepted"] <= out["gamma"]


# The ``bench --json`` object's keys, in order, nested (docs/ARCHITECTURE.md): pinned so a
# change of the result types underneath cannot change what the CLI prints.
BENCH_JSON_KEYS = {
    "pair": None,
    "device": None,
    "threads": None,
    "max_new_tokens": None,
    "temperature": None,
    "repeats": None,
    "drafter": None,
    "ignore_eos": None,
    "gamma": None,
    "autoregressive": {
        k: None
        for k in (
            "tokens_per_s",
            "ms_per_token",
            "ttft_ms",
            "new_tokens",
            "target_forwards",
            "target_step_ms",
            "overhead_ms_per_token",
        )
    },
    "speculative": {
        k: None
        for k in (
            "tokens_per_s",
            "ms_per_token",
            "ttft_ms",
            "new_tokens",
            "rounds",
            "target_forwards",
            "draft_forwards",
            "mean_accepted",
            "acceptance_rate",
            "accepted_histogram",
            "per_position_acceptance",
            "draft_ms_per_round",
            "verify_ms_per_round",
            "overhead_ms_per_round",
            "round_ms",
            "draft_forward_ms_per_round",
            "verify_forward_ms_per_round",
            "non_forward_ms_per_round",
            "non_forward_pct",
            "drafts_per_round",
        )
    },
    "speedup": None,
    "cost_model": {
        k: None
        for k in (
            "alpha",
            "c",
            "target_step_ms",
            "draft_step_ms",
            "verify_ms",
            "verify_over_target_step",
            "overhead_ms",
            "conditional_acceptance",
            "expected_tokens_per_round",
            "measured_tokens_per_round",
            "leviathan_speedup",
            "forward_time_speedup",
            "forward_time_speedup_measured_advance",
            "predicted_speedup",
            "verify_ms_from_curve",
            "best_gamma",
        )
    },
    "breakdown": {
        "tokens_per_round": None,
        "round": {"draft": None, "verify": None, "overhead": None},
        "target_only": {"target": None, "overhead": None},
        "shares_pct": {"draft": None, "verify": None, "overhead": None},
    },
    "greedy_equal": None,
    "timing": {  # the spreads, how measured, the "too busy" verdict
        "source": None,
        "busy": None,
        "reasons": None,
        "run_target_step_ms": None,
        **{
            k: {f: None for f in ("median", "low", "high", "q1", "q3", "n")}
            for k in ("target_step", "draft_step", "ar_ms_per_token", "sp_ms_per_token")
        },
        **{
            k: {f: None for f in ("at", "repeats", "warmup", "tokens", "load", "cpus")}
            for k in ("runs_how", "curve_how")
        },
    },
    "forward_ms_by_tokens": {str(k): None for k in range(1, 2 * 4 + 2)},  # k = 1 … 2γ + 1
    "draft_step_ms": None,
    "hf_greedy": {
        k: None
        for k in (
            "tokens_per_s",
            "ms_per_token",
            "new_tokens",
            "target_forwards",
            "speedup",
            "equal_to_target",
        )
    },
    "hf_assisted": {
        k: None
        for k in (
            "tokens_per_s",
            "ms_per_token",
            "new_tokens",
            "target_forwards",
            "speedup",
            "equal_to_target",
            "mean_accepted",
            "speedup_over_hf_greedy",
        )
    },
}


def key_tree(value):
    """The ordered key structure of a JSON value (leaves: ``None``)."""
    if isinstance(value, dict):
        return {k: key_tree(v) for k, v in value.items()}
    return None


def test_bench_cli_json_keys_are_pinned(capsys, embedded_pair):
    assert (
        main(["bench", "--pair", "embedded", "--max-new-tokens", "8", "--repeats", "1", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert list(key_tree(out).items()) == list(BENCH_JSON_KEYS.items())
    for block in ("autoregressive", "speculative", "cost_model", "hf_greedy", "hf_assisted"):
        assert list(out[block]) == list(BENCH_JSON_KEYS[block])  # same order inside
    types = {k: type(v) for k, v in out.items() if not isinstance(v, dict)}
    assert types == {
        "pair": str,
        "device": str,
        "threads": int,
        "max_new_tokens": int,
        "temperature": float,
        "repeats": int,
        "drafter": str,
        "ignore_eos": bool,
        "gamma": int,
        "speedup": float,
        "greedy_equal": bool,
        "draft_step_ms": float,
    }
    assert all(isinstance(ms, float) and ms > 0 for ms in out["forward_ms_by_tokens"].values())
    assert out["draft_step_ms"] > 0 and isinstance(out["cost_model"]["best_gamma"], int)
    sp = out["speculative"]
    assert isinstance(sp["accepted_histogram"], list) and isinstance(sp["rounds"], int)
    assert isinstance(sp["per_position_acceptance"], list)
    # sampled, without HF: no greedy check and no HF blocks
    assert (
        main(
            [
                "bench",
                "--pair",
                "embedded",
                "--max-new-tokens",
                "4",
                "--repeats",
                "1",
                "--temperature",
                "0.8",
                "--no-hf",
                "--json",
            ]
        )
        == 0
    )
    sampled = json.loads(capsys.readouterr().out)
    expected = {
        k: v
        for k, v in BENCH_JSON_KEYS.items()
        if k not in ("greedy_equal", "hf_greedy", "hf_assisted")
    }
    assert sampled["speculative"]["drafts_per_round"] <= 4
    assert key_tree(sampled) == expected and list(sampled) == list(expected)


def test_summary_is_consistent(tiny_pair):
    config = SessionConfig(gamma=3, max_new_tokens=24)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative")
    s = summarize(ar, sp, 3)
    rounds = sp.stats.rounds
    assert s.greedy_equal and s.speculative.new_tokens == 24
    # the round splits exactly into draft forwards + verify forward + everything else
    bd = s.breakdown
    assert bd.round.draft + bd.round.verify + bd.round.overhead == pytest.approx(
        sp.stats.total_ms / rounds
    )
    sh = bd.shares_pct
    assert sh.draft + sh.verify + sh.overhead == pytest.approx(100.0)
    assert bd.tokens_per_round == pytest.approx(24 / rounds)
    cm = s.cost_model
    # steady steps: after the first forward, which runs over the prompt
    steady = (ar.stats.target_forward_ms - ar.stats.prefill_ms) / 23
    assert cm.target_step_ms == pytest.approx(steady)
    assert cm.verify_ms == pytest.approx(
        (sp.stats.target_forward_ms - sp.stats.prefill_ms) / (rounds - 1)
    )
    assert cm.leviathan_speedup == pytest.approx(walltime_improvement(cm.alpha, 3, cm.c))
    drafts = [len(r.drafted) for r in sp.records]
    assert s.speculative.drafts_per_round == pytest.approx(sum(drafts) / rounds)
    # per-position rates α_n from the run's records (greedy: the share accepted given the
    # accepted prefix), each round's own draft count
    rates = conditional_acceptance(sp.records)
    assert cm.conditional_acceptance == rates
    assert rates and cm.expected_tokens_per_round == pytest.approx(
        expected_tokens_given_position_rates(rates, drafts)
    )
    draft_round = sp.stats.draft_forward_ms / rounds
    assert cm.forward_time_speedup == pytest.approx(
        cm.target_step_ms
        / per_token_cost_ms(draft_round, cm.verify_ms, 0.0, cm.expected_tokens_per_round)
    )
    # without a curve the verification is the run's own; the prediction compares both
    # lanes' measured cost per token (forwards + overhead)
    # (after the first forward, which runs over the prompt and is counted once)
    a, sps = ar.stats, sp.stats
    assert 0 < a.prefill_ms < a.target_forward_ms and 0 < sps.prefill_ms < sps.target_forward_ms
    steady_verify = cm.verify_ms
    assert cm.verify_ms_from_curve == pytest.approx(steady_verify)
    assert cm.best_gamma == best_gamma(cm.alpha, cm.c)
    runs = 24 / cm.expected_tokens_per_round
    predicted_ms = a.prefill_ms + runs * (draft_round + cm.overhead_ms) + (runs - 1) * steady_verify
    assert cm.predicted_speedup == pytest.approx(a.total_ms / predicted_ms)
    # α and the acceptance figures are GenerationStats' (records.summarize), not recomputed
    assert s.speculative.acceptance_rate == sp.stats.acceptance_rate
    assert list(s.speculative.accepted_histogram) == list(sp.stats.accepted_histogram)
    point = gamma_sweep_point(ar, sp, 3)
    assert point.speedup == pytest.approx(s.speedup) and point.greedy_equal
    # the JSON form is derived from the dataclasses, nested in field order
    js = json.loads(json.dumps(s.to_json()))
    assert js["breakdown"]["round"]["verify"] == bd.round.verify
    assert js["speculative"]["accepted_histogram"] == list(s.speculative.accepted_histogram)
    assert list(point.to_json()) == [
        "gamma",
        "speculative_tokens_per_s",
        "autoregressive_tokens_per_s",
        "speedup",
        "alpha",
        "mean_accepted",
        "c",
        "leviathan_speedup",
        "forward_time_speedup",
        "forward_time_speedup_measured_advance",
        "greedy_equal",
        "ar_ms_per_token",
        "sp_ms_per_token",
    ]


@pytest.mark.parametrize("gamma", [1, 4])
def test_lean_greedy_round_decides_like_the_step_machine(tiny_pair, gamma):
    """The fast path's greedy round (argmax only, no q rows) makes the decisions of the
    session's round: same tokens, rounds, acceptances and α."""
    config = SessionConfig(gamma=gamma, max_new_tokens=30)
    fast = generate(tiny_pair, PROMPT, config)
    session = SpeculativeSession(tiny_pair, PROMPT, config)
    session.run()
    assert fast.output_ids == session.generated_ids
    assert fast.stats.rounds == len(session.history)
    assert fast.stats.accepted_histogram == [
        sum(r.verify.accepted == n for r in session.history)
        for n in range(len(fast.stats.accepted_histogram))
    ]
    checks = [c for r in session.history for c in r.verify.checks]
    assert fast.stats.acceptance_rate == pytest.approx(sum(c.overlap for c in checks) / len(checks))
    s = fast.stats
    assert s.draft_forwards == sum(len(r.verify.checks) for r in session.history)
    assert 0 < s.target_forward_ms + s.draft_forward_ms <= s.total_ms
    assert s.overhead_ms == pytest.approx(s.total_ms - s.target_forward_ms - s.draft_forward_ms)


def test_left_pad():
    ids, mask, pos = left_pad([[5, 6, 7], [9]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 9]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0]]


def test_batched_greedy_equals_one_prompt_at_a_time(tiny_pair):
    batch = generate_batch(tiny_pair, PROMPTS, 12)
    for prompt, row in zip(PROMPTS, batch.output_ids, strict=True):
        alone = generate(tiny_pair, prompt, SessionConfig(max_new_tokens=12), "autoregressive")
        assert list(row) == alone.output_ids  # EOS included where it stopped
    full = generate_batch(tiny_pair, PROMPTS[:2], 10, stop_at_eos=False)
    assert [len(r) for r in full.output_ids] == [10, 10] and full.new_tokens == 20
    assert full.forwards == 10 and full.batch_size == 2 and full.tokens_per_s > 0


def test_batch_point_and_crossover(tiny_pair):
    point = batch_sweep_point(tiny_pair, PROMPTS[:2], SessionConfig(gamma=2, max_new_tokens=6))
    assert point.batch_size == 2
    rates = [v for k, v in point.to_json().items() if k.endswith("tokens_per_s")]
    assert len(rates) == 3 and all(v > 0 for v in rates)
    rows = [BatchPoint(1, 10, 15, 5), BatchPoint(4, 30, 15, 5), BatchPoint(2, 16, 15, 5)]
    assert batch_crossover(rows) == 2  # the smallest B where batching wins
    assert batch_crossover(rows[:1]) is None
    assert best_point(rows, lambda p: p.batched_autoregressive_tokens_per_s) == rows[1]
    assert best_point(rows, lambda p: p.sequential_speculative_tokens_per_s) == rows[0]  # ties
    assert best_point([], lambda p: p.batch_size) is None


def test_hf_assisted_leaves_the_shared_models_alone(tiny_pair):
    draft_config = tiny_pair.draft.generation_config.to_dict()
    target_config = tiny_pair.target.generation_config.to_dict()
    out = hf_generate(tiny_pair, PROMPT, 3, 10, repeats=1, stop_at_eos=False)
    assert out.new_tokens == 10 and 0 < out.target_forwards <= 10
    ar = generate(
        ignoring_eos(tiny_pair), PROMPT, SessionConfig(max_new_tokens=10), "autoregressive"
    )
    assert list(out.output_ids) == ar.output_ids
    assert tiny_pair.draft.generation_config.to_dict() == draft_config
    assert tiny_pair.target.generation_config.to_dict() == target_config
    assert "forward" not in vars(tiny_pair.target)  # the counting hook lived on a copy
    with torch.inference_mode():
        assert tiny_pair.target(torch.tensor([[1, 2]])).logits.shape[:2] == (1, 2)


def test_forward_curve_and_its_use_in_the_summary(tiny_pair):
    from specdec_core.bench.curve import ForwardCurve, measure_forward_curve

    weights = [p.detach().clone() for p in tiny_pair.target.parameters()]
    curve = measure_forward_curve(tiny_pair, PROMPT, 7, repeats=2)
    assert len(curve.target_ms) == 7 and all(ms > 0 for ms in curve.target_ms)
    assert curve.draft_step_ms > 0 and curve.ratio()[0] == 1.0
    assert list(curve.by_tokens()) == list(range(1, 8))
    assert all(
        torch.equal(a, b) for a, b in zip(weights, tiny_pair.target.parameters(), strict=True)
    )
    assert measure_forward_curve(tiny_pair, PROMPT, 3, 1, "ngram").draft_step_ms == 0.0
    # a flat curve: the verification read off it is one target step
    config = SessionConfig(gamma=3, max_new_tokens=12)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative")
    cm = summarize(ar, sp, 3, ForwardCurve((5.0,) * 7, 1.0, 1)).cost_model
    assert cm.verify_ms_from_curve == pytest.approx(cm.target_step_ms)
    assert cm.best_gamma == best_gamma(cm.alpha, cm.c, 6)  # the γ the curve covers
    rising = ForwardCurve(tuple(5.0 * k for k in range(1, 8)), 1.0, 1)  # t(k) = k · t(1)
    drafts = [len(r.drafted) for r in sp.records]
    cm = summarize(ar, sp, 3, rising).cost_model
    assert cm.verify_ms_from_curve == pytest.approx(
        cm.target_step_ms * sum(g + 1 for g in drafts) / len(drafts)
    )


def test_even_repeats_caption_tiles_and_speedup_use_one_median(monkeypatch):
    """2 repeats: the shown run is the upper of the two middle runs by ms/token, and the
    spread caption's median, the tiles' tokens/s and the speed-up are that same run's."""
    from specdec_core.bench import runs as runs_mod
    from specdec_core.bench.runs import measure_pair_runs
    from specdec_core.engine.chain.generate import GenerationResult, GenerationStats

    # interleaved calls: AR, SP, AR, SP; (total_ms, new_tokens) crafted so that the
    # speculative lane's order by total_ms differs from its order by ms/token
    timings = iter([(22.88, 4), (48.96, 4), (24.44, 4), (60.0, 8)])

    def fake_generate(pair, prompt, config, mode, drafter=None, trace_timeline=False):
        total, n = next(timings)
        return GenerationResult(
            list(range(n)), "", "length", GenerationStats(new_tokens=n, total_ms=total)
        )

    monkeypatch.setattr(runs_mod, "generate", fake_generate)
    monkeypatch.setattr(runs_mod, "make_named_drafter", lambda pair, name: None)
    runs = measure_pair_runs(None, PROMPT, SessionConfig(max_new_tokens=4), repeats=2, warmup=False)
    a, s = runs.autoregressive.stats, runs.speculative.stats
    ar_spread, sp_spread = runs.spread.ar_ms_per_token, runs.spread.sp_ms_per_token
    assert a.ms_per_token == pytest.approx(6.11) and s.ms_per_token == pytest.approx(12.24)
    assert ar_spread.median == a.ms_per_token and sp_spread.median == s.ms_per_token
    assert (ar_spread.low, ar_spread.high) == pytest.approx((5.72, 6.11))
    assert (sp_spread.low, sp_spread.high) == pytest.approx((7.5, 12.24))
    assert ar_spread.n == sp_spread.n == 2
    assert 1e3 / a.tokens_per_s == pytest.approx(ar_spread.median)
    speedup = s.tokens_per_s / a.tokens_per_s  # summarize's speed-up
    assert speedup == pytest.approx(ar_spread.median / sp_spread.median)
    assert speedup == pytest.approx(6.11 / 12.24)


def test_the_summary_prices_a_round_by_what_the_drafter_runs(tiny_pair):
    from specdec_core.bench.curve import ForwardCurve

    config = SessionConfig(gamma=3, max_new_tokens=12)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative")
    drafts = [len(r.drafted) for r in sp.records]
    flat = (5.0,) * 7
    serial = summarize(ar, sp, 3, ForwardCurve(flat, 1.0, 1))
    assert serial.breakdown.round.draft == pytest.approx(sum(drafts) / len(drafts) * 1.0)
    # one forward per round (a block drafter): its measured proposal, not γ draft steps
    block = summarize(
        ar, sp, 3, ForwardCurve(flat, 1.0, 1, draft_cost="one_forward", draft_round_ms=1.3)
    )
    assert block.breakdown.round.draft == pytest.approx(
        1.3 * sum(g > 0 for g in drafts) / len(drafts)
    )
    assert block.cost_model.predicted_speedup > serial.cost_model.predicted_speedup
    lookup = summarize(ar, sp, 3, ForwardCurve(flat, 1.0, 1, draft_cost="none"))
    assert lookup.breakdown.round.draft == 0.0


def test_the_n_gram_round_is_priced_with_its_measured_lookup(tiny_pair):
    from specdec_core.bench.curve import ForwardCurve
    from specdec_core.drafters.ngram import NgramDrafter

    config = SessionConfig(gamma=3, max_new_tokens=12)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative", NgramDrafter(pair.vocab_size))
    a, s = ar.stats, sp.stats
    step = (a.target_forward_ms - a.prefill_ms) / (a.target_forwards - 1)
    flat = (step,) * 7  # t(k) = the run's step: load 1, verification = one step
    curve = ForwardCurve(flat, 0.0, 1, draft_cost="none", draft_round_ms=0.25, round_drafts=0)
    cm = summarize(ar, sp, 3, curve)
    # the lookup: 0.25 ms in every round, drafting or not; the run's own lookup time
    # (its drafting phase) leaves the overhead, so it is not counted twice
    assert cm.breakdown.round.draft == pytest.approx(0.25)
    overhead = (s.overhead_ms - s.draft_ms) / s.rounds
    assert cm.cost_model.overhead_ms == pytest.approx(overhead)
    rounds = max(1.0, s.new_tokens / cm.cost_model.expected_tokens_per_round)
    run_ms = a.prefill_ms + rounds * (0.25 + overhead) + (rounds - 1) * step
    assert cm.cost_model.predicted_speedup == pytest.approx(a.total_ms / run_ms)


def test_the_verification_is_priced_at_the_level_of_a_round(tiny_pair):
    from specdec_core.bench.curve import ForwardCurve

    config = SessionConfig(gamma=3, max_new_tokens=12)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative")
    drafts = [len(r.drafted) for r in sp.records]
    # t(5) = 5 ms back to back with other target forwards, 5.5 ms right after a round's
    # 4-draft proposal (the drafter's weights went through the CPU's caches in between)
    curve = ForwardCurve(
        (5.0,) * 7, 1.5, 1, draft_round_ms=7.0, round_drafts=4, round_verify_ms=5.5
    )
    assert curve.verify_level() == pytest.approx(1.1)
    cm = summarize(ar, sp, 3, curve)
    assert cm.cost_model.verify_ms == pytest.approx(5.5)
    # serial drafts priced at one draft of the round, 7.0 / 4 = 1.75 ms (a lone step,
    # 1.5 ms here, is the round's cold first step); c stays the lone step's
    assert curve.round_step_ms() == pytest.approx(1.75)
    assert cm.breakdown.round.draft == pytest.approx(1.75 * sum(drafts) / len(drafts))
    assert cm.cost_model.c == pytest.approx(1.5 / 5.0)
    plain = summarize(ar, sp, 3, ForwardCurve((5.0,) * 7, 1.5, 1))  # no round measured
    assert plain.cost_model.verify_ms == pytest.approx(5.0)
    assert plain.breakdown.round.draft == pytest.approx(1.5 * sum(drafts) / len(drafts))
    assert plain.cost_model.predicted_speedup > cm.cost_model.predicted_speedup


def test_every_drafters_curve_measures_a_round_as_it_runs(embedded_pair):
    from specdec_core.bench.curve import measure_forward_curve

    block = measure_forward_curve(embedded_pair, PROMPT, 9, 2, "block")
    assert block.draft_cost == "one_forward" and block.draft_round_ms > 0
    assert block.round_drafts == 4 and block.round_verify_ms > 0
    for name, cost in (("model", "serial"), ("eagle", "serial"), ("mtp", "heads")):
        curve = measure_forward_curve(embedded_pair, PROMPT, 9, 2, name)
        assert curve.draft_cost == cost and curve.round_drafts == 4, name
        assert curve.draft_round_ms > 0 and curve.round_verify_ms > 0, name
    lookup = measure_forward_curve(embedded_pair, PROMPT, 9, 2, "ngram")
    assert lookup.draft_cost == "none" and lookup.draft_step_ms == 0.0
    assert lookup.draft_round_ms > 0  # the lookup's wall time, no forward


def test_the_prediction_reads_the_curve_at_the_runs_load(tiny_pair):
    from specdec_core.bench.curve import ForwardCurve

    config = SessionConfig(gamma=3, max_new_tokens=12)
    pair = ignoring_eos(tiny_pair)
    ar = generate(pair, PROMPT, config, "autoregressive")
    sp = generate(pair, PROMPT, config, "speculative")
    a = ar.stats
    step = (a.target_forward_ms - a.prefill_ms) / (a.target_forwards - 1)  # the run's step
    shape = (1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7)  # t(k)/t(1)
    # the same curve measured at the runs' load and at twice it (a busier moment): one
    # prediction, since only its shape and c = 0.5 enter
    calm = ForwardCurve(tuple(step * r for r in shape), 0.5 * step, 1)
    busy = ForwardCurve(tuple(2 * step * r for r in shape), step, 1)
    p_calm = summarize(ar, sp, 3, calm).cost_model
    p_busy = summarize(ar, sp, 3, busy).cost_model
    assert p_calm.predicted_speedup == pytest.approx(p_busy.predicted_speedup, rel=1e-9)
    assert p_busy.target_step_ms == pytest.approx(2 * step)  # shown step times stay the curve's


class _HeadDrafter:
    """A drafter whose every head forward costs exactly 0.5 ms of its ``forward_ms`` (the
    EAGLE head's case: no plain model cache, its time counted inside its own forwards)."""

    draft_cost = "serial"

    def __init__(self) -> None:
        self.forward_ms, self.rolled = 0.0, []

    def rollback(self, length: int) -> int:
        self.rolled.append(length)
        return 0

    def rollback_to(self, committed: list[int]) -> int:
        return self.rollback(len(committed) - 1)

    def propose_argmax(self, context: list[int], gamma: int, confidence=None):
        self.forward_ms += 0.5 * gamma  # one head step per draft
        return [1] * gamma, gamma


def test_the_head_step_and_the_round_are_read_off_the_drafters_own_forwards(tiny_pair):
    from specdec_core.bench.curve import _proposal_timer, _Rounds
    from specdec_core.core.inputs import encode_prompt
    from specdec_core.core.kvcache import ModelCache

    ids = encode_prompt(tiny_pair, PROMPT)
    head = _HeadDrafter()
    # the EAGLE head's step: its own forward time per draft of a γ-draft proposal, after
    # a rollback of one token (the proposal catches up on the newest token, as a round's),
    # and back to the committed ids after
    assert _proposal_timer(head, lambda: ids, 4)() == 0.5
    assert head.rolled == [len(ids) - 1, len(ids) - 1]
    target = ModelCache(tiny_pair.target)
    target.extend(ids[:-1])
    rounds = _Rounds(head, target, ids, 4)
    # a round: the whole proposal's forward time, then its verification over 4 + 1 tokens
    assert rounds.timer() == 2.0
    assert rounds.timed[0][:2] == (4, 2.0) and rounds.timed[0][2] > 0
    assert target.ids == rounds.committed[:-1]  # rolled back to what the round committed


def test_gamma_by_acceptance_trades_the_runs_alpha_against_the_curve(embedded_pair):
    from specdec_core.bench.curve import ForwardCurve
    from specdec_core.bench.sweeps import gamma_by_acceptance
    from specdec_core.drafters.registry import make_named_drafter

    config = SessionConfig(gamma=4, max_new_tokens=32)  # α 0.96: one rejection
    eagle = make_named_drafter(embedded_pair, "eagle")
    run = generate(embedded_pair, PROMPT, config, "speculative", eagle)
    free = ForwardCurve((1.0,) * 9, 0.0, 1)  # drafts cost nothing, verification is flat
    chosen, alpha = gamma_by_acceptance(embedded_pair, PROMPT, config, "eagle", free)
    assert alpha == run.stats.acceptance_rate  # the same seeded greedy run
    assert 0.0 < alpha < 1.0
    assert chosen == 8  # every draft adds tokens for free: the longest the curve prices
    # a draft costs one target step, each verified token half a step: one draft is best
    dear = ForwardCurve(tuple(1.0 + 0.5 * k for k in range(9)), 1.0, 1)
    assert gamma_by_acceptance(embedded_pair, PROMPT, config, "eagle", dear)[0] == 1
