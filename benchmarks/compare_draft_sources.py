"""Draft sources side by side on the embedded pair: every source the pair can run (the
draft model, prompt lookup (n-gram), early exit, the EAGLE head, the MTP heads and the
block drafter: ``drafters_for``), on the held-out prompts of ``measure_acceptance.py``
or, with ``--sources``, on the repetitive and the novel prompt of the pages'
comparison (``bench.source_compare.compare_sources``, interleaved repeats, medians
with min–max, the cost model's prediction beside each measurement).

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
    python benchmarks/compare_draft_sources.py --sources [--repeats 5] [--max-new-tokens 32]
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

from specdec_core.bench.source_compare import compare_sources
from specdec_core.bench.source_results import SourceComparison
from specdec_core.core.models import load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize

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


def sources_table(comp: SourceComparison) -> str:
    """A markdown table of :func:`compare_sources`: one row per (setting, prompt, source),
    measured beside predicted."""
    head = (
        "| setting | prompt | source | γ | acc/round | draft fwd/round | extra target fwd | α "
        "| tok/round (pred) | ms/token median (min–max) | speed-up (min–max) | pred. speed-up "
        "| c |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in comp.rows:
        setting = "greedy" if r.temperature == 0 else f"T = {r.temperature:g}"
        ms, sp = r.ms_per_token, r.speedup
        lines.append(
            f"| {setting} | {r.prompt} | {r.name} | {r.gamma} | {r.accepted_per_round:.2f} "
            f"| {r.draft_forwards_per_round:.2f} | {r.extra_target_forwards_per_round:.2f} "
            f"| {r.acceptance_rate:.3f} | {r.tokens_per_round:.2f} "
            f"({r.predicted_tokens_per_round:.2f}) | {ms.median:.1f} ({ms.low:.1f}–{ms.high:.1f}) "
            f"| {sp.median:.2f}× ({sp.low:.2f}–{sp.high:.2f}) | {r.predicted_speedup:.2f}× "
            f"| {r.cost_ratio:.2f} |"
        )
    lines.append("")
    for t in comp.targets:
        setting = "greedy" if t.temperature == 0 else f"T = {t.temperature:g}"
        lines.append(
            f"target alone, {setting}, {t.prompt}: {t.ms_per_token.median:.1f} ms/token "
            f"({t.ms_per_token.low:.1f}–{t.ms_per_token.high:.1f}), step {t.step_ms:.2f} ms"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--drafters", default="", help="default: every source of the pair")
    parser.add_argument("--sources", action="store_true", help="the pages' two-prompt table")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes (--sources)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair("embedded", device="cpu")
    drafters = [d.strip() for d in args.drafters.split(",") if d.strip()] or list(
        drafters_for(pair)
    )
    if args.sources:
        config = SessionConfig(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
        comp = compare_sources(pair, config, drafters, repeats=args.repeats)
        if args.json:
            print(json.dumps(comp.to_json(), indent=2))
        else:
            how = comp.how
            print(
                f"γ = {comp.gamma}, {comp.max_new_tokens} new tokens (EOS ignored), "
                f"{how.repeats} interleaved passes after a warm-up, load {how.load} on "
                f"{how.cpus} CPUs, busy: {comp.verdict.busy} {comp.verdict.reasons}"
            )
            print(sources_table(comp))
        return
    prompts = heldout_prompts(args.prompts)
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
