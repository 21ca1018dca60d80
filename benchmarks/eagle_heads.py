"""EAGLE heads against each other in one interleaved run: the pair's shipped head and
candidate heads (folders saved by ``python -m specdec_core.training.eagle --out DIR``),
each float32 on the pair's reduced draft vocabularies, greedy and at T = 1, at fixed γ and
at the γ its acceptance chooses; embedded pair, held-out prompts (end-of-text ignored,
128 tokens).

    SPECDEC_TORCH_THREADS=1 nice -n 15 python benchmarks/eagle_heads.py DIR [DIR ...]
        [--passes 5 (0: α only)] [--prompts 4] [--gammas 3 4] [--alpha-prompts 100]

First each head's α in real runs, ``measure_acceptance``'s protocol: its
``--alpha-prompts`` held-out prompts, γ 4, 40 new tokens, seed = prompt index, greedy and
T = 1; α = mean Σ min(p, q) over all checked positions (``records.summarize``).

Per head, before the passes (``speed_lanes``' method, on a prompt outside the timed
ones): the verify-cost curve (each timing's fastest of 9 repeats) gives the head's draft
step in ms and ``c`` (over ``t(1)``); one run per temperature gives α and the γ the cost
model picks (``bench/sweeps.gamma_by_acceptance``). Lanes interleaved within each pass
(one untimed pass first; pass ``i`` seeds every lane alike); per lane: tokens per second
of this process's CPU time, median over passes, the ratio to the target alone of the same
pass and temperature, median (min–max), the mean α and drafts committed per round, and
(greedy) whether every output equals the target alone's; then each candidate against the
first head (the shipped one) at the same γ and at each one's chosen γ, paired by pass
(median, min–max, passes won). The 1-minute load is printed before and after. Printed,
never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from measure_acceptance import heldout_prompts  # noqa: E402
from speed_lanes import fastest  # noqa: E402

from specdec_core.bench.curve import measure_forward_curve  # noqa: E402
from specdec_core.bench.runs import ignoring_eos  # noqa: E402
from specdec_core.bench.sweeps import gamma_by_acceptance  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.eagle import make_eagle_drafter  # noqa: E402
from specdec_core.drafters.eagle_head import EagleHead, eagle_head_dir  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402
from specdec_core.engine.chain.records import summarize  # noqa: E402

TOKENS = 128


def acceptance(pair, heads: dict[str, EagleHead], count: int) -> None:
    """Print each head's pooled α over ``count`` held-out prompts, greedy and T = 1."""
    prompts = heldout_prompts(count)
    for name, head in heads.items():
        alphas = []
        for temperature in (0.0, 1.0):
            records = []
            for i, prompt in enumerate(prompts):
                config = SessionConfig(gamma=4, max_new_tokens=40, temperature=temperature, seed=i)
                drafter = make_eagle_drafter(pair, int8=False, head=head)
                records += generate(pair, prompt, config, "speculative", drafter).records
            s = summarize(records)
            alphas.append(f"α {s.acceptance_rate:.3f} ({s.mean_accepted:.2f} per round)")
        print(f"{name}, {len(prompts)} prompts, γ 4: greedy {alphas[0]}, T = 1 {alphas[1]}")


