"""From timed runs to figures: :func:`summarize` (ours; Hugging Face's next to ours and
the whole benchmark of one pair are ``bench/report.py``).

The cost model (Leviathan et al. 2023, §3.3–3.4) takes α (the measured mean
``Σ min(p, q)``), tokens per round and the loop's overhead from the runs, and its step
times from ONE measurement: with a verify-cost curve, every step time shown -- the target
step ``t(1)``, the draft step, ``c = draft step / target step``, the verification ``t(g +
1)``, the round breakdown, the forward-time predictions and the best γ -- is read off that
curve (a warmed-up, interleaved, repeated measurement); without one (the γ sweep), off the
runs' own forwards (``target_step_ms`` a target forward of the autoregressive run,
``draft_step_ms`` a draft forward, ``verify_ms`` a verification forward, all measured
inside the model calls). Two sources for one step contradicted each other on a busy
machine (7.7 ms vs ``t(1)`` = 2.13 ms). :class:`TimingFigures` carries the spreads and the
"too busy" verdict (``timing.judge``).
"""

from __future__ import annotations

from specdec_core.bench.curve import ForwardCurve
from specdec_core.bench.results import (
    AutoregressiveFigures,
    BenchSummary,
    Breakdown,
    CostModelFigures,
    RoundParts,
    RunSpread,
    SpeculativeFigures,
    TargetOnlyParts,
    TimingFigures,
)
from specdec_core.bench.timing import judge
from specdec_core.engine.chain.generate import GenerationResult
from specdec_core.engine.chain.records import summarize as summarize_records
from specdec_core.rules.costmodel import (
    best_gamma,
    best_gamma_on_curve,
    curve_ms,
    expected_tokens_given_position_rates,
    expected_tokens_per_round,
    mean_draft_round_ms,
    per_token_cost_ms,
    predicted_run_ms,
    walltime_improvement,
)


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def _curve_verify(curve: ForwardCurve, drafts: list[int], fallback: float) -> float:
    """Verification forward per round read off the curve: ``t(g + 1)`` (ms) averaged over
    the rounds' draft counts ``g``; ``fallback`` when no round drafted."""
    if not drafts:
        return fallback
    by_k = curve.by_tokens()
    return sum(curve_ms(by_k, g + 1) for g in drafts) / len(drafts)


def _timing(curve: ForwardCurve | None, spread: RunSpread | None, run_step: float) -> TimingFigures:
    """The spreads and the verdict of one measurement (see :class:`TimingFigures`)."""
    spreads = [spread.ar_ms_per_token, spread.sp_ms_per_token] if spread is not None else []
    curve_ms_: tuple[float, ...] = ()
    same = None
    if curve is not None:
        spreads += list(curve.target_spread) + ([curve.draft_spread] if curve.draft_spread else [])
        curve_ms_ = curve.target_ms
        same = (run_step, curve.target_ms[0]) if run_step > 0 else None
    verdict = judge(spreads, curve_ms_, same)
    return TimingFigures(
        source="curve" if curve is not None else "runs",
        busy=verdict.busy,
        reasons=verdict.reasons,
        run_target_step_ms=run_step,
        target_step=curve.target_spread[0] if curve is not None and curve.target_spread else None,
        draft_step=curve.draft_spread if curve is not None else None,
        ar_ms_per_token=spread.ar_ms_per_token if spread is not None else None,
        sp_ms_per_token=spread.sp_ms_per_token if spread is not None else None,
        runs_how=spread.how if spread is not None else None,
        curve_how=curve.how if curve is not None else None,
    )


def _steady(forward_ms: float, prefill_ms: float, forwards: int, fallback: float) -> float:
    """Mean ms of a forward after the first (the prompt's): ``(total − prefill) / (n − 1)``;
    ``fallback`` when there is no later forward or no prefill was recorded."""
    if forwards < 2 or prefill_ms <= 0:
        return fallback
    return (forward_ms - prefill_ms) / (forwards - 1)


