"""How much the verify-cost curve moves on this machine: measure the curve
``t(k)``, ``k = 1 … 2γ + 1``, several times, and print for every ``k`` the spread of its
repeats within one curve (median, min, max, interquartile range as a fraction of the
median) and of ``t(k) / t(1)`` between curves, with each curve's verdict
(``bench.judge``: "too busy" when the repeats leave a median uncertain by more than
``BUSY_SPREAD`` or the
curve is not monotone) and the best γ each curve would give. Bounded: ``--curves`` ×
``--repeats`` × (2γ + 2) forwards of the embedded pair, after 2 warm-up passes each.

    python benchmarks/verify_curve_spread.py [--curves 3] [--repeats 11] [--gamma 4]
        [--alpha 0.7] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.bench.curve import measure_forward_curve
from specdec_core.bench.timing import BUSY_SPREAD
from specdec_core.core.models import load_pair
from specdec_core.rules.costmodel import best_gamma_on_curve

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curves", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.7, help="α for the best γ search")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    curves_n, repeats = max(1, min(args.curves, 20)), max(1, min(args.repeats, 51))
    torch.set_num_threads(args.threads)
    pair = load_pair("embedded")
    curves = [
        measure_forward_curve(pair, PROMPT, 2 * args.gamma + 1, repeats) for _ in range(curves_n)
    ]
    out = []
    for i, curve in enumerate(curves, start=1):
        verdict = curve.verdict()
        c = curve.draft_step_ms / curve.target_ms[0]
        out.append(
            {
                "curve": i,
                "busy": verdict.busy,
                "reasons": list(verdict.reasons),
                "best_gamma": best_gamma_on_curve(args.alpha, c, curve.by_tokens()),
                "load": curve.how.load if curve.how else None,
                "k": [
                    {
                        "k": k,
                        "median_ms": s.median,
                        "min_ms": s.low,
                        "max_ms": s.high,
                        "rel_iqr": s.rel_iqr,
                        "ratio": curve.ratio()[k - 1],
                    }
                    for k, s in enumerate(curve.target_spread, start=1)
                ],
                "draft": None
                if curve.draft_spread is None
                else {
                    "median_ms": curve.draft_spread.median,
                    "min_ms": curve.draft_spread.low,
                    "max_ms": curve.draft_spread.high,
                    "rel_iqr": curve.draft_spread.rel_iqr,
                },
            }
        )
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"embedded pair, {curves_n} curves × {repeats} repeats, k = 1…{2 * args.gamma + 1}, "
        f"{args.threads} threads; busy when SE(median)/median > {BUSY_SPREAD:.0%}"
    )
    for row in out:
        why = ", ".join(row["reasons"]) or "—"
        print(
            f"\ncurve {row['curve']}: load {row['load']}, verdict "
            f"{'TOO BUSY (' + why + ')' if row['busy'] else 'ok'}, "
            f"best γ at α = {args.alpha}: {row['best_gamma']}"
        )
        print("| k | median ms | min | max | IQR/median | t(k)/t(1) |")
        print("|---|---|---|---|---|---|")
        for r in row["k"]:
            print(
                f"| {r['k']} | {r['median_ms']:.3f} | {r['min_ms']:.3f} | {r['max_ms']:.3f} "
                f"| {r['rel_iqr']:.0%} | {r['ratio']:.2f} |"
            )
        d = row["draft"]
        if d:
            print(
                f"| draft | {d['median_ms']:.3f} | {d['min_ms']:.3f} | {d['max_ms']:.3f} "
                f"| {d['rel_iqr']:.0%} | |"
            )
    if curves_n > 1:
        print("\nbetween curves, t(k)/t(1): median [min – max]")
        for k in range(len(curves[0].target_ms)):
            ratios = [c.ratio()[k] for c in curves if k < len(c.target_ms)]
            print(
                f"  k = {k + 1}: {statistics.median(ratios):.2f} "
                f"[{min(ratios):.2f} – {max(ratios):.2f}]"
            )
        print(f"  best γ per curve: {[r['best_gamma'] for r in out]}")


if __name__ == "__main__":
    main()
