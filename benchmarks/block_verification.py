"""Token-wise against block verification (``--verification token|block``) on the embedded
pair: tokens per round and ms per token, per chain drafter, at T = 0.7 and T = 1, on
held-out prompts (the last 10 % of the corpus, ``measure_acceptance.heldout_prompts``).

Both rules run on the same prompts and seeds, interleaved prompt by prompt (token, block,
token, block, …) so the machine's load falls on both alike; ms/token is the fast path's
wall time (``GenerationStats.total_ms``) over the tokens it made. Prints one row per
drafter and temperature, with the machine's load (``os.getloadavg``) before and after.

    SPECDEC_TORCH_THREADS=1 nice -n 10 python benchmarks/block_verification.py \
        [--prompts 12] [--seeds 2] [--tokens 48] [--gamma 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_acceptance import heldout_prompts  # noqa: E402

from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.registry import make_named_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402
from specdec_core.engine.chain.records import summarize  # noqa: E402

DRAFTERS = ("model", "ngram", "early-exit", "eagle", "mtp", "block", "recurrent")
TEMPERATURES = (0.7, 1.0)
RULES = ("token", "block")


def measure(pair, drafter: str, temperature: float, prompts, seeds: int, tokens: int, gamma: int):
    """Summed rounds, tokens and ms per rule over every prompt and seed."""
    totals = {r: {"rounds": 0, "tokens": 0, "ms": 0.0, "more": 0, "fewer": 0} for r in RULES}
    for prompt in prompts:
        for seed in range(seeds):
            for rule in RULES:
                config = SessionConfig(
                    gamma=gamma,
                    temperature=temperature,
                    seed=seed,
                    max_new_tokens=tokens,
                    verification=rule,
                )
                run = generate(pair, prompt, config, drafter=make_named_drafter(pair, drafter))
                s = summarize(run.records)
                t = totals[rule]
                t["rounds"] += s.rounds
                t["tokens"] += run.stats.new_tokens
                t["ms"] += run.stats.total_ms
                for r in run.records:
                    if r.block is not None:
                        t["more"] += r.block.kept > r.block.token_wise
                        t["fewer"] += r.block.kept < r.block.token_wise
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--drafters", default=",".join(DRAFTERS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("SPECDEC_TORCH_THREADS", "1")))
    pair = load_pair("embedded", device="cpu")
    prompts = heldout_prompts(args.prompts)
    load_before = os.getloadavg()[0]
    rows = []
    for drafter in args.drafters.split(","):
        for temperature in TEMPERATURES:
            totals = measure(
                pair, drafter, temperature, prompts, args.seeds, args.tokens, args.gamma
            )
            row = {"drafter": drafter, "temperature": temperature}
            for rule, t in totals.items():
                row[f"{rule}_tokens_per_round"] = t["tokens"] / max(t["rounds"], 1)
                row[f"{rule}_ms_per_token"] = t["ms"] / max(t["tokens"], 1)
            row["block_rounds_more"] = totals["block"]["more"]
            row["block_rounds_fewer"] = totals["block"]["fewer"]
            row["block_rounds"] = totals["block"]["rounds"]
            rows.append(row)
            if not args.json:
                gain = row["block_tokens_per_round"] / row["token_tokens_per_round"] - 1
                print(
                    f"{drafter:>10} T={temperature:<4} tokens/round token"
                    f" {row['token_tokens_per_round']:.3f}"
                    f" block {row['block_tokens_per_round']:.3f} ({gain:+.1%})   ms/token token"
                    f" {row['token_ms_per_token']:.2f} block {row['block_ms_per_token']:.2f}"
                    f"   block kept more/fewer than token-wise in {row['block_rounds_more']}"
                    f"/{row['block_rounds_fewer']} of {row['block_rounds']} rounds",
                    flush=True,
                )
    out = {
        "pair": "embedded",
        "gamma": args.gamma,
        "prompts": len(prompts),
        "seeds": args.seeds,
        "max_new_tokens": args.tokens,
        "threads": torch.get_num_threads(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "rows": rows,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"load average (1 min) before {load_before:.2f}, after {out['load_after']:.2f}")


if __name__ == "__main__":
    main()
