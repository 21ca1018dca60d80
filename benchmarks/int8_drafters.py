"""The drafters' weight-only int8 weights against their float32 weights at fixed γ: the
target alone, EAGLE at γ 3 / 4 / 5 and the draft model at γ 2 / 3 with int8 weights, EAGLE
at γ 3 / 4 and the draft model at γ 2 with float32 ones (``core/int8_linear.py``), greedy
and at T = 1, on the embedded pair's held-out prompts (end-of-text ignored, 128 tokens).

    SPECDEC_TORCH_THREADS=1 nice -n 15 python benchmarks/int8_drafters.py [--passes 5]
        [--prompts 4]

Lanes interleaved within each pass (one untimed pass first); per lane: tokens per second
of this process's CPU time (one torch thread: its CPU seconds are its work, little moved
by other processes' load), median over passes, and the ratio to the target alone of the
same pass and temperature, median (min–max). The 1-minute load is printed before and
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
from specdec_core.drafters.model import make_model_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402

#: (drafter, weights, γ) of each lane besides the target alone.
LANES = [("eagle", True, g) for g in (3, 4, 5)] + [("eagle", False, g) for g in (3, 4)]
LANES += [("model", True, g) for g in (2, 3)] + [("model", False, 2)]
MAKERS = {"eagle": make_eagle_drafter, "model": make_model_drafter}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = ignoring_eos(load_pair("embedded", device="cpu"))
    prompts = heldout_prompts(args.prompts)
    lanes = {}
    for temperature in (0.0, 1.0):
        lanes[f"target alone, T = {temperature:g}"] = (temperature, 1, None, None)
        for name, int8, gamma in LANES:
            weights = "int8" if int8 else "float32"
            label = f"{name} {weights} γ {gamma}, T = {temperature:g}"
            lanes[label] = (temperature, gamma, name, int8)
    print(f"load (1 min) before {os.getloadavg()[0]:.1f}")
    speed: dict[str, list[float]] = {label: [] for label in lanes}
    for done in range(args.passes + 1):
        for label, (temperature, gamma, name, int8) in lanes.items():
            config = SessionConfig(gamma=gamma, max_new_tokens=128, temperature=temperature)
            started, tokens = time.process_time(), 0
            for prompt in prompts:
                drafter = None if name is None else MAKERS[name](pair, int8=int8)
                mode = "autoregressive" if drafter is None else "speculative"
                tokens += len(generate(pair, prompt, config, mode, drafter).output_ids)
            if done:  # the first pass warms every path up
                speed[label].append(tokens / (time.process_time() - started))
    print(f"load (1 min) after {os.getloadavg()[0]:.1f}")
    for label, (temperature, *_) in lanes.items():
        alone = speed[f"target alone, T = {temperature:g}"]
        ratios = [s / a for s, a in zip(speed[label], alone, strict=True)]
        print(
            f"{label:30} {statistics.median(speed[label]):6.0f} CPU tok/s "
            f"{statistics.median(ratios):5.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
