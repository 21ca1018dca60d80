"""Every draft source on a repetitive and a novel prompt, greedy and T = 1, measured in
parts under a time budget.

A comparison is a :class:`SourcePlan` (validated before anything runs), one untimed
warm-up (:func:`warm_up`), then timing passes: pass ``r`` of setting ``s`` runs the target
alone and every source once on that (prompt, temperature) (:func:`run_pass`), the passes
ordered repeat by repeat so that a burst of load hits one pass of all of them and a
budget that runs out leaves every setting measured once before any twice.
:func:`assemble` turns the passes that ran into a :class:`SourceComparison` (partial when
passes are missing). :func:`compare_sources` does it all in one call; the server's
measurement queue runs the same parts as tasks (``server/long_tasks.py``), one at a time,
so a page shows progress and can cancel between them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from specdec_core.bench.bounded import Budget, Clock
from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.source_results import (
    SOURCE_TEMPERATURES,
    SourceComparison,
    SourceTarget,
    source_prompts,
    source_row,
    steady_step,
)
from specdec_core.bench.timing import HowMeasured, Spread, judge
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import default_knob, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, generate

Progress = Callable[[int, int, str], None]
Step = Callable[[str], None]


@dataclass(frozen=True)
class SourcePlan:
    """What a comparison runs: ``names`` (sources), their ``knobs`` and ``gammas`` (the
    session's γ capped at :attr:`Drafter.max_gamma`), ``prompts`` (``(key, text)``),
    ``temperatures``, ``repeats`` (timing passes per setting) and ``config`` (γ, seed,
    ``max_new_tokens``, top-k/top-p; its temperature is replaced per setting)."""

    names: tuple[str, ...]
    knobs: tuple[int | None, ...]
    gammas: tuple[int, ...]
    prompts: tuple[tuple[str, str], ...]
    temperatures: tuple[float, ...]
    repeats: int
    config: SessionConfig

    @property
    def settings(self) -> tuple[tuple[str, float], ...]:
        """The ``(prompt key, temperature)`` pairs, prompt by prompt."""
        return tuple((key, temp) for key, _ in self.prompts for temp in self.temperatures)

    @property
    def passes(self) -> tuple[tuple[int, int], ...]:
        """Every timing pass as ``(repeat, setting index)``, repeat by repeat."""
        return tuple((r, s) for r in range(self.repeats) for s in range(len(self.settings)))

    def runs(self) -> int:
        """Generations in all: the warm-up's, then ``1 + len(names)`` per pass."""
        return 1 + len(self.names) + len(self.passes) * (1 + len(self.names))


def plan_sources(
    pair: ModelPair,
    config: SessionConfig,
    drafters: Sequence[str] | None = None,
    prompts: Mapping[str, str] | None = None,
    temperatures: Sequence[float] = SOURCE_TEMPERATURES,
    repeats: int = 3,
) -> SourcePlan:
    """The validated plan (arguments as :func:`compare_sources`).

    Raises:
        ValueError: no source, an unknown source, no prompt or no temperature.
            PromptError, ConfigError: bad prompt or settings.
    """
    names = tuple(drafters_for(pair) if drafters is None else drafters)
    prompts = dict(source_prompts(pair.name) if prompts is None else prompts)
    if not names:
        raise ValueError("choose at least one draft source to compare")
    if not prompts or not temperatures:
        raise ValueError("choose at least one prompt and one temperature")
    for temp in temperatures:
        replace(config, temperature=float(temp)).validate(pair.vocab_size)
    knobs = tuple(default_knob(pair, name) for name in names)
    gammas = []
    for name, knob in zip(names, knobs, strict=True):  # validates every name
        cap = make_named_drafter(pair, name, knob).max_gamma
        gammas.append(min(config.gamma, cap) if cap else config.gamma)
    for text in prompts.values():
        prompt_ids(pair, text)
    return SourcePlan(
        names,
        knobs,
        tuple(gammas),
        tuple(prompts.items()),
        tuple(float(x) for x in temperatures),
        max(1, int(repeats)),
        config,
    )


def _once(
    pair: ModelPair, plan: SourcePlan, setting: int, name: str | None, tokens: int | None = None
) -> tuple[GenerationResult, int | None]:
    """One generation (end-of-text ignored) and the MTP heads' evaluations (else None)."""
    key, temp = plan.settings[setting]
    cfg = replace(plan.config, temperature=temp).validate(pair.vocab_size)
    if tokens is not None:
        cfg = replace(cfg, max_new_tokens=tokens)
    ids = prompt_ids(pair, dict(plan.prompts)[key])
    timed = ignoring_eos(pair)
    if name is None:
        return generate(timed, ids, cfg, "autoregressive"), None
    i = plan.names.index(name)
    drafter = make_named_drafter(pair, name, plan.knobs[i])
    run = generate(timed, ids, replace(cfg, gamma=plan.gammas[i]), drafter=drafter)
    return run, getattr(drafter, "head_evaluations", None)


def warm_up(pair: ModelPair, plan: SourcePlan, step: Step | None = None) -> None:
    """A 2-token untimed run of the target and of each source on the first setting
    (``step(what)`` before each: ``"target"`` or a source name)."""
    for name in (None, *plan.names):
        if step is not None:
            step(name or "target")
        _once(pair, plan, 0, name, 2)


def run_pass(pair: ModelPair, plan: SourcePlan, setting: int, step: Step | None = None) -> dict:
    """One timing pass of setting ``setting``: the target alone, then every source.

    Returns:
        ``{"target": GenerationResult, "runs": {name: GenerationResult}, "heads": {name:
        int | None}}`` (picklable: the worker process sends it back).
    """
    if step is not None:
        step("target")
    target, _ = _once(pair, plan, setting, None)
    runs, heads = {}, {}
    for name in plan.names:
        if step is not None:
            step(name)
        runs[name], heads[name] = _once(pair, plan, setting, name)
    return {"target": target, "runs": runs, "heads": heads}


def assemble(
    plan: SourcePlan,
    passes: Mapping[tuple[int, int], dict],
    budget_s: float | None = None,
) -> SourceComparison:
    """The comparison from the passes that ran (``{(repeat, setting): run_pass(...)}``);
    partial when some of :attr:`SourcePlan.passes` are missing.

    Raises:
        ValueError: no pass ran.
    """
    if not passes:
        raise ValueError("no timing pass ran")
    targets, rows, shown = [], [], []
    for s, (key, temp) in enumerate(plan.settings):
        done = [passes[p] for p in plan.passes if p[1] == s and p in passes]
        if not done:
            continue
        shown.append(len(done))
        base = [d["target"] for d in done]
        step_ms = statistics.median(steady_step(r.stats) for r in base)
        per_token = [r.stats.total_ms / max(1, r.stats.new_tokens) for r in base]
        targets.append(
            SourceTarget(key, temp, base[0].stats.new_tokens, Spread.of(per_token), step_ms)
        )
        for name, knob, gamma in zip(plan.names, plan.knobs, plan.gammas, strict=True):
            measured = [d["runs"][name] for d in done]
            heads = done[0]["heads"][name]
            rows.append(source_row(key, temp, name, knob, gamma, measured, base, step_ms, heads))
    verdict = judge([t.ms_per_token for t in targets] + [r.ms_per_token for r in rows])
    keys = {t.prompt for t in targets}
    return SourceComparison(
        rows=tuple(rows),
        targets=tuple(targets),
        prompts=tuple((k, text) for k, text in plan.prompts if k in keys),
        gamma=plan.config.gamma,
        max_new_tokens=plan.config.max_new_tokens,
        seed=plan.config.seed,
        how=HowMeasured.now(min(shown), 1, plan.config.max_new_tokens),
        verdict=verdict,
        partial=len(passes) < len(plan.passes),
        budget_s=budget_s,
        planned=len(plan.passes),
        ran=len(passes),
    )


def compare_sources(
    pair: ModelPair,
    config: SessionConfig,
    drafters: Sequence[str] | None = None,
    prompts: Mapping[str, str] | None = None,
    temperatures: Sequence[float] = SOURCE_TEMPERATURES,
    repeats: int = 3,
    progress: Progress | None = None,
    budget_s: float | None = None,
    clock: Clock = time.monotonic,
) -> SourceComparison:
    """Every draft source on every prompt, greedy and sampled, with the cost model's
    prediction beside each measurement.

    Order: one untimed 2-token warm-up of the target and of each source; then ``repeats``
    timing passes of every (prompt, temperature), each running the target alone and then
    every source once (interleaved). End-of-text is ignored (every run makes exactly
    ``max_new_tokens`` tokens, :func:`bench.runs.ignoring_eos`).

    Args:
        pair: the loaded pair (read-only; every run gets a fresh drafter and caches).
        config: γ, seed, ``max_new_tokens``, top-k/top-p (its temperature is replaced by
            each of ``temperatures``).
        drafters: source names (default :func:`drafters.drafters_for`: every source the
            pair can run), each with its default knob; γ is capped at a source's
            :attr:`Drafter.max_gamma`.
        prompts: ``{key: text}`` (default: the pair's, :func:`source_prompts`).
        temperatures: default greedy and T = 1.
        repeats: timing passes (≥ 1).
        progress: ``progress(done, total, what)`` before each run (``what``: ``"target"``
            or a source name), then ``(total, total, "done")``.
        budget_s: wall seconds (None: unbounded); a pass starts only while
            :meth:`Budget.allows` it, and the result is then partial.
        clock: monotonic seconds (tests pass a fake one).

    Returns:
        :class:`SourceComparison`.

    Raises:
        ValueError: no source, an unknown source, no prompt or no temperature (checked
            before anything runs). PromptError, ConfigError: bad prompt or settings.
    """
    plan = plan_sources(pair, config, drafters, prompts, temperatures, repeats)
    total, done = plan.runs(), 0

    def step(what: str) -> None:
        nonlocal done
        if progress is not None:
            progress(done, total, what)
        done += 1

    budget = Budget(budget_s, clock)
    budget.start()
    warm_up(pair, plan, step)
    passes: dict[tuple[int, int], dict] = {}
    for k, (r, s) in enumerate(plan.passes):
        if k and not budget.allows(k + 1):  # the first pass always runs; the warm-up
            break  # counts as one pass of the pace
        passes[(r, s)] = run_pass(pair, plan, s, step)
    if progress is not None:
        progress(total, total, "done")
    return assemble(plan, passes, budget_s)