def summarize(
    ar: GenerationResult,
    sp: GenerationResult,
    gamma: int,
    curve: ForwardCurve | None = None,
    spread: RunSpread | None = None,
) -> BenchSummary:
    """Compare one target-only run and one speculative run of the same prompt/settings:
    throughput of each, α and the acceptance figures (from ``GenerationStats``), the
    per-round breakdown, the cost model's predictions and whether both produced the same
    ids; ``timing``: the spreads (``spread``: the runs' repeats; the curve's) and the
    "too busy" verdict.

    Step times (see the module docstring): with ``curve`` all of them come from it --
    ``target_step_ms = t(1)``, ``draft_step_ms`` its draft step, ``c`` their ratio, the
    verification ``t(g + 1) × curve.verify_level()`` (a verification right after drafting,
    as in a round) averaged over the rounds' draft counts ``g``, a round's draft time
    priced by what the drafter runs (``curve.draft_cost``: :func:`mean_draft_round_ms`;
    drafts × one draft of the measured round (``curve.round_step_ms()``) for serial steps
    -- the EAGLE head's catch-up and steps with the LM head rows -- and head evaluations,
    one measured proposal for a block drafter, the
    lookup measured in a round for prompt lookup, which then leaves the run's overhead);
    without, from the runs' forwards.

    Predictions: expected tokens per round from the per-position acceptance rates
    ``α_n`` (``records.summarize``'s ``conditional_acceptance``) and the drafts each round
    actually proposed (:func:`expected_tokens_given_position_rates`); Leviathan's
    ``walltime_improvement(α, γ, c)``; forward times alone, with the expected and with the
    measured tokens per round;
    and ``predicted_speedup``: the target-only run's measured wall time over the speculative
    run's predicted one (:func:`predicted_run_ms`: the prompt's forward once, then rounds of
    draft + verification + the measured non-forward overhead, as many as the expected
    tokens per round need, + one verification per target forward the drafter runs of
    its own: EAGLE's first-round prefill). With a curve, its draft and verification times
    enter that prediction scaled by ``run step / t(1)`` (the target-only run's steady step
    over the curve's): the curve gives the shape (``t(k)/t(1)``, ``c``), the runs the
    load they ran under, so a burst of load between the runs and the curve does not move
    the prediction. ``best_gamma`` searches the whole curve."""
    a, s = ar.stats, sp.stats
    drafts = [len(r.drafted) for r in sp.records]
    rounds = max(s.rounds, 1)
    drafts_per_round = sum(drafts) / len(drafts) if drafts else 0.0
    # Steady-state steps: the first target forward of each lane runs over the prompt
    # (``prefill_ms``); it is counted once by :func:`predicted_run_ms`, not in every step.
    run_step = _steady(
        a.target_forward_ms,
        a.prefill_ms,
        a.target_forwards,
        a.target_forward_ms / max(a.target_forwards, 1),
    )
    overhead = s.overhead_ms / rounds
    alpha = min(max(s.acceptance_rate, 0.0), 1.0)
    advanced = s.new_tokens / rounds  # tokens actually advanced per round
    # a round's first draft is always checked (a commit appends ≥ 1 token), so the rates
    # are empty only when no round drafted: then every round advances one token
    rates = summarize_records(sp.records).conditional_acceptance
    if drafts:
        expected = expected_tokens_given_position_rates(rates, drafts)
    else:
        expected = expected_tokens_per_round(alpha, gamma)
    run_verify = _steady(s.target_forward_ms, s.prefill_ms, rounds, s.target_forward_ms / rounds)
    if curve is not None:  # one measurement feeds every step time
        target_step, draft_step = curve.target_ms[0], curve.draft_step_ms
        # a round as it runs: t(g + 1) at the level of a verification right after drafting
        verify = _curve_verify(curve, drafts, target_step) * curve.verify_level()
        # priced by what the drafter runs: serial steps, one block forward, head
        # evaluations, or the lookup measured in a round (costmodel.draft_round_ms)
        draft_per_round = mean_draft_round_ms(
            curve.draft_cost, drafts, curve.round_step_ms(), curve.draft_round_ms
        )
        if curve.draft_cost == "none":  # the run's lookup is priced above, not overhead
            overhead = max(0.0, s.overhead_ms - s.draft_ms) / rounds
        parts = RoundParts(draft=draft_per_round, verify=verify, overhead=overhead)
    else:
        target_step = run_step
        draft_step = s.draft_forward_ms / max(s.draft_forwards, 1)
        verify = run_verify
        draft_per_round = s.draft_forward_ms / rounds
        parts = RoundParts(
            draft=draft_per_round, verify=s.target_forward_ms / rounds, overhead=overhead
        )
    # the curve's forwards at the runs' load: its t(1) against the target-only run's own
    # steady step, measured in the same interleaved window as the speculative run
    load = run_step / target_step if curve is not None and run_step > 0 < target_step else 1.0
    c = draft_step / target_step if target_step > 0 else 0.0
    has_step = target_step > 0
    whole = parts.draft + parts.verify + parts.overhead
    search = (
        best_gamma_on_curve(alpha, c, curve.by_tokens())
        if curve is not None
        else best_gamma(alpha, c)
    )
    return BenchSummary(
        gamma=gamma,
        autoregressive=AutoregressiveFigures(
            tokens_per_s=a.tokens_per_s,
            ms_per_token=a.ms_per_token,
            ttft_ms=a.ttft_ms,
            new_tokens=a.new_tokens,
            target_forwards=a.target_forwards,
            target_step_ms=target_step,
            overhead_ms_per_token=a.overhead_ms / max(a.new_tokens, 1),
        ),
        speculative=SpeculativeFigures(
            tokens_per_s=s.tokens_per_s,
            ms_per_token=s.ms_per_token,
            ttft_ms=s.ttft_ms,
            new_tokens=s.new_tokens,
            rounds=s.rounds,
            target_forwards=s.target_forwards,
            draft_forwards=s.draft_forwards,
            mean_accepted=s.mean_accepted,
            acceptance_rate=s.acceptance_rate,
            accepted_histogram=tuple(s.accepted_histogram),
            per_position_acceptance=tuple(s.per_position_acceptance),
            draft_ms_per_round=s.draft_ms / rounds,
            verify_ms_per_round=s.verify_ms / rounds,
            overhead_ms_per_round=max(0.0, s.total_ms - s.draft_ms - s.verify_ms) / rounds,
            round_ms=s.total_ms / rounds,
            draft_forward_ms_per_round=s.draft_forward_ms / rounds,
            verify_forward_ms_per_round=s.target_forward_ms / rounds,
            non_forward_ms_per_round=overhead,
            non_forward_pct=_pct(s.overhead_ms, s.total_ms),
            drafts_per_round=drafts_per_round,
        ),
        speedup=s.tokens_per_s / a.tokens_per_s if a.tokens_per_s else 0.0,
        cost_model=CostModelFigures(
            alpha=alpha,
            c=c,
            target_step_ms=target_step,
            draft_step_ms=draft_step,
            verify_ms=verify,
            verify_over_target_step=verify / target_step if has_step else 0.0,
            overhead_ms=overhead,
            conditional_acceptance=rates,
            expected_tokens_per_round=expected,
            measured_tokens_per_round=advanced,
            leviathan_speedup=walltime_improvement(alpha, gamma, c),
            forward_time_speedup=(
                target_step / per_token_cost_ms(draft_per_round, verify, 0.0, expected)
                if has_step and expected > 0 and draft_per_round + verify > 0
                else 0.0
            ),
            forward_time_speedup_measured_advance=(
                target_step / per_token_cost_ms(draft_per_round, verify, 0.0, advanced)
                if has_step and advanced > 0 and draft_per_round + verify > 0
                else 0.0
            ),
            predicted_speedup=(
                a.total_ms
                * s.new_tokens
                / a.new_tokens
                / predicted_run_ms(
                    s.new_tokens,
                    expected,
                    a.prefill_ms,
                    draft_per_round * load,
                    verify * load,
                    overhead,
                    max(0, s.target_forwards - s.rounds),  # a drafter's own prefill (EAGLE)
                )
                if has_step and expected > 0 and s.new_tokens and a.new_tokens
                else 0.0
            ),
            verify_ms_from_curve=verify,
            best_gamma=search,
        ),
        breakdown=Breakdown(
            tokens_per_round=advanced,
            round=parts,
            target_only=TargetOnlyParts(
                target=target_step * advanced,
                overhead=a.overhead_ms / max(a.new_tokens, 1) * advanced,
            ),
            shares_pct=RoundParts(
                draft=_pct(parts.draft, whole),
                verify=_pct(parts.verify, whole),
                overhead=_pct(parts.overhead, whole),
            ),
        ),
        greedy_equal=sp.output_ids == ar.output_ids,
        timing=_timing(curve, spread, run_step),
    )
