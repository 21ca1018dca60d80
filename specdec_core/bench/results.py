"""What a benchmark returns: frozen dataclasses, read by attribute. Their JSON form (the
``bench --json`` object of docs/ARCHITECTURE.md) is derived from them by ``to_json`` and
nothing else; field order is key order.

The acceptance figures (α, mean accepted length, histogram, per-position rates) are copied
from ``GenerationStats``, which takes them from ``records.summarize``: nothing here
recomputes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specdec_core.bench.curve import ForwardCurve
from specdec_core.bench.timing import HowMeasured, Spread
from specdec_core.core.trace_json import to_jsonable


@dataclass(frozen=True)
class AutoregressiveFigures:
    """The target-only run: throughput and the target step it is made of."""

    tokens_per_s: float
    ms_per_token: float
    ttft_ms: float
    new_tokens: int
    target_forwards: int
    target_step_ms: float  # one target forward (measured inside the model calls)
    overhead_ms_per_token: float  # wall time that is not a model forward, per token


@dataclass(frozen=True)
class SpeculativeFigures:
    """The speculative run: throughput, acceptance and where a round's time goes."""

    tokens_per_s: float
    ms_per_token: float
    ttft_ms: float
    new_tokens: int
    rounds: int
    target_forwards: int
    draft_forwards: int
    mean_accepted: float
    acceptance_rate: float  # α, from records.summarize
    accepted_histogram: tuple[int, ...]  # rounds that accepted exactly n drafts, n = 0..γ
    per_position_acceptance: tuple[float, ...]
    draft_ms_per_round: float  # wall time of the draft phase
    verify_ms_per_round: float  # wall time of the verify phase
    overhead_ms_per_round: float  # wall time outside both phases
    round_ms: float
    draft_forward_ms_per_round: float  # draft model forwards only
    verify_forward_ms_per_round: float  # the target's verification forward only
    non_forward_ms_per_round: float  # everything that is not a model forward
    non_forward_pct: float
    drafts_per_round: float  # drafts actually proposed per round (≤ γ; lookup: often fewer)


@dataclass(frozen=True)
class CostModelFigures:
    """The cost model fed from the same runs (Leviathan et al. 2023, §3.3–3.4)."""

    alpha: float  # α clamped to [0, 1]
    c: float  # draft step / target step
    target_step_ms: float  # target-only forward after the first (the prompt's), mean
    draft_step_ms: float
    verify_ms: float  # one verification after the first round, t(g+1) at a round's level
    verify_over_target_step: float
    overhead_ms: float  # per round, neither a model forward nor a priced lookup
    conditional_acceptance: tuple[float, ...]  # α_n: draft n's rate, drafts < n accepted
    expected_tokens_per_round: float  # mean over rounds of 1 + Σ_{i≤g} Π_{j≤i} α_j, g drafted
    measured_tokens_per_round: float
    leviathan_speedup: float  # walltime_improvement(α, γ, c)
    forward_time_speedup: float  # measured forward times, no overhead
    forward_time_speedup_measured_advance: float  # same, measured tokens per round
    predicted_speedup: float  # target-only time / costmodel.predicted_run_ms
    verify_ms_from_curve: float  # target step × t(g+1)/t(1), mean over rounds (no curve: verify_ms)
    best_gamma: int  # maximises E[tokens] / (γc + t(γ+1)/t(1)) over the measured curve


@dataclass(frozen=True)
class RoundParts:
    """One speculative round split into its parts (ms, or % of the round)."""

    draft: float
    verify: float
    overhead: float


@dataclass(frozen=True)
class TargetOnlyParts:
    """Target-only decoding of as many tokens as a round advances (ms)."""

    target: float
    overhead: float


@dataclass(frozen=True)
class Breakdown:
    """A round next to target-only decoding of the same number of tokens."""

    tokens_per_round: float
    round: RoundParts
    target_only: TargetOnlyParts
    shares_pct: RoundParts


@dataclass(frozen=True)
class RunSpread:
    """The repeats of a pair of interleaved runs: each lane's ms per generated token
    (median, min, max, quartiles) and how the runs were measured."""

    ar_ms_per_token: Spread
    sp_ms_per_token: Spread
    how: HowMeasured


