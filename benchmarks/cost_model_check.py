"""Does the cost model predict what happened? For each drafter (draft model, prompt
lookup, early exit) × γ ∈ {1, 2, 4} on the embedded pair, one benchmark run (target-only
and speculative interleaved, median of ``--repeats``) plus the verify-cost curve, then a
table of predicted vs measured tokens per round and speed-up, with the relative error.

    python benchmarks/cost_model_check.py [--max-new-tokens 64] [--repeats 3] [--json OUT]

Prompt lookup runs on a repetitive prompt (the first of ``scenarios.REPETITIVE``), the others on a
plain one. Predictions use measured inputs only: α and the drafts each round proposed
(expected tokens per round), the target-only cost per token, the draft forwards and the
non-forward overhead per round from the run, and the verification cost read off the
curve ``t(g + 1) / t(1)``. Printed, never asserted: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.bench import run_bench  # noqa: E402
from specdec_core.core.models import load_pair
from specdec_core.lessons.scenarios import REPETITIVE

PLAIN = "First Citizen:\nWe are"
DRAFTERS = ("model", "ngram", "early-exit")
GAMMAS = (1, 2, 4)


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    pair = load_pair("embedded")
    rows = []
    head = (
        f"{'drafter':<11}{'γ':>2} {'α':>5} {'drafts':>6} {'E[tok]':>7} {'tok':>6} "
        f"{'err':>6} {'pred×':>6} {'meas×':>6} {'err':>6}  t(γ+1)/t(1)"
    )
    print(head)
    print("-" * len(head))
    for drafter in DRAFTERS:
        prompt = REPETITIVE[0] if drafter == "ngram" else PLAIN
        for gamma in GAMMAS:
            report = run_bench(
                pair, prompt, gamma, args.max_new_tokens, args.repeats, hf=False, drafter=drafter
            )
            s = report.summary
            cm, sp = s.cost_model, s.speculative
            ratio = report.curve.ratio()[gamma] if report.curve else float("nan")
            row = dict(
                drafter=drafter,
                gamma=gamma,
                alpha=cm.alpha,
                drafts=sp.drafts_per_round,
                pred_tokens=cm.expected_tokens_per_round,
                tokens=cm.measured_tokens_per_round,
                pred_speedup=cm.predicted_speedup,
                speedup=s.speedup,
                verify_ratio=ratio,
                busy=list(s.timing.reasons) if s.timing else [],
            )
            rows.append(row)
            e_tok = err(row["pred_tokens"], row["tokens"])
            e_sp = err(row["pred_speedup"], row["speedup"])
            flag = "" if abs(e_tok) <= 10 and abs(e_sp) <= 10 else "  > 10 %"
            if row["busy"]:  # the timings do not support a conclusion (bench.timing.judge)
                flag += "  too busy: " + ",".join(row["busy"])
            print(
                f"{drafter:<11}{gamma:>2} {cm.alpha:>5.2f} {sp.drafts_per_round:>6.2f} "
                f"{row['pred_tokens']:>7.2f} {row['tokens']:>6.2f} {e_tok:>+5.1f}% "
                f"{row['pred_speedup']:>6.2f} {row['speedup']:>6.2f} {e_sp:>+5.1f}%  "
                f"{ratio:.2f}{flag}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
