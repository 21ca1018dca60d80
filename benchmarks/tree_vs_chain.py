"""Chain vs tree verification on the embedded pair: held-out prompts, greedy
and T = 1; target-only, chain γ = 4 and trees (2,2,1,1), (3,2,1,1), each with the draft
model (and the ``eagle`` drafter when ``make_named_drafter(pair, "eagle")`` works).
Prints tokens per target forward and measured ms per generated token (median of
repeats; end-of-text ignored so every run makes ``--max-new-tokens`` tokens).

    python benchmarks/tree_vs_chain.py [--prompts 30] [--max-new-tokens 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_acceptance import heldout_prompts  # noqa: E402

from specdec_core.bench.tree_vs_chain import compare
from specdec_core.core.models import load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair("embedded")
    prompts = heldout_prompts(args.prompts)
    drafters = ["model"]
    try:
        make_named_drafter(pair, "eagle")
        drafters.append("eagle")
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"(no eagle drafter: {exc})", file=sys.stderr)
    rows = []
    for temperature in (0.0, 1.0):
        config = SessionConfig(
            gamma=4, temperature=temperature, seed=0, max_new_tokens=args.max_new_tokens
        )
        rows += compare(
            pair, prompts, config, [(2, 2, 1, 1), (3, 2, 1, 1)], drafters, args.budget, args.repeats
        )
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return
    print(
        f"embedded pair, {len(prompts)} held-out prompts × {args.max_new_tokens} new tokens, "
        f"tree budget {args.budget}, median of {args.repeats}, {args.threads} threads"
    )
    print("| T | method | drafter | tokens/target fwd | draft fwd/token | ms/token |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        name = f"{r.method} {r.setting}".strip()
        per = r.draft_forwards / r.tokens if r.tokens else 0.0
        print(
            f"| {r.temperature:g} | {name} | {r.drafter or '—'} | "
            f"{r.tokens_per_target_forward:.2f} | {per:.2f} | {r.ms_per_token:.2f} |"
        )


if __name__ == "__main__":
    main()
