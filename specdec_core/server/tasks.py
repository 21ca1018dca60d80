"""What one speed-page measurement is and does: its caps, the :class:`Job` (a list of
tasks, each a checkpoint for progress and cancellation), :func:`make_job`,
:func:`run_task` (engine calls only) and :func:`finish` (the :class:`Measurement` the page
shows). Where and when tasks run (one server-wide queue, a worker process) is ``jobs``;
the worker process imports this module to run a task.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specdec_core.bench import lesson_speed
from specdec_core.bench.curve import ForwardCurve, measure_forward_curve
from specdec_core.bench.report import compare_hf
from specdec_core.bench.results import BenchSummary, HFComparison
from specdec_core.bench.runs import hf_generate, ignoring_eos, measure_pair_runs
from specdec_core.bench.source_results import SOURCE_TEMPERATURES, source_prompts
from specdec_core.bench.summary import summarize
from specdec_core.bench.sweeps import BENCH_PROMPTS, batch_sweep_point, gamma_sweep_point
from specdec_core.core.errors import InputError
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.core.timeline import Timeline
from specdec_core.drafters.registry import DRAFTER_NAMES, DRAFTERS
from specdec_core.server import long_tasks

MAX_TOKENS = 256
MAX_REPEATS = 7
MAX_WORK = 768  # repeats × tokens of one measurement (e.g. 3 × 256 or 7 × 109)
GAMMAS = range(1, 9)
BATCHES = (1, 2, 4, 8)
CURVE_REPEATS = 11  # the verify-cost curve: k = 1 … 2γ + 1 ≤ 17 forwards, 1 + 11 times each


@dataclass(frozen=True)
class Measurement:
    """What a finished "measure" job shows: the settings it ran with (``Job.params``),
    the bench summary, HF's runs next to ours (or HF's error), both texts, the verify-cost
    curve and the two runs' timelines (target-only, speculative)."""

    params: dict
    summary: BenchSummary
    hf: HFComparison
    hf_error: str | None
    texts: tuple[str, str]  # target-only, speculative
    curve: ForwardCurve | None = None
    timelines: tuple[Timeline, Timeline] | None = None


@dataclass
class Job:
    """One measurement: ``kind`` is ``measure``, ``gamma`` or ``batch`` (the speed page),
    or ``lesson5`` / ``sources`` (``long_tasks``: made by :func:`lesson_job` /
    :func:`sources_job`). ``budget_s``: wall seconds the queue gives its tasks (None:
    unbounded); ``partial``: the budget stopped it before its last task; ``extra``: what a
    ``sources`` job compares (``long_tasks.source_extra``)."""

    kind: str
    owner: str  # session id
    pair: ModelPair
    prompt: str
    n: int
    repeats: int
    ignore_eos: bool
    with_hf: bool
    config: SessionConfig
    drafter: str = "model"
    tasks: list[tuple] = field(default_factory=list)
    total: int = 0
    done: int = 0
    state: str = "queued"  # queued, running, done, cancelled, failed
    error: BaseException | None = None
    out: dict = field(default_factory=dict)
    points: list = field(default_factory=list)  # GammaPoint / BatchPoint, as they finish
    result: object = None  # Measurement, SpeedRun or SourceComparison when done
    budget_s: float | None = None
    partial: bool = False
    extra: dict = field(default_factory=dict)
    started: float | None = None  # the queue's clock when its first task started

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled", "failed")

    def params(self) -> dict:
        return {
            "prompt": self.prompt,
            "n": self.n,
            "repeats": self.repeats,
            "ignore_eos": self.ignore_eos,
            "hf": self.with_hf,
            "config": self.config,
            "pair": self.pair.name,
            "device": self.pair.device_label(),
            "threads": None,
            "drafter": self.drafter,
        }


def check_work(n: object, repeats: object) -> tuple[int, int]:
    """Tokens and repeats as ints within the server's caps.

    Raises:
        InputError: ``bad_value`` or ``too_much_work``.
    """
    n_ = whole_number(n, 1, MAX_TOKENS, "tokens")
    r_ = whole_number(repeats, 1, MAX_REPEATS, "repeats")
    if n_ * r_ > MAX_WORK:
        raise InputError(
            f"repeats × tokens = {n_ * r_} exceeds {MAX_WORK}",
            "too_much_work",
            work=n_ * r_,
            limit=MAX_WORK,
        )
    return n_, r_


def _unknown(what: str, value: object) -> InputError:
    """``bad_value`` for a name that is not one of the choices (``what``: ``drafter`` or
    ``kind``)."""
    noun = "measurement" if what == "kind" else what
    return InputError(
        f"unknown {noun} {value!r}",
        "bad_value",
        what=what,
        low=0,
        high=0,
        value=str(value)[:20],
    )


