"""Every lane of the README's speed table in one run: the target alone, each drafter as a
chain, EAGLE and the draft model at γ chosen by their acceptance and under the heuristic γ
schedule, trees 2,2,1,1, Hugging Face ``generate`` and assisted generation as peers;
greedy, plus the target alone, EAGLE and the draft model at T = 1.

    nice -n 10 python benchmarks/speed_lanes.py [--passes 3] [--prompts 4]
        [--max-new-tokens 128] [--gamma 4] [--threads 1] [--json OUT.json]

Each pass runs every lane once over the same held-out prompts (``measure_acceptance``'s,
end-of-text ignored so every run makes ``--max-new-tokens`` tokens), lanes interleaved, so
a burst of load on a shared machine hits them alike; per lane: tokens/s of the pass's
total over wall time and over this process's CPU time (one torch thread: the CPU time is
the work, nearly untouched by other processes' load), median over passes, the ratio to
the target alone of the same pass, and whether its greedy output equals the target
alone's on every prompt. The 1-minute load average is printed before and after; figures
are printed, never asserted.

"γ by acceptance" (``bench/sweeps.gamma_by_acceptance``): before the passes, one run on a
prompt outside the timed ones (``--gamma``, same temperature) measures the drafter's α,
the verify-cost curve (each timing's fastest of 9 repeats) its ``c`` and ``t(k)/t(1)``;
the lane runs at the γ maximising the cost model's tokens per unit of time (printed).
The draft model and EAGLE run on the reduced vocabulary their pair ships
(``drafters/draft_vocab.py``) and their default weights in every lane (the draft model
weight-only int8, EAGLE float32: ``core/int8_linear.py``); the "full" lanes run them on the
whole LM head, "model float32" and "eagle int8" on the other weights, each at its own γ by
acceptance (the comparisons).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from measure_acceptance import heldout_prompts  # noqa: E402

from specdec_core.bench.curve import ForwardCurve, measure_forward_curve
from specdec_core.bench.runs import hf_generate, ignoring_eos
from specdec_core.bench.sweeps import gamma_by_acceptance
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.eagle import make_eagle_drafter
from specdec_core.drafters.model import make_model_drafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate  # noqa: E402
from specdec_core.engine.tree.generate import generate_tree  # noqa: E402

TREE = (2, 2, 1, 1)


def fastest(curve: ForwardCurve) -> ForwardCurve:
    """The curve of each timing's fastest repeat (a busy shared machine only adds time)."""
    step = curve.draft_step_ms
    if curve.draft_spread is not None and curve.draft_spread.median > 0:
        step *= curve.draft_spread.low / curve.draft_spread.median
    return replace(curve, target_ms=tuple(s.low for s in curve.target_spread), draft_step_ms=step)


#: The drafters whose γ is chosen by acceptance: on the reduced vocabulary each ships with
#: (``drafters/draft_vocab.py``) and default weights, on the full head (``full``) and on
#: the other weights (``model float32``, ``eagle int8``): the comparisons.
CHOSEN = {
    "eagle": lambda pair: make_eagle_drafter(pair),
    "model": lambda pair: make_model_drafter(pair),
    "eagle full": lambda pair: make_eagle_drafter(pair, 0),
    "model full": lambda pair: make_model_drafter(pair, 0),
    "eagle int8": lambda pair: make_eagle_drafter(pair, int8=True),
    "model float32": lambda pair: make_model_drafter(pair, int8=False),
}


def chosen_gammas(pair, gamma: int, tokens: int, prompt: str) -> dict[tuple[str, float], int]:
    """(drafter, temperature) → γ chosen by its acceptance on ``prompt`` (printed)."""
    out = {}
    for drafter, make in CHOSEN.items():
        curve = fastest(measure_forward_curve(pair, prompt, 2 * 8 + 1, 9, make(pair), gamma))
        for temperature in (0.0, 1.0):
            config = SessionConfig(gamma=gamma, max_new_tokens=tokens, temperature=temperature)
            maker = lambda make=make: make(pair)  # noqa: E731
            chosen, alpha = gamma_by_acceptance(pair, prompt, config, maker, curve)
            c = curve.draft_step_ms / curve.target_ms[0]
            ratio = ", ".join(f"{r:.2f}" for r in curve.ratio()[:6])
            print(
                f"γ by acceptance: {drafter}, T = {temperature:g}: α {alpha:.3f}, c {c:.3f},"
                f" t(k)/t(1) {ratio} … → γ {chosen}"
            )
            out[drafter, temperature] = chosen
    return out


