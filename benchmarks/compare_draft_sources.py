"""Draft sources side by side on the embedded pair: the draft model, prompt lookup (n-gram)
and the EAGLE head (issue 17), on the held-out prompts of ``measure_acceptance.py``.

Per drafter, greedy (T = 0) and sampled (T = 1), γ = 4, 40 new tokens, the engine's fast
path; every acceptance figure is ``records.summarize`` over all rounds:

* accepted drafts per round (mean committed drafts, 0..γ) and α (mean Σ min(p, q) over
  checked positions);
* tokens per round, and tokens per *target forward* (the EAGLE drafter's first-round
  prefill counts as a target forward);
* draft forward ms per drafted token (time inside the drafter's forwards: the draft
  model, or the EAGLE head + the target's LM head row; 0 for prompt lookup) and ms per
  generated token end to end (wall time of the whole generation / new tokens).

Drafters run interleaved prompt by prompt, so load on a shared machine spreads over all
of them; times are still only indicative there.

    python benchmarks/compare_draft_sources.py [--prompts 100] [--drafters model,ngram,eagle]
        [--json]
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

from specdec_core.core.inputs import SessionConfig
from specdec_core.core.models import load_pair
from specdec_core.core.records import summarize
from specdec_core.drafters import make_named_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate

COLUMNS = (
    ("accepted_per_round", "acc/round", "{:.2f}"),
    ("alpha", "α", "{:.3f}"),
    ("tokens_per_round", "tok/round", "{:.2f}"),
    ("tokens_per_target_forward", "tok/target fwd", "{:.2f}"),
    ("draft_ms_per_drafted", "draft ms/drafted", "{:.2f}"),
    ("ms_per_token", "ms/token", "{:.2f}"),
)


def measure(
    pair,
    prompts: list[str],
    drafters: list[str],
    gamma: int,
    temperature: float,
    max_new_tokens: int,
) -> dict[str, dict]:
    """``{drafter or "target": figures}`` for one temperature (see the module doc)."""
    runs: dict[str, list] = {name: [] for name in ["target", *drafters]}
    for i, prompt in enumerate(prompts):
        config = SessionConfig(
            gamma=gamma, temperature=temperature, seed=i, max_new_tokens=max_new_tokens
        )
        runs["target"].append(generate(pair, prompt, config, mode="autoregressive"))
        for name in drafters:
            drafter = make_named_drafter(pair, name)
            runs[name].append(generate(pair, prompt, config, drafter=drafter))
    out: dict[str, dict] = {}
    for name, results in runs.items():
        tokens = sum(r.stats.new_tokens for r in results)
        total_ms = sum(r.stats.total_ms for r in results)
        forwards = sum(r.stats.target_forwards for r in results)
        row = {
            "new_tokens": tokens,
            "target_forwards": forwards,
            "ms_per_token": total_ms / tokens,
            "tokens_per_target_forward": tokens / forwards,
        }
        if name != "target":
            s = summarize([rec for r in results for rec in r.records])
            row.update(
                {
                    "accepted_per_round": s.mean_accepted,
                    "alpha": s.acceptance_rate,
                    "tokens_per_round": s.tokens_per_round,
                    "rounds": s.rounds,
                    "drafted": s.drafted,
                    "accepted": s.accepted,
                    "checked": s.checked,
                    "draft_ms_per_drafted": sum(r.stats.draft_forward_ms for r in results)
                    / max(1, s.drafted),
                    "accepted_histogram": list(s.accepted_histogram),
                    "same_as_target_greedy": temperature == 0
                    and all(
                        a.output_ids == b.output_ids
                        for a, b in zip(results, runs["target"], strict=True)
                    ),
                }
            )
        out[name] = row
    return out


def table(results: dict[str, dict[str, dict]]) -> str:
    """A markdown table: one row per (setting, drafter)."""
    head = "| setting | drafter | " + " | ".join(c[1] for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for setting, rows in results.items():
        for name, row in rows.items():
            cells = [fmt.format(row[key]) if key in row else "—" for key, _, fmt in COLUMNS]
            lines.append(f"| {setting} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--drafters", default="model,ngram,eagle")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair("embedded", device="cpu")
    prompts = heldout_prompts(args.prompts)
    drafters = [d.strip() for d in args.drafters.split(",") if d.strip()]
    results = {
        setting: measure(pair, prompts, drafters, args.gamma, temperature, args.max_new_tokens)
        for setting, temperature in (("greedy", 0.0), ("T = 1", 1.0))
    }
    if args.json:
        print(
            json.dumps(
                {
                    "prompts": len(prompts),
                    "gamma": args.gamma,
                    "max_new_tokens": args.max_new_tokens,
                    "results": results,
                },
                indent=2,
            )
        )
    else:
        print(
            f"{len(prompts)} held-out prompts, γ = {args.gamma}, "
            f"{args.max_new_tokens} new tokens, {torch.get_num_threads()} threads"
        )
        print(table(results))


if __name__ == "__main__":
    main()