def make_job(
    kind: str,
    owner: str,
    pair: ModelPair,
    prompt: str,
    n: object,
    repeats: object,
    ignore_eos: bool,
    with_hf: bool,
    config: SessionConfig,
    drafter: str = "model",
) -> Job:
    """A job of ``kind`` (``measure``: one pair of runs + the verify-cost curve + HF's runs
    when asked, greedy and the draft model only; ``gamma``: the γ sweep; ``batch``).

    Raises:
        InputError: bad tokens/repeats/drafter/kind, too much work.
    """
    n_, r_ = check_work(n, repeats)
    if drafter not in DRAFTER_NAMES:
        raise _unknown("drafter", drafter)
    cfg = replace(config, max_new_tokens=n_)
    hf = bool(with_hf) and cfg.temperature == 0.0 and DRAFTERS[drafter].hf_assisted
    job = Job(kind, owner, pair, prompt, n_, r_, bool(ignore_eos), hf, cfg, drafter)
    if kind == "measure":
        hf_tasks = [("hf", False), ("hf", True)] if hf else []
        job.tasks = [("pair", cfg.gamma), ("curve", cfg.gamma)] + hf_tasks
    elif kind == "gamma":
        job.tasks = [("pair", g) for g in GAMMAS]
    elif kind == "batch":
        job.tasks = [("batch", b) for b in BATCHES]
    else:
        raise _unknown("kind", kind)
    job.total = len(job.tasks)
    return job


def lesson_job(owner: str, pair: ModelPair) -> Job:
    """Lessons chapter 5's measurement (:mod:`specdec_core.bench.lesson_speed`), bounded
    by its ``BUDGET_S``."""
    config = SessionConfig(gamma=lesson_speed.GAMMA, max_new_tokens=lesson_speed.TOKENS)
    job = Job(
        "lesson5", owner, pair, "", lesson_speed.TOKENS, lesson_speed.REPEATS, True, False, config
    )
    job.tasks, job.budget_s = long_tasks.lesson_tasks(job.repeats), lesson_speed.BUDGET_S
    job.total = len(job.tasks)
    return job


def sources_job(
    owner: str,
    pair: ModelPair,
    config: SessionConfig,
    names: tuple[str, ...],
    repeats: int,
    budget_s: float | None = long_tasks.SOURCES_BUDGET_S,
) -> Job:
    """Every source in ``names`` on both prompts, greedy and T = 1
    (:mod:`specdec_core.bench.source_compare`), bounded by ``budget_s``.

    Raises:
        ValueError: what the comparison's plan refuses (checked before anything runs).
    """
    extra = long_tasks.source_extra(names, source_prompts(pair.name), SOURCE_TEMPERATURES)
    job = Job("sources", owner, pair, "", config.max_new_tokens, repeats, True, False, config)
    job.extra, job.budget_s = extra, budget_s
    job.tasks = long_tasks.source_tasks(pair, config, repeats, extra)
    job.total = len(job.tasks)
    return job


def run_task(job: Job, task: tuple) -> None:
    """Run one task of ``job`` and store what it measured (engine calls only)."""
    if job.kind in long_tasks.KINDS:
        long_tasks.run(job, task)
        return
    timed = ignoring_eos(job.pair) if job.ignore_eos else job.pair
    name, arg = task
    if name == "pair":  # target-only and speculative, interleaved
        runs = measure_pair_runs(
            timed, job.prompt, replace(job.config, gamma=arg), job.repeats, job.drafter
        )
        ar, sp = runs.autoregressive, runs.speculative
        job.out["ar"], job.out[("sp", arg)] = ar, sp
        job.out[("spread", arg)] = runs.spread  # the repeats' spread, how they were measured
        if job.kind == "gamma":
            job.points.append(gamma_sweep_point(ar, sp, arg, runs.spread))
    elif name == "curve":  # bounded: k ≤ 2γ + 1 ≤ 17, CURVE_REPEATS each
        job.out["curve"] = measure_forward_curve(
            job.pair, job.prompt, 2 * arg + 1, CURVE_REPEATS, job.drafter, None, job.n
        )
    elif name == "hf":
        try:
            job.out[("hf", arg)] = hf_generate(
                job.pair,
                job.prompt,
                job.config.gamma,
                job.n,
                job.repeats,
                arg,
                stop_at_eos=not job.ignore_eos,
            )
        except Exception as exc:  # noqa: BLE001 - HF's own failure: report, keep ours
            job.out["hf_error"] = type(exc).__name__
    else:  # one point of the batch sweep: the engine's own function
        job.points.append(
            batch_sweep_point(job.pair, list(BENCH_PROMPTS[:arg]), job.config, job.repeats)
        )


def finish(job: Job) -> None:
    """``job.result`` from what its tasks stored."""
    if job.kind in long_tasks.KINDS:
        long_tasks.finish(job)
    elif job.kind == "measure":
        ar, sp = job.out["ar"], job.out[("sp", job.config.gamma)]
        curve = job.out.get("curve")
        lanes = (ar.timeline, sp.timeline)
        job.result = Measurement(
            params=job.params(),
            summary=summarize(
                ar, sp, job.config.gamma, curve, job.out.get(("spread", job.config.gamma))
            ),
            hf=compare_hf(ar, job.out.get(("hf", False)), job.out.get(("hf", True))),
            hf_error=job.out.get("hf_error"),
            texts=(ar.text, sp.text),
            curve=curve,
            timelines=lanes if lanes[0] is not None and lanes[1] is not None else None,
        )
