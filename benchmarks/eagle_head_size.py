"""EAGLE's LM head size at T = 1: the drafter on the top 1,024 / 2,048 ids of its pair's
ranking and on the full head (``drafters/draft_vocab.py``), its default weights (float32;
``SPECDEC_DRAFT_WEIGHTS=int8``: int8, ``core/int8_linear.py``), fixed γ 3 / 4, against the
target alone at T = 1; plus the shipped drafter greedy (1,024) against the full head
greedy. Embedded pair, held-out prompts (end-of-text ignored, 128 tokens); the sampled
``N`` of ``draft_vocab.json`` (``eagle_sampled``) was chosen from it.

    SPECDEC_TORCH_THREADS=1 nice -n 15 python benchmarks/eagle_head_size.py [--passes 10]
        [--prompts 4]

Lanes interleaved within each pass (one untimed pass first; pass ``i`` seeds every lane
alike); per lane: tokens per second of this process's CPU time, median over passes, the
ratio to the target alone of the same pass and temperature, median (min–max), the mean
α and drafts committed per round; then each larger head against 1,024 at the same γ,
paired by pass (median, min–max, passes won). The 1-minute load is printed before and
after. Printed, never asserted.
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

from specdec_core.bench.runs import ignoring_eos  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.eagle import make_eagle_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402

#: label → (temperature, γ, N: ``None`` the target alone, 0 the full head).
LANES = {"target alone, T = 1": (1.0, 1, None)}
LANES |= {f"EAGLE N {n or 4096} γ {g}, T = 1": (1.0, g, n) for n in (1024, 2048, 0) for g in (3, 4)}
LANES |= {"target alone, T = 0": (0.0, 1, None)}
LANES |= {f"EAGLE N {n or 4096} γ 4, T = 0": (0.0, 4, n) for n in (1024, 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = ignoring_eos(load_pair("embedded", device="cpu"))
    prompts = heldout_prompts(args.prompts)
    print(f"load (1 min) before {os.getloadavg()[0]:.1f}")
    speed: dict[str, list[float]] = {label: [] for label in LANES}
    alpha: dict[str, list[float]] = {label: [] for label in LANES}
    accepted: dict[str, list[float]] = {label: [] for label in LANES}
    for done in range(args.passes + 1):
        for label, (temperature, gamma, n) in LANES.items():
            config = SessionConfig(
                gamma=gamma, max_new_tokens=128, temperature=temperature, seed=done
            )
            started, tokens = time.process_time(), 0
            for prompt in prompts:
                drafter = None if n is None else make_eagle_drafter(pair, n)
                mode = "autoregressive" if drafter is None else "speculative"
                run = generate(pair, prompt, config, mode, drafter)
                tokens += len(run.output_ids)
                if drafter is not None:
                    alpha[label].append(run.stats.acceptance_rate)
                    accepted[label].append(run.stats.mean_accepted)
            if done:  # the first pass warms every path up
                speed[label].append(tokens / (time.process_time() - started))
    print(f"load (1 min) after {os.getloadavg()[0]:.1f}")
    for label, (temperature, _, n) in LANES.items():
        alone = speed[f"target alone, T = {temperature:g}"]
        ratios = [s / a for s, a in zip(speed[label], alone, strict=True)]
        about = (
            ""
            if n is None
            else (
                f"  α {statistics.mean(alpha[label]):.3f}, {statistics.mean(accepted[label]):.2f}"
                " committed per round"
            )
        )
        print(
            f"{label:26} {statistics.median(speed[label]):6.0f} CPU tok/s "
            f"{statistics.median(ratios):5.2f}× ({min(ratios):.2f}–{max(ratios):.2f}){about}"
        )
    for gamma in (3, 4):
        base = speed[f"EAGLE N 1024 γ {gamma}, T = 1"]
        for n in (2048, 4096):
            pairs = [
                s / b for s, b in zip(speed[f"EAGLE N {n} γ {gamma}, T = 1"], base, strict=True)
            ]
            print(
                f"N {n} / N 1024, γ {gamma}, T = 1: {statistics.median(pairs):.3f}× "
                f"({min(pairs):.3f}–{max(pairs):.3f}), faster in {sum(p > 1 for p in pairs)}"
                f" of {len(pairs)} passes"
            )


if __name__ == "__main__":
    main()
