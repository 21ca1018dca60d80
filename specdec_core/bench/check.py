"""The device check, ``python -m specdec_core check [--quick] [--json]``: on whatever
device is present (CUDA when available, else the CPU), the greedy-equality matrix and
the replay-equality cases (``bench/check_cases.py``), a short seeded χ² and the speed
table (``bench/check_speed.py``), as one screen or one JSON object naming the device.

A progress line per section goes to stderr. The exit status is 1 when any equality case
fails (skipped cases and the timings never fail the check; a χ² p-value below 10⁻³ is
flagged in the JSON and on screen). Imports neither Streamlit nor plotly: a GPU box
without them runs it. On an H200 the full check takes well under 3 minutes; ``--quick``
(one prompt, 24 tokens, a shorter χ² and speed table) is for a busy CPU.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
import transformers

from specdec_core.bench.check_cases import PROMPTS, CaseResult, all_cases
from specdec_core.bench.check_speed import SampledCheck, SpeedTable, sampled_check, speed_table
from specdec_core.core.models import ModelPair, load_pair
from specdec_core.core.trace_json import to_jsonable
from specdec_core.rules.costmodel import REFERENCE_DEVICES

T = TypeVar("T")


@dataclass(frozen=True)
class CheckPlan:
    """How much the check runs: prompts and tokens of the greedy matrix, χ² draws, speed
    table tokens and repeats, γ."""

    prompts: tuple[str, ...]
    max_new_tokens: int
    chi_n: int
    speed_tokens: int
    speed_repeats: int
    gamma: int = 4

    @classmethod
    def of(cls, quick: bool) -> CheckPlan:
        if quick:
            return cls(PROMPTS[:1], 24, 200, 32, 3)
        return cls(PROMPTS, 32, 600, 128, 3)


@dataclass(frozen=True)
class CheckReport:
    """Everything the check found (``to_json``: the ``check --json`` object)."""

    device: str  # "CPU" or "GPU: <name>" (ModelPair.device_label)
    device_type: str  # "cpu" | "cuda"
    software: dict[str, str]
    threads: int
    pair: str
    quick: bool
    cases: tuple[CaseResult, ...]
    sampled: SampledCheck | None
    speed: SpeedTable | None
    seconds: float
    errors: dict[str, str] = field(default_factory=dict)  # a measured section that broke

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if c.ok is False)

    @property
    def ok(self) -> bool:
        """Every equality case that ran holds (skipped ones do not count)."""
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        ran = [c for c in self.cases if c.ok is not None]
        return {
            "device": self.device,
            "device_type": self.device_type,
            "software": self.software,
            "threads": self.threads,
            "pair": self.pair,
            "quick": self.quick,
            "ok": self.ok,
            "passed": sum(1 for c in ran if c.ok),
            "failed": len(self.failed),
            "skipped": len(self.cases) - len(ran),
            "cases": [to_jsonable(c) for c in self.cases],
            "sampled": to_jsonable(self.sampled) if self.sampled else None,
            "speed": to_jsonable(self.speed) if self.speed else None,
            "reference": [to_jsonable(r) for r in REFERENCE_DEVICES],
            "errors": self.errors,
            "seconds": round(self.seconds, 1),
        }


def software() -> dict[str, str]:
    """Versions that decide the low bits: Python, torch, transformers, CUDA (when used)."""
    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
    return out


def _stderr(line: str) -> None:
    print(f"[check] {line}", file=sys.stderr, flush=True)


def run_check(
    pair: ModelPair | str | tuple[str, str] = "embedded",
    quick: bool = False,
    speed: bool = True,
    progress: Callable[[str], None] = _stderr,
) -> CheckReport:
    """Run every section on ``pair`` (loaded on the default device when a name).

    Raises:
        ModelLoadError: the pair cannot be loaded.
    """
    started = time.perf_counter()
    plan = CheckPlan.of(quick)
    progress(f"loading the pair {pair.name if isinstance(pair, ModelPair) else pair!r}")
    loaded = pair if isinstance(pair, ModelPair) else load_pair(pair)
    threads = torch.get_num_threads()
    progress(f"device: {loaded.device_label()}, torch {torch.__version__}, {threads} thread(s)")
    cases = all_cases(loaded, plan.prompts, plan.max_new_tokens, plan.gamma, progress)
    progress(f"sampled chi-square: {plan.chi_n} seeded runs at T = 1")
    errors: dict[str, str] = {}
    sampled = _guarded("sampled", errors, lambda: sampled_check(loaded, plan.chi_n, plan.gamma))
    table = None
    if speed:
        progress(
            f"speed table: {plan.speed_tokens} tokens, {plan.speed_repeats} interleaved repeats"
        )
        table = _guarded(
            "speed",
            errors,
            lambda: speed_table(
                loaded, plan.speed_tokens, plan.speed_repeats, plan.gamma, progress
            ),
        )
    return CheckReport(
        device=loaded.device_label(),
        device_type="cuda" if loaded.device.startswith("cuda") else "cpu",
        software=software(),
        threads=torch.get_num_threads(),
        pair=loaded.name,
        quick=quick,
        cases=tuple(cases),
        sampled=sampled,
        speed=table,
        seconds=time.perf_counter() - started,
        errors=errors,
    )


def _guarded(section: str, errors: dict[str, str], run: Callable[[], T]) -> T | None:
    """``run()``, or ``None`` with ``errors[section]`` set when it raises (a measured
    section that breaks on this device is reported, not a crash of the whole check)."""
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - reported in the JSON and on screen
        errors[section] = f"{type(exc).__name__}: {exc}"
        return None


def _mark(ok: bool | None) -> str:
    return {True: "ok  ", False: "FAIL", None: "skip"}[ok]


def screen(report: CheckReport) -> str:
    """The human summary: one line per case, the χ², the speed table and the reference."""
    lines = [
        f"SpecDec Lab device check: {report.device} ({report.device_type}), pair {report.pair}, "
        f"{report.threads} thread(s), " + ", ".join(f"{k} {v}" for k, v in report.software.items()),
        "",
    ]
    for section in ("greedy", "replay"):
        lines.append(
            {"greedy": "Greedy speculative == target alone", "replay": "Replay equality"}[section]
        )
        for c in report.cases:
            if c.section == section:
                lines.append(f"  {_mark(c.ok)} {c.name:<32} {c.detail}")
    s = report.sampled
    if s is not None:
        lines += [
            "",
            f"Sampled (T = 1, {s.n} seeds, first token vs p): chi2 = {s.statistic:.1f}, "
            f"dof {s.dof}, p = {s.p_value:.3g}  {'ok' if s.ok else 'LOW (< 1e-3)'}",
        ]
    t = report.speed
    if t is not None:
        lines += [
            "",
            f"Speed (greedy, gamma {t.gamma}, {t.max_new_tokens} tokens, median of {t.repeats}):",
        ]
        if t.rows:
            alone = t.rows[0].target_tokens_per_s
            lines.append(f"  target alone {alone:7.1f} tok/s, t(1) = {t.target_step_ms:.2f} ms")
        ratio = ", ".join(f"{r:.2f}" for r in t.verify_ratio[1:9])
        lines.append(f"  t(k)/t(1), k = 2..9: {ratio}")
        lines.append(
            f"  {'drafter':<11} {'tok/s':>7} {'speed-up':>8} {'predicted':>9} {'error':>7}"
        )
        for r in t.rows:
            busy = "  (too busy: " + ", ".join(r.busy) + ")" if r.busy else ""
            lines.append(
                f"  {r.drafter:<11} {r.tokens_per_s:7.1f} {r.speedup:7.2f}x "
                f"{r.predicted_speedup:8.2f}x {r.error_pct:+6.1f}%{busy}"
            )
    for ref in REFERENCE_DEVICES:
        ups = ", ".join(f"{d} {x:.2f}x" for d, x in ref.speedup)
        lines += [
            "",
            f"Reference {ref.device} ({ref.software}): target alone "
            f"{ref.target_tokens_per_s:.0f} tok/s, t(k)/t(1) {ref.verify_ratio[0]:.2f}-"
            f"{ref.verify_ratio[1]:.2f}, c = {ref.c:.2f}; {ups}",
        ]
    lines += [f"{section} did not run: {why}" for section, why in report.errors.items()]
    verdict = (
        "all equality cases hold" if report.ok else f"{len(report.failed)} equality case(s) FAIL"
    )
    lines += ["", f"{verdict} ({report.seconds:.0f} s)"]
    return "\n".join(lines)


def check_command(
    quick: bool, as_json: bool, speed: bool = True, pair: str | tuple[str, str] = "embedded"
) -> int:
    """The ``check`` subcommand: run, print (JSON or the screen) on stdout, exit status 0
    when every equality case holds, else 1."""
    report = run_check(pair, quick, speed)
    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(screen(report))
    return 0 if report.ok else 1
