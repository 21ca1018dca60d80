"""How long "Find the scenarios" takes (``scenarios.find_scenarios``, the search behind the
Lesson panel's button and the ``scenarios`` CLI) on the embedded pair, and how many model
forwards it runs. Prints one line per repeat and the median with the min–max spread.

    python benchmarks/scenario_search.py [--repeats 3] [--threads N]

Each repeat is the whole search in this process after the pair is loaded and warmed (as
the app does at load); the first repeat also pays torch's first calls on each shape.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.core.models import load_pair
from specdec_core.lessons.scenarios import find_scenarios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair("embedded")
    forwards = [0]

    def count(module, *_):
        if isinstance(module, GPT2LMHeadModel):
            forwards[0] += 1

    torch.nn.modules.module.register_module_forward_hook(count)
    times = []
    for rep in range(args.repeats):
        forwards[0] = 0
        started = time.perf_counter()
        found = list(find_scenarios(pair))
        times.append(time.perf_counter() - started)
        missing = [f.key for f in found if f.state is None]
        print(
            f"repeat {rep + 1}: {times[-1]:.2f} s, {forwards[0]} model forwards, "
            f"{len(found) - len(missing)}/{len(found)} found",
            flush=True,
        )
    print(
        f"threads {torch.get_num_threads()}: median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}) over {len(times)} repeats"
    )


if __name__ == "__main__":
    main()
