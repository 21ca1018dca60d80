"""The lessons' and the drafters page's long measurements as jobs of the measurement queue
(``server/jobs.py``): Lessons chapter 5's timed run (``lesson5``) and every draft source on
two prompts (``sources``). Each is cut into tasks (a warm-up, then one timed pass per
task), so the queue shows progress, cancels between tasks, and stops at the job's time
budget with the passes that ran (:class:`specdec_core.bench.bounded.Budget`); the result
is labelled partial then.

Like ``tasks.py`` this module runs in the worker process too: a job travels as its
picklable fields, the plan is rebuilt from them, a task's output goes into ``job.out``.
"""

from __future__ import annotations

from specdec_core.bench import lesson_speed
from specdec_core.bench.source_compare import assemble, plan_sources, run_pass, warm_up
from specdec_core.core.errors import BusyError
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig

KINDS = ("lesson5", "sources")
SOURCES_BUDGET_S = 30.0  # "compare every source": every part of it within this wall time


def lesson_tasks(repeats: int = lesson_speed.REPEATS) -> list[tuple]:
    """Chapter 5's tasks: the warm-up, then one per timed pass."""
    return [("c5_warm", 0)] + [("c5_pass", i) for i in range(max(1, repeats))]


def source_extra(
    names: tuple[str, ...], prompts: dict[str, str], temperatures: tuple[float, ...]
) -> dict:
    """What a ``sources`` job carries besides its config and repeats (picklable)."""
    return {"names": tuple(names), "prompts": dict(prompts), "temperatures": tuple(temperatures)}


def source_plan(pair: ModelPair, config: SessionConfig, repeats: int, extra: dict):
    """The job's :class:`~specdec_core.bench.source_compare.SourcePlan` (validated:
    raises what :func:`plan_sources` raises)."""
    return plan_sources(
        pair, config, extra["names"], extra["prompts"], extra["temperatures"], repeats
    )


def source_tasks(pair: ModelPair, config: SessionConfig, repeats: int, extra: dict) -> list:
    """The comparison's tasks: the warm-up, then one per (repeat, setting) pass."""
    plan = source_plan(pair, config, repeats, extra)
    return [("src_warm", 0)] + [("src_pass", p) for p in plan.passes]


def run(job, task: tuple) -> None:
    """Run one task of a ``lesson5`` or ``sources`` job and store its output."""
    name, arg = task
    if name == "c5_warm":
        lesson_speed.warm_up(job.pair)
    elif name == "c5_pass":
        job.out[("c5", arg)] = lesson_speed.run_pass(job.pair)
    else:
        plan = source_plan(job.pair, job.config, job.repeats, job.extra)
        if name == "src_warm":
            warm_up(job.pair, plan)
        else:
            job.out[("src", *arg)] = run_pass(job.pair, plan, arg[1])


def finish(job) -> None:
    """``job.result`` from the passes that ran (partial when the budget stopped it).

    Raises:
        BusyError: ``budget_none`` -- not one timed pass fitted in the budget.
    """
    if job.kind == "lesson5":
        passes = [job.out[k] for k in sorted(k for k in job.out if k[0] == "c5")]
        if passes:
            job.result = lesson_speed.assemble(passes, job.repeats, job.budget_s)
    else:
        plan = source_plan(job.pair, job.config, job.repeats, job.extra)
        passes = {k[1:]: v for k, v in job.out.items() if k[0] == "src"}
        if passes:
            job.result = assemble(plan, passes, job.budget_s)
    if job.result is None:
        raise BusyError(
            "the time budget ran out before one timed pass",
            "budget_none",
            budget=f"{job.budget_s or 0:.0f}",
        )
