"""Command line: ``python -m specdec_core run|bench|scenarios|check ... --json``
(docs/ARCHITECTURE.md). This module parses the arguments and prints; the commands are
``specdec_core/server/cli.py``.

``run`` steps a :class:`SpeculativeSession` round by round (so ``--edit`` can change a
draft before verification) or runs the target alone (``--mode autoregressive``).
``bench`` times target-only vs speculative decoding (and Hugging Face assisted generation)
on the fast path. ``check`` runs the device check (``bench/check.py``: greedy and replay
equality, a seeded χ², the speed table; exit status 1 when an equality case fails).
Errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import torch

from specdec_core.bench.check import check_command
from specdec_core.bench.report import run_bench
from specdec_core.core.errors import SpecDecError
from specdec_core.drafters.registry import DRAFTER_NAMES
from specdec_core.engine.tree.generate import MAX_TREE_NODES
from specdec_core.server.cli import (
    add_processor_args,
    pair_arg,
    run_command,
    scenarios_command,
    tree_bench_command,
)
from specdec_core.server.gamma_args import add_gamma_args, check_gamma_args, gamma_json
from specdec_core.server.lossless_args import (
    acceptance_settings,
    add_lossless_args,
    check_lossless_args,
    lossless_json,
)

BENCH_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m specdec_core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="generate once and print every round")
    run.add_argument("--pair", default="embedded")
    run.add_argument("--prompt", required=True)
    run.add_argument("--mode", choices=["speculative", "autoregressive"], default="speculative")
    run.add_argument("--gamma", type=int, default=4)
    run.add_argument("--temperature", type=float, default=0.0)
    run.add_argument("--top-k", type=int, default=0)
    run.add_argument("--top-p", type=float, default=1.0)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--max-new-tokens", type=int, default=40)
    run.add_argument("--draft-method", choices=["probabilistic", "greedy"], default="probabilistic")
    run.add_argument("--drafter", choices=list(DRAFTER_NAMES), default="model")
    run.add_argument("--edit", action="append", metavar="ROUND:POS=TOKEN_ID")
    run.add_argument(
        "--verification",
        choices=["token", "block"],
        default="token",
        help="how sampled drafts are verified, both exact (output follows the target): "
        "token = each draft on its own, stop at the first rejection (Leviathan et al.); "
        "block = the drafted block jointly, never fewer tokens kept per round in "
        "expectation (Sun et al. 2025); greedy (T = 0) decides the same either way; "
        "chains only (a --tree keeps token-wise)",
    )
    add_processor_args(run)
    tree_help = "draft a tree: children per node at each depth, e.g. 2,2,1,1"
    run.add_argument("--tree", metavar="K1,K2,...", default=None, help=tree_help)
    run.add_argument(
        "--tree-budget", type=int, default=12, help=f"most nodes per tree (1..{MAX_TREE_NODES})"
    )
    run.add_argument("--json", action="store_true", help="print one JSON object")
    add_lossless_args(run)
    add_gamma_args(run)
    bench = sub.add_parser("bench", help="time target-only vs speculative decoding")
    bench.add_argument("--pair", default="embedded")
    bench.add_argument("--prompt", default=BENCH_PROMPT)
    bench.add_argument("--gamma", type=int, default=4)
    bench.add_argument("--max-new-tokens", type=int, default=128)
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--temperature", type=float, default=0.0)
    bench.add_argument("--no-hf", action="store_true", help="skip HF assisted generation")
    bench.add_argument("--drafter", choices=list(DRAFTER_NAMES), default="model")
    bench.add_argument(
        "--stop-at-eos",
        action="store_true",
        help="stop at EOS (default: ignore it, so every run makes max-new-tokens tokens)",
    )
    bench.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    bench.add_argument(
        "--tree",
        metavar="K1,K2,...",
        default=None,
        help="time target-only vs chain (γ) vs this tree instead",
    )
    bench.add_argument("--tree-budget", type=int, default=12)
    bench.add_argument("--json", action="store_true")
    add_lossless_args(bench)
    scen = sub.add_parser("scenarios", help="the lesson scenarios found on a pair, as links")
    scen.add_argument("--pair", default="embedded")
    scen.add_argument("--base-url", default="http://localhost:8501/")
    scen.add_argument("--lang", choices=["en", "zh"], default="en")
    scen.add_argument("--json", action="store_true")
    check = sub.add_parser("check", help="check this device: equality, χ², speed table")
    check.add_argument("--pair", default="embedded")
    check.add_argument("--quick", action="store_true", help="fewer prompts, tokens and draws")
    check.add_argument("--no-speed", action="store_true", help="skip the speed table")
    check.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check":
        if args.threads:
            torch.set_num_threads(args.threads)
        try:
            return check_command(args.quick, args.json, not args.no_speed, pair_arg(args.pair))
        except SpecDecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        if args.command != "scenarios":
            check_lossless_args(args)
        if args.command == "run":
            check_gamma_args(args)
            out = {**run_command(args), **gamma_json(args)}
        elif args.command == "scenarios":
            out = scenarios_command(args)
        else:
            if args.threads:
                torch.set_num_threads(args.threads)
            out = (
                tree_bench_command(args)
                if args.tree is not None
                else run_bench(
                    pair_arg(args.pair),
                    args.prompt,
                    args.gamma,
                    args.max_new_tokens,
                    args.repeats,
                    args.temperature,
                    hf=not args.no_hf,
                    ignore_eos=not args.stop_at_eos,
                    drafter=args.drafter,
                    target_quant=args.target_quant,
                    acceptance=acceptance_settings(args),
                ).to_json()
            )
        if args.command != "scenarios":
            out = {**out, **lossless_json(args)}
    except (SpecDecError, ValueError) as exc:  # documented errors (and argument values)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line, no traceback (exit 1)
        print(f"error: internal error ({type(exc).__name__}); please report it", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    elif args.command == "scenarios":
        print("\n".join(f"{key}\t{url or '(not found on this pair)'}" for key, url in out.items()))
    elif args.command == "run":
        print(out["text"])
        s = out["stats"]
        rate = (
            f"tokens/target forward={s['tokens_per_target_forward']:.2f}"
            if "tree" in out
            else f"acceptance={s['acceptance_rate']:.3f}"
        )
        print(
            f"[{out['stop_reason']}] rounds={s['rounds']} {rate} "
            f"mean_accepted={s['mean_accepted']:.2f}",
            file=sys.stderr,
        )
    else:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
