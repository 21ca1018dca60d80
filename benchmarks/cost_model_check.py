"""Does the cost model predict what happened? For each drafter (draft model, prompt lookup,
early exit, EAGLE head, MTP heads, block drafter) × γ on the embedded pair, one benchmark
run (target-only and speculative interleaved, median of ``--repeats``) plus the
verify-cost curve; the whole set is run ``--passes`` times, drafter after drafter, so a
burst of load hits every drafter alike. Then a table per drafter: predicted vs measured
speed-up (the median over passes and the range), and where an error comes from -- rounds
(predicted from the per-position rates α_n vs run), the drafting and the verification per
round (priced vs measured inside the run) -- with the load the passes ran under; last, the
median over drafters of each drafter's median |error| (and the largest).

    python benchmarks/cost_model_check.py [--drafters model,block] [--gammas 4]
        [--passes 3] [--max-new-tokens 128] [--repeats 3] [--threads 1]
        [--prompt check|lesson] [--device cpu] [--clock wall|cpu] [--json OUT]

``--prompt check`` (default): every drafter on the device check's speed prompt
(``bench/check_speed.SPEED_PROMPT``), as ``python -m specdec_core check`` prices them;
``lesson``: prompt lookup on a repetitive prompt (the first of ``scenarios.REPETITIVE``),
the others on a plain one. Predictions use measured inputs only: the per-position rates
α_n and the drafts each round proposed (expected tokens per round), the target-only run's
time, each drafter's round priced by what it runs as measured in a round
(``costmodel.draft_round_ms``: serial steps, one block forward, head evaluations, the
lookup), the run's non-forward overhead per round, and the verification at ``t(g + 1)``
off the curve at a round's level (averaged over the rounds' draft counts). Printed,
never asserted: timings on a shared machine are noisy (a pass the timing verdict calls
"too busy" is marked).

``--clock cpu`` (a diagnostic for a busy machine): every ``time.perf_counter`` reading in
this process is this thread's CPU time (``time.thread_time``), so the time the process
waits for a core while others run does not count, in the runs or in the curve; with one
torch thread every forward runs on this thread. The speed-ups are then compute-only (cache
contention from other processes still counts): they test the pricing, not the wall
clock a user sees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specdec_core.bench.check_speed import SPEED_PROMPT  # noqa: E402
from specdec_core.bench.curve import CURVE_REPEATS, measure_forward_curve  # noqa: E402
from specdec_core.bench.runs import ignoring_eos, measure_pair_runs  # noqa: E402
from specdec_core.bench.summary import summarize  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.registry import drafters_for  # noqa: E402
from specdec_core.lessons.scenarios import REPETITIVE  # noqa: E402

PLAIN = "First Citizen:\nWe are"


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def one(pair, drafter: str, gamma: int, tokens: int, repeats: int, prompt: str) -> dict:
    """One benchmark of ``drafter`` at ``gamma`` (what ``run_bench`` runs, without the HF
    lanes): the figures the table needs; ms per round priced by the cost model at the
    runs' load, and measured inside the run (the verification after the first round)."""
    if prompt == "lesson":
        text = REPETITIVE[0] if drafter == "ngram" else PLAIN
    else:
        text = SPEED_PROMPT
    config = SessionConfig(gamma=gamma, temperature=0.0, max_new_tokens=tokens)
    runs = measure_pair_runs(ignoring_eos(pair), text, config, repeats, drafter)
    curve = measure_forward_curve(
        pair, text, 2 * gamma + 1, max(CURVE_REPEATS, repeats), drafter, new_tokens=tokens
    )
    s = summarize(runs.autoregressive, runs.speculative, gamma, curve, runs.spread)
    cm, st = s.cost_model, runs.speculative.stats
    load = s.timing.run_target_step_ms / cm.target_step_ms if cm.target_step_ms else 1.0
    return dict(
        drafter=drafter,
        gamma=gamma,
        alpha=cm.alpha,
        drafts=s.speculative.drafts_per_round,
        pred_tokens=cm.expected_tokens_per_round,
        tokens=cm.measured_tokens_per_round,
        pred_rounds=st.new_tokens / cm.expected_tokens_per_round,
        rounds=st.rounds,
        pred_speedup=cm.predicted_speedup,
        speedup=s.speedup,
        err_speedup=err(cm.predicted_speedup, s.speedup),
        draft_ms_priced=s.breakdown.round.draft * load,
        draft_ms_measured=(st.draft_ms if curve.draft_cost == "none" else st.draft_forward_ms)
        / st.rounds,  # the lookup is the drafting phase itself
        verify_ms_priced=cm.verify_ms * load,
        verify_ms_measured=(st.target_forward_ms - st.prefill_ms) / max(1, st.target_forwards - 1),
        load_1min=curve.how.load if curve.how else None,
        busy=list(s.timing.reasons) if s.timing else [],
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drafters", default="", help="comma-separated (default: every one)")
    ap.add_argument("--gammas", default="4", help="comma-separated, e.g. 1,2,4")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--prompt", choices=("check", "lesson"), default="check")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: CUDA when present)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args(argv)
    if args.clock == "cpu":  # the module docstring: a diagnostic, compute time only
        time.perf_counter = time.thread_time
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair("embedded", device=args.device)
    drafters = args.drafters.split(",") if args.drafters else list(drafters_for(pair))
    gammas = [int(g) for g in args.gammas.split(",")]
    runs: dict[tuple[str, int], list[dict]] = {}
    for p in range(args.passes):
        for gamma in gammas:
            for drafter in drafters:
                row = one(pair, drafter, gamma, args.max_new_tokens, args.repeats, args.prompt)
                runs.setdefault((drafter, gamma), []).append(row)
                busy = "  too busy: " + ",".join(row["busy"]) if row["busy"] else ""
                print(
                    f"pass {p + 1} {drafter:<11}γ{gamma} meas {row['speedup']:.3f}× "
                    f"pred {row['pred_speedup']:.3f}× ({row['err_speedup']:+.1f}%) "
                    f"load {row['load_1min']}{busy}",
                    file=sys.stderr,
                    flush=True,
                )
    loads = [r["load_1min"] for rows in runs.values() for r in rows if r["load_1min"] is not None]
    load = f", 1-min load {min(loads):.2f}-{max(loads):.2f}" if loads else ""
    print(
        f"{pair.device_label()}, {torch.get_num_threads()} thread(s), {args.passes} passes, "
        f"{args.max_new_tokens} tokens, prompt {args.prompt}, {args.clock} clock{load}"
    )
    head = (
        f"{'drafter':<11}{'γ':>2} {'α':>5} {'rounds':>11} {'pred×':>6} {'meas×':>6} "
        f"{'err (median)':>13} {'err range':>16}  {'draft ms':>11}  {'verify ms':>11}"
    )
    print(head + "\n" + f"{'':<19}{'pred/run':>11}{'':<46}{'priced/run':>13}{'priced/run':>13}")
    print("-" * len(head))
    table = []
    for (drafter, gamma), rows in runs.items():
        med = {
            k: statistics.median(r[k] for r in rows)
            for k in rows[0]
            if k not in ("drafter", "gamma", "busy", "load_1min")
        }
        errs = [r["err_speedup"] for r in rows]
        table.append(dict(drafter=drafter, gamma=gamma, median=med, errors=errs, runs=rows))
        flag = "" if abs(med["err_speedup"]) <= 10 else "  > 10 %"
        print(
            f"{drafter:<11}{gamma:>2} {med['alpha']:>5.2f} "
            f"{med['pred_rounds']:>5.1f}/{med['rounds']:<5.0f} "
            f"{med['pred_speedup']:>6.2f} {med['speedup']:>6.2f} "
            f"{med['err_speedup']:>+12.1f}% {min(errs):>+7.1f}..{max(errs):>+6.1f}%  "
            f"{med['draft_ms_priced']:>5.2f}/{med['draft_ms_measured']:<5.2f}  "
            f"{med['verify_ms_priced']:>5.2f}/{med['verify_ms_measured']:<5.2f}{flag}",
            flush=True,
        )
    worst = [abs(row["median"]["err_speedup"]) for row in table]
    within = sum(w <= 10 for w in worst)
    print(
        "|error| of the predicted speed-up, per drafter's median: "
        f"median {statistics.median(worst):.1f} %, largest {max(worst):.1f} %; "
        f"{within} of {len(worst)} within 10 %"
    )
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
