"""Where a round's time goes besides the model forwards: per round, drafting and the
verification each split into its forwards and the rest (temperature/top-k/top-p, the
draws, the rule, the bookkeeping), for EAGLE and the draft model at T = 0 and T = 1, and
the target alone per token, on the embedded pair (end-of-text ignored), γ 3, 128 tokens.
Lanes interleaved, ``--passes`` times; medians (min–max) of wall ms and of this process's
CPU ms (one torch thread: the work, little moved by other processes' load); the 1-minute
load before and after. Printed, never asserted.

    nice -n 15 python benchmarks/round_overhead.py [--passes 5] [--gamma 3]
        [--max-new-tokens 128] [--threads 1] [--fingerprint OUT.json]

``--fingerprint OUT.json`` writes the seeded outputs and round records of the chain and
tree lanes instead (target alone, draft model, EAGLE, prompt lookup; T 0.7 and 1; top-k /
top-p off and on; 20 seeds): two checkouts whose every draw is the same write the same
file (``cmp A.json B.json``).
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

from specdec_core.bench.runs import ignoring_eos  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.registry import make_named_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402
from specdec_core.engine.tree.generate import generate_tree  # noqa: E402

PROMPTS = (
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "First Citizen:\nWe are accounted poor citizens",
)
LANES = (
    ("eagle", 1.0),
    ("model", 1.0),
    ("target", 1.0),
    ("eagle", 0.0),
    ("model", 0.0),
    ("target", 0.0),
)
FIGURES = ("draft rest", "verify rest", "round", "round cpu", "draft fwd", "verify fwd")


def one_lane(pair, drafter: str, temperature: float, gamma: int, tokens: int) -> dict:
    """One run; ms per round (the target alone: per token, its verify is the whole step)."""
    config = SessionConfig(gamma=gamma, max_new_tokens=tokens, temperature=temperature, seed=0)
    alone = drafter == "target"
    source = None if alone else make_named_drafter(pair, drafter)
    cpu = time.process_time()
    run = generate(pair, PROMPTS[0], config, "autoregressive" if alone else "speculative", source)
    cpu = (time.process_time() - cpu) * 1e3
    s = run.stats
    n = s.new_tokens if alone else max(s.rounds, 1)
    return {
        "draft rest": (s.draft_ms - s.draft_forward_ms) / n,
        "verify rest": (s.verify_ms - s.target_forward_ms) / n,
        "round": s.total_ms / n,
        "round cpu": cpu / n,
        "draft fwd": s.draft_forward_ms / n,
        "verify fwd": s.target_forward_ms / n,
    }


def measure(pair, passes: int, gamma: int, tokens: int) -> None:
    for lane in LANES:  # warm-up
        one_lane(pair, *lane, gamma, tokens)
    runs: dict[tuple[str, float], list[dict]] = {lane: [] for lane in LANES}
    for _ in range(passes):
        for lane in LANES:
            runs[lane].append(one_lane(pair, *lane, gamma, tokens))
    print(f"γ {gamma}, {tokens} tokens, {passes} passes; ms per round (target: per token)")
    for (drafter, temperature), rows in runs.items():
        cells = []
        for key in FIGURES:
            values = [row[key] for row in rows]
            cells.append(
                f"{key} {statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"
            )
        print(f"{drafter:6s} T={temperature:g}: " + "; ".join(cells))


def fingerprint(pair, out: Path) -> None:
    """The seeded outputs and records of every lane (see the module doc)."""
    found: dict[str, object] = {}
    settings = {"plain": {}, "top-k/top-p": {"top_k": 50, "top_p": 0.9}}
    for seed in range(20):
        prompt = PROMPTS[seed % 2]
        for temperature in (0.7, 1.0):
            for name, extra in settings.items():
                config = SessionConfig(
                    gamma=3, max_new_tokens=40, temperature=temperature, seed=seed, **extra
                )
                key = f"{seed}/{temperature}/{name}"
                found[f"target/{key}"] = generate(pair, prompt, config, "autoregressive").output_ids
                for drafter in ("model", "eagle", "ngram"):
                    run = generate(pair, prompt, config, drafter=make_named_drafter(pair, drafter))
                    found[f"{drafter}/{key}"] = [run.output_ids, [repr(r) for r in run.records]]
                if seed < 5:
                    for drafter in ("model", "eagle"):
                        tree = generate_tree(pair, prompt, config, (2, 2, 1), 12, drafter)
                        found[f"tree {drafter}/{key}"] = [
                            tree.output_ids,
                            [repr(r) for r in tree.records],
                        ]
    out.write_text(json.dumps(found, sort_keys=True), encoding="utf-8")
    print(f"{len(found)} runs written to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--gamma", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fingerprint", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = ignoring_eos(load_pair("embedded"))
    print(f"load {os.getloadavg()[0]:.2f}, torch threads {torch.get_num_threads()}")
    with torch.inference_mode():
        if args.fingerprint is not None:
            fingerprint(pair, args.fingerprint)
        else:
            measure(pair, args.passes, args.gamma, args.max_new_tokens)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