def lanes(
    pair, gamma: int, tokens: int, chosen: dict[tuple[str, float], int]
) -> dict[str, tuple[float, object]]:
    """Lane name → (temperature, ``run(prompt) -> output ids``); ``chosen``: the γ of the
    "γ by acceptance" lanes (:func:`chosen_gammas`)."""
    greedy = SessionConfig(gamma=gamma, max_new_tokens=tokens)
    sampled = SessionConfig(gamma=gamma, max_new_tokens=tokens, temperature=1.0, seed=0)
    heuristic = SessionConfig(gamma=gamma, max_new_tokens=tokens, gamma_schedule="heuristic")

    def chain(config, drafter=None):
        mode = "autoregressive" if drafter is None else "speculative"
        make = CHOSEN.get(drafter, lambda pair: make_named_drafter(pair, drafter))

        def run(prompt):
            made = None if drafter is None else make(pair)
            return generate(pair, prompt, config, mode, made).output_ids

        return run

    def tree(drafter):
        return lambda prompt: generate_tree(pair, prompt, greedy, TREE, drafter=drafter).output_ids

    def hf(assisted):
        def run(prompt):
            made = hf_generate(pair, prompt, gamma, tokens, 1, assisted, False, warmup=False)
            return list(made.output_ids)

        return run

    out: dict[str, tuple[float, object]] = {"target alone": (0.0, chain(greedy))}
    for name in ("model", "eagle", "mtp", "block", "ngram", "early-exit"):
        out[f"chain {name}"] = (0.0, chain(greedy, name))
    for name in CHOSEN:
        g = chosen[name, 0.0]
        out[f"chain {name}, γ {g} by acceptance"] = (0.0, chain(replace(greedy, gamma=g), name))
    out["chain eagle, heuristic γ"] = (0.0, chain(heuristic, "eagle"))
    out["chain model, heuristic γ"] = (0.0, chain(heuristic, "model"))
    for name in ("model", "eagle", "mtp"):
        out[f"tree {name}"] = (0.0, tree(name))
    out["HF generate"] = (0.0, hf(False))
    out["HF assisted"] = (0.0, hf(True))
    out["target alone, T = 1"] = (1.0, chain(sampled))
    out["chain eagle, T = 1"] = (1.0, chain(sampled, "eagle"))
    out["chain model, T = 1"] = (1.0, chain(sampled, "model"))
    for name in CHOSEN:
        g = chosen[name, 1.0]
        out[f"{name}, γ {g} by acceptance, T = 1"] = (1.0, chain(replace(sampled, gamma=g), name))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = ignoring_eos(load_pair("embedded", device="cpu"))
    prompts = heldout_prompts(args.prompts)
    probe = next(p for p in heldout_prompts(2 * args.prompts + 1) if p not in prompts)
    chosen = chosen_gammas(pair, args.gamma, args.max_new_tokens, probe)
    table = lanes(pair, args.gamma, args.max_new_tokens, chosen)
    load_before = os.getloadavg()[0]
    for _, run in table.values():  # warm-up: every code path once
        run(prompts[0])
    speed: dict[str, list[float]] = {name: [] for name in table}
    cpu_speed: dict[str, list[float]] = {name: [] for name in table}
    outputs: dict[str, list[list[int]]] = {}
    for _ in range(args.passes):
        for name, (_, run) in table.items():
            started, cpu, made = time.perf_counter(), time.process_time(), []
            for prompt in prompts:
                made.append(list(run(prompt)))
            seconds = time.perf_counter() - started
            speed[name].append(sum(map(len, made)) / seconds)
            cpu_speed[name].append(sum(map(len, made)) / (time.process_time() - cpu))
            outputs[name] = made
    load_after = os.getloadavg()[0]
    rows = []
    print(f"load (1 min) before {load_before:.1f}, after {load_after:.1f}; {os.cpu_count()} CPUs")
    print("wall: tokens per second of wall time; cpu: per second of this process's CPU time")
    print(
        f"{'lane':34} {'wall tok/s':>10} {'× alone (range)':>20} {'cpu tok/s':>10}"
        f" {'× alone':>8}  = alone"
    )
    for name, (temperature, _) in table.items():
        alone = "target alone" if temperature == 0 else "target alone, T = 1"
        ratios = [s / a for s, a in zip(speed[name], speed[alone], strict=True)]
        cpu_ratios = [s / a for s, a in zip(cpu_speed[name], cpu_speed[alone], strict=True)]
        same = outputs[name] == outputs["target alone"] if temperature == 0 else None
        row = {
            "lane": name,
            "tokens_per_s": statistics.median(speed[name]),
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "cpu_tokens_per_s": statistics.median(cpu_speed[name]),
            "cpu_ratio_median": statistics.median(cpu_ratios),
            "greedy_equal": same,
            "per_pass": speed[name],
            "cpu_per_pass": cpu_speed[name],
        }
        rows.append(row)
        shown = "—" if same is None else ("yes" if same else "NO")
        print(
            f"{name:34} {row['tokens_per_s']:10.0f} {row['ratio_median']:7.2f}× "
            f"({row['ratio_min']:.2f}–{row['ratio_max']:.2f}) {row['cpu_tokens_per_s']:10.0f} "
            f"{row['cpu_ratio_median']:7.2f}×  {shown}"
        )
    for clock, lanes_speed in (("wall", speed), ("cpu", cpu_speed)):
        pairs = zip(lanes_speed["chain model"], lanes_speed["HF assisted"], strict=True)
        assisted = statistics.median(m / h for m, h in pairs)
        print(f"draft model vs HF assisted (same γ and pair, {clock}): {assisted:.2f}×")
    if args.json:
        args.json.write_text(json.dumps({"load": [load_before, load_after], "lanes": rows}))


if __name__ == "__main__":
    main()
