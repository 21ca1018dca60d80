"""Benchmark: target-only autoregressive vs speculative decoding (and Hugging Face
assisted generation) on one pair, greedy by default. Used by ``python -m specdec_core
bench``, ``benchmarks/bench_pairs.py`` and the speed page (which calls the pieces one at a
time, through ``server/jobs.py``, so it can show progress and stop between them).

- ``results``: the frozen result types, and their JSON form (``to_json``);
- ``runs``: timed runs (:func:`measure_pair`, :func:`hf_generate`);
- ``summary``: figures from runs (:func:`summarize`);
- ``report``: Hugging Face's figures next to ours (:func:`compare_hf`) and
  :func:`run_bench`, the whole benchmark;
- ``curve``: the verify-cost curve ``t(k)`` and the draft step (:func:`measure_forward_curve`);
- ``timing``: the spread of repeats, how a timing was measured, and whether the timings
  support a conclusion (:func:`judge`: "this machine is too busy to measure this now");
- ``sweeps``: the γ and batch-size sweeps.
"""

from specdec_core.bench.curve import MAX_K, ForwardCurve, measure_forward_curve
from specdec_core.bench.report import compare_hf, run_bench
from specdec_core.bench.results import (
    AutoregressiveFigures,
    BatchPoint,
    BenchReport,
    BenchSummary,
    Breakdown,
    CostModelFigures,
    GammaPoint,
    HFComparison,
    HFFigures,
    HFRun,
    RoundParts,
    RunSpread,
    SpeculativeFigures,
    TargetOnlyParts,
    TimingFigures,
)
from specdec_core.bench.runs import (
    PairRuns,
    hf_generate,
    ignoring_eos,
    measure_pair,
    measure_pair_runs,
)
from specdec_core.bench.summary import summarize
from specdec_core.bench.sweeps import (
    BENCH_PROMPTS,
    batch_crossover,
    batch_sweep_point,
    batched_throughput,
    best_point,
    gamma_sweep_point,
    sequential_throughput,
)
from specdec_core.bench.timing import (
    BUSY_SPREAD,
    MONOTONE_TOL,
    SAME_STEP_SPREAD,
    HowMeasured,
    Spread,
    Verdict,
    judge,
)

__all__ = [
    "AutoregressiveFigures",
    "BENCH_PROMPTS",
    "BUSY_SPREAD",
    "HowMeasured",
    "MONOTONE_TOL",
    "PairRuns",
    "SAME_STEP_SPREAD",
    "RunSpread",
    "Spread",
    "TimingFigures",
    "Verdict",
    "BatchPoint",
    "BenchReport",
    "BenchSummary",
    "Breakdown",
    "CostModelFigures",
    "ForwardCurve",
    "MAX_K",
    "GammaPoint",
    "HFComparison",
    "HFFigures",
    "HFRun",
    "RoundParts",
    "SpeculativeFigures",
    "TargetOnlyParts",
    "batch_crossover",
    "batch_sweep_point",
    "batched_throughput",
    "best_point",
    "compare_hf",
    "gamma_sweep_point",
    "hf_generate",
    "ignoring_eos",
    "judge",
    "measure_forward_curve",
    "measure_pair",
    "measure_pair_runs",
    "run_bench",
    "sequential_throughput",
    "summarize",
]
