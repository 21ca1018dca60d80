"""Lessons chapter 5's measurement: a higher acceptance rate is not always faster.

Three variants, greedy, :data:`TOKENS` tokens each on the fast path (end-of-text ignored):
the target alone, the pair's draft model, and the target as its own draft (α = 1, but each
draft costs a target step). The speed page's rules apply: one untimed warm-up run of each
variant first (the first run of a cold process was 131 ms/token against 10.5 after), the
variants interleaved and repeated, each time a median (min–max), ONE measured target step
feeding every ``c``, and no conclusion when the repeats disagree (``bench.judge``).

In parts, so the server's measurement queue can run it off the page's thread with
progress, a time budget and Cancel (``server/long_tasks.py``): :func:`warm_up`, then one
:func:`run_pass` per repeat, then :func:`assemble`; :func:`measure` does all three.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdec_core.bench.bounded import Budget, Clock, conclusive
from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.timing import HowMeasured, Spread, Verdict, judge
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import ModelDrafter, make_model_drafter
from specdec_core.engine.chain.generate import GenerationStats, generate
from specdec_core.lessons.prompts import prompts_for
from specdec_core.rules.costmodel import walltime_improvement

TOKENS, GAMMA = 32, 4
REPEATS = 3  # timed runs of each variant, interleaved, after one warm-up run of each
BUDGET_S = 30.0  # the chapter's measurement stops after this much wall time (partial)
VARIANTS = ("alone", "model", "self")  # target alone; the pair's draft; the target as draft


@dataclass(frozen=True)
class SpeedRun:
    """Chapter 5's measurement: one row per variant (``name``, ``alpha`` (None alone),
    ``forwards`` (target forwards), ``ms_token`` (median ms per generated token),
    ``spread`` (:class:`Spread` of it), ``c`` (draft step / the one target step; None
    alone), ``predicted`` (Leviathan et al. 2023 Thm 3.8 with that ``c``)), the target
    step every ``c`` divides by (ms), how it was measured and the verdict on the repeats.
    ``partial``: the time budget (``budget_s``) stopped it after ``how.repeats`` of
    ``planned`` passes."""

    rows: tuple[dict, ...]
    target_step_ms: float
    how: HowMeasured
    verdict: Verdict
    partial: bool = False
    budget_s: float | None = None
    planned: int = 0

    @property
    def conclusive(self) -> bool:
        """Whether the times support a conclusion (:func:`bench.bounded.conclusive`)."""
        return conclusive(self.verdict, self.how.repeats)


def _steady_step(stats: GenerationStats) -> float:
    """A target-only run's mean target forward after the prompt's (ms)."""
    n = stats.target_forwards - 1
    return (stats.target_forward_ms - stats.prefill_ms) / n if n > 0 else stats.target_forward_ms


def _once(pair: ModelPair, name: str) -> GenerationStats:
    config = SessionConfig(gamma=GAMMA, max_new_tokens=TOKENS)
    drafter = {
        "alone": lambda: None,
        "model": lambda: make_model_drafter(pair),
        "self": lambda: ModelDrafter(pair.target),
    }[name]()
    mode = "autoregressive" if drafter is None else "speculative"
    prompt = prompts_for(pair.name).scenarios[0]
    return generate(ignoring_eos(pair), prompt, config, mode=mode, drafter=drafter).stats  # type: ignore[arg-type]


def warm_up(pair: ModelPair) -> None:
    """Every variant once, untimed (full length: the cold process's first runs)."""
    for name in VARIANTS:
        _once(pair, name)


def run_pass(pair: ModelPair) -> dict[str, GenerationStats]:
    """One timed pass: each variant once, in :data:`VARIANTS` order."""
    return {name: _once(pair, name) for name in VARIANTS}


def assemble(
    passes: Sequence[Mapping[str, GenerationStats]],
    planned: int = REPEATS,
    budget_s: float | None = None,
) -> SpeedRun:
    """The chapter's table from the timed passes that ran.

    Step times: the target step is the target-alone runs' steady step (median over the
    passes); the draft model's step is its runs' mean draft forward (median); the target as
    its own draft steps with that same target step, so its ``c`` is exactly 1.

    Raises:
        ValueError: no pass ran.
    """
    if not passes:
        raise ValueError("no timing pass ran")
    runs = {name: [p[name] for p in passes] for name in VARIANTS}
    target_step = statistics.median(_steady_step(s) for s in runs["alone"])
    draft_step = statistics.median(
        s.draft_forward_ms / max(1, s.draft_forwards) for s in runs["model"]
    )
    steps = {"alone": None, "model": draft_step, "self": target_step}
    rows = []
    for name in VARIANTS:
        first = runs[name][0]
        spread = Spread.of([s.total_ms / max(1, s.new_tokens) for s in runs[name]])
        alpha = None if name == "alone" else first.acceptance_rate
        step = steps[name]
        c = None if step is None else (step / target_step if target_step > 0 else 0.0)
        rows.append(
            {
                "name": name,
                "alpha": alpha,
                "forwards": first.target_forwards,
                "ms_token": spread.median,
                "spread": spread,
                "c": c,
                "predicted": 1.0 if alpha is None else walltime_improvement(alpha, GAMMA, c or 0.0),
            }
        )
    verdict = judge([r["spread"] for r in rows])
    how = HowMeasured.now(len(passes), 1, TOKENS)
    return SpeedRun(
        tuple(rows), target_step, how, verdict, len(passes) < planned, budget_s, planned
    )


def measure(
    pair: ModelPair,
    repeats: int = REPEATS,
    budget_s: float | None = None,
    clock: Clock = time.monotonic,
) -> SpeedRun:
    """Warm-up, then up to ``repeats`` interleaved passes while the ``budget_s`` (wall
    seconds, None: unbounded; :class:`bench.bounded.Budget`) allows; the first timed pass
    always runs."""
    budget = Budget(budget_s, clock)
    budget.start()
    warm_up(pair)
    passes: list[dict[str, GenerationStats]] = []
    for k in range(max(1, repeats)):
        if k and not budget.allows(k + 1):  # the warm-up counts as one pass of the pace
            break
        passes.append(run_pass(pair))
    return assemble(passes, max(1, repeats), budget_s)
