"""Sweeps: speed-up against γ (measured next to the cost model) and throughput against
batch size (batched target-only vs sequential speculative), and what a page reads off them
(the best point, the crossover)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

from specdec_core.bench.batching import generate_batch
from specdec_core.bench.bounded import conclusive
from specdec_core.bench.curve import ForwardCurve
from specdec_core.bench.results import BatchPoint, GammaPoint, RunSpread
from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.summary import summarize
from specdec_core.bench.timing import Verdict, judge
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, generate
from specdec_core.rules.costmodel import best_gamma_on_curve

# Prompts for the batch-size sweep (Tiny Shakespeare openings; content, not UI text).
BENCH_PROMPTS: tuple[str, ...] = (
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?",
    "KING RICHARD III:\nNow is the winter of our discontent",
    "MENENIUS:\nI tell you, friends, most charitable care",
    "DUKE VINCENTIO:\nOf government the properties to unfold,",
    "GLOUCESTER:\nWhat, will the aspiring blood of Lancaster",
    "HAMLET:\nTo be, or not to be, that is the question:",
)

P = TypeVar("P")


def gamma_sweep_point(
    ar: GenerationResult, sp: GenerationResult, gamma: int, spread: RunSpread | None = None
) -> GammaPoint:
    """One point of the γ sweep: measured tokens/s and speed-up at this γ next to the cost
    model's predictions from the same runs (see :func:`summarize`); ``spread``: the runs'
    repeats, kept for :func:`gamma_sweep_conclusive`."""
    summary = summarize(ar, sp, gamma, None, spread)
    cm = summary.cost_model
    return GammaPoint(
        gamma=gamma,
        speculative_tokens_per_s=summary.speculative.tokens_per_s,
        autoregressive_tokens_per_s=summary.autoregressive.tokens_per_s,
        speedup=summary.speedup,
        alpha=cm.alpha,
        mean_accepted=summary.speculative.mean_accepted,
        c=cm.c,
        leviathan_speedup=cm.leviathan_speedup,
        forward_time_speedup=cm.forward_time_speedup,
        forward_time_speedup_measured_advance=cm.forward_time_speedup_measured_advance,
        greedy_equal=summary.greedy_equal,
        ar_ms_per_token=spread.ar_ms_per_token if spread is not None else None,
        sp_ms_per_token=spread.sp_ms_per_token if spread is not None else None,
    )


def gamma_sweep_verdict(points: Sequence[GammaPoint]) -> tuple[Verdict, bool]:
    """Whether a γ sweep supports naming a best γ: :func:`timing.judge` over every point's
    repeats (the rule the verify-cost curve uses), and :func:`bounded.conclusive` (at least
    two timed passes at every point; a point without recorded repeats counts as one).
    Returns ``(verdict, conclusive)``."""
    spreads = [s for q in points for s in (q.ar_ms_per_token, q.sp_ms_per_token) if s]
    passes = min((s.n for s in spreads), default=1)
    if any(q.ar_ms_per_token is None or q.sp_ms_per_token is None for q in points):
        passes = 1
    verdict = judge(spreads)
    return verdict, bool(points) and conclusive(verdict, passes)


def gamma_by_acceptance(
    pair: ModelPair,
    prompt: str,
    config: SessionConfig,
    drafter: str | Callable[[], Drafter],
    curve: ForwardCurve,
) -> tuple[int, float]:
    """A drafter's γ chosen by its acceptance: one speculative run of ``prompt`` at
    ``config`` (its γ, temperature, seed) measures α (mean ``Σ min(p, q)`` over checked
    positions), then the γ maximising the cost model's tokens per unit of time,
    ``E[tokens](α, γ) / (γ c + t(γ + 1) / t(1))`` on the measured ``curve``
    (:func:`~specdec_core.rules.costmodel.best_gamma_on_curve`; ``c`` = the curve's draft
    step over ``t(1)``). ``drafter``: a name or a maker of fresh drafters. Returns
    ``(γ, α)``."""
    made = make_named_drafter(pair, drafter) if isinstance(drafter, str) else drafter()
    run = generate(pair, prompt, config, "speculative", made)
    alpha = min(max(run.stats.acceptance_rate, 0.0), 1.0)
    c = curve.draft_step_ms / curve.target_ms[0] if curve.target_ms[0] > 0 else 0.0
    return best_gamma_on_curve(alpha, c, curve.by_tokens()), alpha


def best_point(points: Sequence[P], score: Callable[[P], float]) -> P | None:
    """The point with the largest ``score`` (first on ties), ``None`` for no points."""
    return max(points, key=score) if points else None


def batch_crossover(points: Sequence[BatchPoint]) -> int | None:
    """The smallest batch size at which batched target-only throughput beats sequential
    speculative throughput (``None``: it never does among ``points``)."""
    for p in sorted(points, key=lambda p: p.batch_size):
        if p.batched_autoregressive_tokens_per_s > p.sequential_speculative_tokens_per_s:
            return p.batch_size
    return None


def _median_rate(run: Callable[[], tuple[int, float]], repeats: int) -> float:
    run()  # warm-up
    rates = [1e3 * tokens / ms for tokens, ms in (run() for _ in range(max(1, repeats)))]
    return statistics.median(rates)


def batched_throughput(
    pair: ModelPair, prompts: Sequence[str], max_new_tokens: int, repeats: int = 1
) -> float:
    """Tokens/s (summed over the batch) of :func:`batching.generate_batch` over
    ``prompts`` at once, EOS ignored so each prompt gets ``max_new_tokens`` tokens. Median
    of ``repeats`` after a warm-up."""
    timed = ignoring_eos(pair)

    def run() -> tuple[int, float]:
        r = generate_batch(timed, list(prompts), max_new_tokens, stop_at_eos=False)
        return r.new_tokens, r.total_ms

    return _median_rate(run, repeats)


def sequential_throughput(
    pair: ModelPair, prompts: Sequence[str], config: SessionConfig, mode: str, repeats: int = 1
) -> float:
    """Tokens/s of :func:`generate` run on ``prompts`` one after another (``mode``
    ``speculative`` or ``autoregressive``), EOS ignored. Median of ``repeats`` after a
    warm-up."""
    timed = ignoring_eos(pair)

    def run() -> tuple[int, float]:
        results = [generate(timed, p, config, mode) for p in prompts]  # type: ignore[arg-type]
        return sum(r.stats.new_tokens for r in results), sum(r.stats.total_ms for r in results)

    return _median_rate(run, repeats)


def batch_sweep_point(
    pair: ModelPair,
    prompts: Sequence[str],
    config: SessionConfig,
    repeats: int = 1,
) -> BatchPoint:
    """One point of the batch-size sweep, ``B = len(prompts)``, ignoring EOS so every
    prompt gets ``config.max_new_tokens`` tokens: throughput (tokens/s over all prompts) of
    batched target-only decoding (one forward per step for the batch) vs running the
    prompts one after another with speculative decoding and with target-only decoding."""
    n = config.max_new_tokens
    return BatchPoint(
        batch_size=len(prompts),
        batched_autoregressive_tokens_per_s=batched_throughput(pair, prompts, n, repeats),
        sequential_speculative_tokens_per_s=sequential_throughput(
            pair, prompts, config, "speculative", repeats
        ),
        sequential_autoregressive_tokens_per_s=sequential_throughput(
            pair, prompts, config, "autoregressive", repeats
        ),
    )
