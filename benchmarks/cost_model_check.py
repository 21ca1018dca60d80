"""Does the cost model predict what happened? For each drafter (draft model, prompt lookup,
early exit, EAGLE head, MTP heads, block drafter) × γ on the embedded pair, one benchmark
run (target-only and speculative interleaved, median of ``--repeats``) plus the
verify-cost curve; the whole set is run ``--passes`` times, drafter after drafter, so a
burst of load hits every drafter alike. Then a table of predicted vs measured tokens per
round and speed-up per drafter: the median over passes and the range.

    python benchmarks/cost_model_check.py [--drafters model,block] [--gammas 4]
        [--passes 3] [--max-new-tokens 64] [--repeats 3] [--threads 1] [--json OUT]

Prompt lookup runs on a repetitive prompt (the first of ``scenarios.REPETITIVE``), the
others on a plain one. Predictions use measured inputs only: α and the drafts each round
proposed (expected tokens per round), the target-only cost per token, each drafter's
round priced by what it runs (``costmodel.draft_round_ms``: serial steps, one block
forward, head evaluations, nothing), the non-forward overhead per round from the run, and
the verification at its measured cost ``t(g + 1)`` off the curve. Printed, never
asserted: timings on a shared machine are noisy (a pass the timing verdict calls "too
busy" is marked).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specdec_core.bench import run_bench  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.drafters.registry import drafters_for  # noqa: E402
from specdec_core.lessons.scenarios import REPETITIVE  # noqa: E402

PLAIN = "First Citizen:\nWe are"


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def one(pair, drafter: str, gamma: int, tokens: int, repeats: int) -> dict:
    """One benchmark of ``drafter`` at ``gamma``: the figures the table needs."""
    prompt = REPETITIVE[0] if drafter == "ngram" else PLAIN
    report = run_bench(pair, prompt, gamma, tokens, repeats, hf=False, drafter=drafter)
    s = report.summary
    cm, sp = s.cost_model, s.speculative
    return dict(
        drafter=drafter,
        gamma=gamma,
        alpha=cm.alpha,
        drafts=sp.drafts_per_round,
        pred_tokens=cm.expected_tokens_per_round,
        tokens=cm.measured_tokens_per_round,
        pred_speedup=cm.predicted_speedup,
        speedup=s.speedup,
        err_speedup=err(cm.predicted_speedup, s.speedup),
        draft_ms_priced=s.breakdown.round.draft,
        draft_ms_measured=sp.draft_forward_ms_per_round,
        verify_ratio=report.curve.ratio()[gamma] if report.curve else float("nan"),
        busy=list(s.timing.reasons) if s.timing else [],
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drafters", default="", help="comma-separated (default: every one)")
    ap.add_argument("--gammas", default="4", help="comma-separated, e.g. 1,2,4")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair("embedded")
    drafters = args.drafters.split(",") if args.drafters else list(drafters_for(pair))
    gammas = [int(g) for g in args.gammas.split(",")]
    runs: dict[tuple[str, int], list[dict]] = {}
    for p in range(args.passes):
        for gamma in gammas:
            for drafter in drafters:
                row = one(pair, drafter, gamma, args.max_new_tokens, args.repeats)
                runs.setdefault((drafter, gamma), []).append(row)
                busy = "  too busy: " + ",".join(row["busy"]) if row["busy"] else ""
                print(
                    f"pass {p + 1} {drafter:<11}γ{gamma} meas {row['speedup']:.3f}× "
                    f"pred {row['pred_speedup']:.3f}× ({row['err_speedup']:+.1f}%){busy}",
                    file=sys.stderr,
                    flush=True,
                )
    head = (
        f"{'drafter':<11}{'γ':>2} {'α':>5} {'E[tok]':>7} {'tok':>6} {'pred×':>6} {'meas×':>6} "
        f"{'err (median)':>13} {'err range':>16}  draft ms priced/measured"
    )
    print(f"{pair.device_label()}, {torch.get_num_threads()} thread(s), {args.passes} passes")
    print(head)
    print("-" * len(head))
    table = []
    for (drafter, gamma), rows in runs.items():
        med = {
            k: statistics.median(r[k] for r in rows)
            for k in rows[0]
            if k not in ("drafter", "gamma", "busy")
        }
        errs = [r["err_speedup"] for r in rows]
        table.append(dict(drafter=drafter, gamma=gamma, median=med, errors=errs, runs=rows))
        flag = "" if abs(med["err_speedup"]) <= 10 else "  > 10 %"
        print(
            f"{drafter:<11}{gamma:>2} {med['alpha']:>5.2f} {med['pred_tokens']:>7.2f} "
            f"{med['tokens']:>6.2f} {med['pred_speedup']:>6.2f} {med['speedup']:>6.2f} "
            f"{med['err_speedup']:>+12.1f}% {min(errs):>+7.1f}..{max(errs):>+6.1f}%  "
            f"{med['draft_ms_priced']:.2f} / {med['draft_ms_measured']:.2f}{flag}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
