"""Acceptance of every drafter of a shipped pair on its held-out prompts (model cards).

For ``--prompts`` held-out prompts (``bench.lossless.held_out_prompts``: on
``embedded-zh`` the first line of poems from the last 10 % of ``data/poetry_zh.txt``),
γ = 4, ``--tokens`` new tokens, greedy (T = 0) and sampled (T = 1, seed 0), every drafter
the pair has (``drafters_for``). Prints per drafter and temperature: α (mean Σ min(p, q)
over checked positions, ``records.summarize``), mean committed drafts per round, tokens
per round and tokens per target forward (new tokens / target forwards, the prompt's
forward included).

    python benchmarks/measure_pair.py --pair embedded-zh [--prompts 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.core.models import load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize


def measure(pair, drafter: str, prompts: list[str], config: SessionConfig) -> dict:
    """One drafter at one setting over every prompt: the figures of the card's table."""
    records, tokens, forwards = [], 0, 0
    for prompt in prompts:
        run = generate(pair, prompt, config, drafter=make_named_drafter(pair, drafter))
        records += run.records
        tokens += len(run.output_ids)
        forwards += run.stats.target_forwards
    stats = summarize(records)
    return {
        "alpha": round(stats.acceptance_rate, 3),
        "checked": stats.checked,
        "mean_accepted": round(stats.mean_accepted, 2),
        "tokens_per_round": round(stats.tokens_per_round, 2),
        "tokens_per_target_forward": round(tokens / forwards, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pair", default="embedded-zh")
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair(args.pair, device="cpu")
    prompts = held_out_prompts(args.prompts, args.pair)
    out: dict = {"pair": args.pair, "prompts": len(prompts), "gamma": args.gamma, "rows": {}}
    started = time.perf_counter()
    for drafter in drafters_for(pair):
        for temp in (0.0, 1.0):
            config = SessionConfig(gamma=args.gamma, max_new_tokens=args.tokens, temperature=temp)
            row = measure(pair, drafter, prompts, config)
            out["rows"][f"{drafter} T={temp:g}"] = row
            if not args.json:
                print(f"{drafter:>10} T={temp:g}: {row}", flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out, indent=2) if args.json else f"{out['seconds']} s")


if __name__ == "__main__":
    main()