@dataclass(frozen=True)
class TimingFigures:
    """Where the step times come from and whether they support a conclusion.

    ``source``: ``curve`` (every step time -- target step, draft step, ``c``, the
    verification, the breakdown, the predictions, best γ -- is read off the one
    verify-cost curve: ``target_step_ms`` is its ``t(1)``) or ``runs`` (no curve: the
    runs' own forwards). ``busy`` / ``reasons``: :func:`timing.judge` over the runs'
    repeats, the curve's repeats and shape, and the target-only run's steady step against
    ``t(1)`` (``run_target_step_ms``)."""

    source: str
    busy: bool
    reasons: tuple[str, ...]
    run_target_step_ms: float  # the target-only run's own steady step (a check, not shown)
    target_step: Spread | None  # t(1)'s repeats (curve)
    draft_step: Spread | None
    ar_ms_per_token: Spread | None
    sp_ms_per_token: Spread | None
    runs_how: HowMeasured | None
    curve_how: HowMeasured | None


@dataclass(frozen=True)
class BenchSummary:
    """One target-only run against one speculative run of the same prompt and settings."""

    gamma: int
    autoregressive: AutoregressiveFigures
    speculative: SpeculativeFigures
    speedup: float  # speculative / target-only tokens/s
    cost_model: CostModelFigures
    breakdown: Breakdown
    greedy_equal: bool  # same output ids (meaningful at temperature 0)
    timing: TimingFigures | None = None  # spread, how measured, the "too busy" verdict

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class HFRun:
    """The median run of Hugging Face ``generate`` (with or without an assistant)."""

    tokens_per_s: float
    ms_per_token: float
    new_tokens: int
    output_ids: tuple[int, ...]
    target_forwards: int
    mean_accepted: float  # (new tokens − rounds) / rounds when assisted, else 0


@dataclass(frozen=True)
class HFFigures:
    """One HF run next to our target-only run."""

    tokens_per_s: float
    ms_per_token: float
    new_tokens: int
    target_forwards: int
    speedup: float  # over our target-only run
    equal_to_target: bool  # same ids over the common length
    mean_accepted: float | None = None  # assisted only
    speedup_over_hf_greedy: float | None = None  # assisted, when HF greedy ran

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in to_jsonable(self).items() if v is not None}


@dataclass(frozen=True)
class HFComparison:
    """Hugging Face's runs (either may be missing) next to ours."""

    greedy: HFFigures | None = None
    assisted: HFFigures | None = None

    def to_json(self) -> dict[str, Any]:
        runs = (("hf_greedy", self.greedy), ("hf_assisted", self.assisted))
        return {name: run.to_json() for name, run in runs if run is not None}


@dataclass(frozen=True)
class BenchReport:
    """``run_bench``: the settings, the summary and, where they ran, HF's figures."""

    pair: str
    device: str
    threads: int
    max_new_tokens: int
    temperature: float
    repeats: int
    drafter: str
    ignore_eos: bool
    summary: BenchSummary
    curve: ForwardCurve | None = None  # the target's t(k) and the draft step
    hf: HFComparison = HFComparison()
    hf_error: str | None = None  # assisted generation failed: "Type: message"

    def to_json(self) -> dict[str, Any]:
        """The ``bench`` JSON object: settings, the summary's blocks (no ``greedy_equal``
        when sampling), the verify-cost curve ``forward_ms_by_tokens`` ({k: ms}) and
        ``draft_step_ms``, ``hf_greedy`` / ``hf_assisted`` or ``hf_assisted_error``."""
        out: dict[str, Any] = {
            "pair": self.pair,
            "device": self.device,
            "threads": self.threads,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "repeats": self.repeats,
            "drafter": self.drafter,
            "ignore_eos": self.ignore_eos,
            **self.summary.to_json(),
        }
        if self.temperature != 0.0:
            del out["greedy_equal"]
        if self.curve is not None:
            out["forward_ms_by_tokens"] = {str(k): ms for k, ms in self.curve.by_tokens().items()}
            out["draft_step_ms"] = self.curve.draft_step_ms
        out.update(self.hf.to_json())
        if self.hf_error is not None:
            out["hf_assisted_error"] = self.hf_error
        return out


@dataclass(frozen=True)
class GammaPoint:
    """One point of the γ sweep: measured speed-up next to the cost model's predictions;
    ``ar_ms_per_token`` / ``sp_ms_per_token``: each lane's ms per token over the repeats
    (``None`` where the runs' repeats were not recorded)."""

    gamma: int
    speculative_tokens_per_s: float
    autoregressive_tokens_per_s: float
    speedup: float
    alpha: float
    mean_accepted: float
    c: float
    leviathan_speedup: float
    forward_time_speedup: float
    forward_time_speedup_measured_advance: float
    greedy_equal: bool
    ar_ms_per_token: Spread | None = None
    sp_ms_per_token: Spread | None = None

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class BatchPoint:
    """One point of the batch-size sweep (tokens/s summed over the ``batch_size`` prompts)."""

    batch_size: int
    batched_autoregressive_tokens_per_s: float
    sequential_speculative_tokens_per_s: float
    sequential_autoregressive_tokens_per_s: float

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)