def profile(pair, heads: dict[str, EagleHead], prompt: str) -> dict[tuple[str, float], int]:
    """(head, temperature) → γ chosen by its acceptance; prints step ms, c, α."""
    chosen = {}
    for name, head in heads.items():
        make = lambda head=head: make_eagle_drafter(pair, int8=False, head=head)  # noqa: E731
        curve = fastest(measure_forward_curve(pair, prompt, 2 * 8 + 1, 9, make(), 4))
        params = sum(p.numel() for p in head.parameters())
        for temperature in (0.0, 1.0):
            config = SessionConfig(gamma=4, max_new_tokens=TOKENS, temperature=temperature)
            gamma, alpha = gamma_by_acceptance(pair, prompt, config, make, curve)
            c = curve.draft_step_ms / curve.target_ms[0]
            print(
                f"{name}: {params:,} parameters, step {curve.draft_step_ms:.3f} ms, t(1) "
                f"{curve.target_ms[0]:.3f} ms, c {c:.3f}; T = {temperature:g}: α {alpha:.3f}"
                f" → γ {gamma}"
            )
            chosen[name, temperature] = gamma
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("heads", type=Path, nargs="*", help="candidate head folders")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--gammas", type=int, nargs="+", default=[3, 4])
    parser.add_argument("--alpha-prompts", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = ignoring_eos(load_pair("embedded", device="cpu"))
    folders = [eagle_head_dir(pair), *args.heads]
    heads = {f"shipped ({folders[0].name})": EagleHead.load(folders[0])}
    heads |= {folder.name: EagleHead.load(folder) for folder in args.heads}
    for name, head in heads.items():
        if not head.config.matches(pair.target.config):
            parser.error(f"{name} was not trained for the embedded target")
    if args.alpha_prompts:
        acceptance(pair, heads, args.alpha_prompts)
    if not args.passes:  # α only
        return
    prompts = heldout_prompts(args.prompts)
    probe = next(p for p in heldout_prompts(2 * args.prompts + 1) if p not in prompts)
    chosen = profile(pair, heads, probe)
    lanes: dict[str, tuple[float, int, str | None]] = {}
    for temperature in (0.0, 1.0):
        lanes[f"target alone, T = {temperature:g}"] = (temperature, 1, None)
        for name in heads:
            for gamma in sorted({*args.gammas, chosen[name, temperature]}):
                lanes[f"{name} γ {gamma}, T = {temperature:g}"] = (temperature, gamma, name)
    print(f"load (1 min) before {os.getloadavg()[0]:.1f}")
    speed: dict[str, list[float]] = {label: [] for label in lanes}
    alpha: dict[str, list[float]] = {label: [] for label in lanes}
    per_round: dict[str, list[float]] = {label: [] for label in lanes}
    outputs: dict[str, list[list[int]]] = {}
    for done in range(args.passes + 1):
        for label, (temperature, gamma, name) in lanes.items():
            config = SessionConfig(
                gamma=gamma, max_new_tokens=TOKENS, temperature=temperature, seed=done
            )
            started, made = time.process_time(), []
            for prompt in prompts:
                drafter = None
                if name is not None:
                    drafter = make_eagle_drafter(pair, int8=False, head=heads[name])
                mode = "autoregressive" if drafter is None else "speculative"
                run = generate(pair, prompt, config, mode, drafter)
                made.append(run.output_ids)
                if drafter is not None:
                    alpha[label].append(run.stats.acceptance_rate)
                    per_round[label].append(run.stats.mean_accepted)
            if done:  # the first pass warms every path up
                speed[label].append(sum(map(len, made)) / (time.process_time() - started))
            outputs[label] = made
    print(f"load (1 min) after {os.getloadavg()[0]:.1f}")
    for label, (temperature, _, name) in lanes.items():
        alone = f"target alone, T = {temperature:g}"
        ratios = [s / a for s, a in zip(speed[label], speed[alone], strict=True)]
        about = ""
        if name is not None:
            same = "" if temperature else f", greedy = alone: {outputs[label] == outputs[alone]}"
            about = (
                f"  α {statistics.mean(alpha[label]):.3f}, "
                f"{statistics.mean(per_round[label]):.2f} committed per round{same}"
            )
        print(
            f"{label:34} {statistics.median(speed[label]):6.0f} CPU tok/s "
            f"{statistics.median(ratios):5.2f}× ({min(ratios):.2f}–{max(ratios):.2f}){about}"
        )
    base = next(iter(heads))
    for name in list(heads)[1:]:
        for temperature in (0.0, 1.0):
            pairs = [(g, g) for g in args.gammas]
            pairs.append((chosen[name, temperature], chosen[base, temperature]))
            for mine, theirs in dict.fromkeys(pairs):
                a = speed[f"{name} γ {mine}, T = {temperature:g}"]
                b = speed[f"{base} γ {theirs}, T = {temperature:g}"]
                r = [x / y for x, y in zip(a, b, strict=True)]
                print(
                    f"{name} γ {mine} / shipped γ {theirs}, T = {temperature:g}: "
                    f"{statistics.median(r):.3f}× ({min(r):.3f}–{max(r):.3f}), faster in "
                    f"{sum(x > 1 for x in r)} of {len(r)} passes"
                )


if __name__ == "__main__":
    main()
