"""The command line's commands (``python -m specdec_core run|bench|scenarios``; the
parser and the printing are ``specdec_core/__main__.py``): each takes the parsed
arguments and returns the JSON object the CLI prints (docs/ARCHITECTURE.md "CLI
contract"). ``run`` steps a :class:`SpeculativeSession` round by round (so ``--edit`` can
change a draft before verification), a :class:`TreeSession` (``--tree``) or the target
alone (``--mode autoregressive``); ``bench --tree`` times target-only vs chain vs tree.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from urllib.parse import urlencode

from specdec_core.bench.tree_vs_chain import compare as compare_tree
from specdec_core.core.errors import InputError
from specdec_core.core.inputs import SessionConfig
from specdec_core.core.models import ModelPair, load_pair
from specdec_core.core.records import summarize
from specdec_core.core.trace import RoundTrace
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.session import TreeSession
from specdec_core.engine.tree.steps import parse_shape
from specdec_core.lessons.link import LessonState, encode
from specdec_core.lessons.scenarios import find_scenarios

_EDIT = re.compile(r"^(\d+):(\d+)=(\d+)$")


def parse_edits(items: Sequence[str]) -> dict[int, list[tuple[int, int]]]:
    """``ROUND:POS=TOKEN_ID`` (round and position count from 1) → ``{round: [(pos, id)]}``.

    Raises:
        InputError: malformed item, or round/position 0.
    """
    edits: dict[int, list[tuple[int, int]]] = {}
    for item in items:
        m = _EDIT.match(item.strip())
        if not m:
            raise InputError(
                f"--edit must look like ROUND:POS=TOKEN_ID (e.g. 1:2=42), got {item!r}"
            )
        rnd, pos, tok = (int(g) for g in m.groups())
        if rnd < 1 or pos < 1:
            raise InputError(f"--edit round and position count from 1, got {item!r}")
        edits.setdefault(rnd, []).append((pos, tok))
    return edits


def pair_arg(value: str) -> str | tuple[str, str]:
    """A preset name, or ``TARGET_DIR,DRAFT_DIR`` (needs SPECDEC_ALLOW_CUSTOM_MODELS=1)."""
    if "," in value:
        target, draft = value.split(",", 1)
        return target, draft
    return value


def run_command(args: argparse.Namespace) -> dict:
    pair = load_pair(pair_arg(args.pair))
    config = SessionConfig(
        gamma=args.gamma,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        draft_method=args.draft_method,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
    )
    edits = parse_edits(args.edit or [])
    if args.tree is not None:
        return tree_run_command(args, pair, config, edits)
    if edits and args.mode == "autoregressive":
        raise InputError("--edit changes drafted tokens: it needs --mode speculative")
    if args.mode == "autoregressive":
        result = generate(pair, args.prompt, config, mode="autoregressive")
        stats = result.stats
        return {
            "output_ids": result.output_ids,
            "text": result.text,
            "stop_reason": result.stop_reason,
            "stats": {
                "rounds": stats.target_forwards,
                "target_forwards": stats.target_forwards,
                "draft_forwards": 0,
                "acceptance_rate": 0.0,
                "mean_accepted": 0.0,
            },
            "rounds": [],
        }
    session = SpeculativeSession(pair, args.prompt, config, make_named_drafter(pair, args.drafter))
    draft_forwards = 0
    applied: set[tuple[int, int]] = set()
    while session.phase == "propose":
        proposed = session.propose()
        draft_forwards += proposed.draft_forwards
        for pos, tok in edits.get(session.round_index + 1, []):
            if pos > config.gamma:
                raise InputError(f"--edit position {pos} is beyond γ = {config.gamma}")
            if pos <= len(session.drafts):  # a round near the end may draft fewer
                draft_forwards += session.edit_draft(pos, tok).draft_forwards
                applied.add((session.round_index + 1, pos))
        session.verify()
        session.commit()
    skipped = sorted({(r, p) for r, items in edits.items() for p, _ in items} - applied)
    if skipped:  # stderr, so stdout stays one JSON object
        where = ", ".join(f"{r}:{p}" for r, p in skipped)
        print(f"note: --edit {where} not applied (no such round or draft)", file=sys.stderr)
    summary = summarize(session.records)
    return {
        "output_ids": session.generated_ids,
        "text": session.text,
        "stop_reason": session.stop_reason,
        "stats": {
            "rounds": summary.rounds,
            # one per round, + a drafter's own target prefill (eagle's first round)
            "target_forwards": session.target.forwards,
            "draft_forwards": draft_forwards,
            "acceptance_rate": summary.acceptance_rate,
            "mean_accepted": summary.mean_accepted,
        },
        "rounds": [round_json(r) for r in session.history],
    }


def tree_run_command(
    args: argparse.Namespace, pair: ModelPair, config: SessionConfig, edits: dict
) -> dict:
    """``run --tree SHAPE``: tree rounds on a :class:`TreeSession` (docs/ARCHITECTURE.md
    "CLI contract"); ``--gamma`` is not used (the depth is the shape's length)."""
    shape = parse_shape(args.tree)
    if args.mode == "autoregressive":
        raise InputError("--tree drafts a tree: it needs --mode speculative")
    if edits:
        raise InputError("--edit changes chain drafts: it cannot be used with --tree")
    drafter = make_named_drafter(pair, args.drafter)
    session = TreeSession(pair, args.prompt, config, drafter, shape, args.tree_budget)
    rounds = []
    while session.phase == "propose":
        trace = session.run_round()
        after = trace.kv_after
        lengths = {
            "committed_len": after.committed_len,
            "target_kv_len": after.target_kv_len,
            "draft_kv_len": after.draft_kv_len,
        }
        rounds.append({**trace.record.to_json(), **lengths})
    stats = session.summary()
    return {
        "output_ids": session.generated_ids,
        "text": session.text,
        "stop_reason": session.stop_reason,
        "tree": list(shape),
        "tree_budget": session.budget,
        "drafter": args.drafter,
        "stats": {
            "rounds": stats.rounds,
            "target_forwards": stats.target_forwards,
            "draft_forwards": stats.draft_forwards,
            "tokens_per_target_forward": stats.tokens_per_target_forward,
            "mean_accepted": stats.mean_accepted,
            "mean_nodes": stats.mean_nodes,
        },
        "rounds": rounds,
    }


def tree_bench_command(args: argparse.Namespace) -> dict:
    """``bench --tree SHAPE``: target-only vs chain (γ) vs tree on one prompt, fast paths."""
    shape = parse_shape(args.tree)
    pair = load_pair(pair_arg(args.pair))
    config = SessionConfig(
        gamma=args.gamma, temperature=args.temperature, max_new_tokens=args.max_new_tokens
    )
    rows = compare_tree(
        pair,
        [args.prompt],
        config,
        [shape],
        [args.drafter],
        args.tree_budget,
        args.repeats,
        not args.stop_at_eos,
    )
    return {"pair": args.pair, "device": pair.device, "rows": [r.to_json() for r in rows]}


def round_json(r: RoundTrace) -> dict:
    """One round of the ``run`` JSON contract (docs/ARCHITECTURE.md "CLI contract")."""
    after = r.commit.kv_after
    return {
        "drafted": list(r.record.drafted),
        "accepted": r.record.accepted,
        "appended": list(r.record.appended),
        "kind": r.record.kind,
        "checks": [
            {
                "token": c.token.id,
                "p": c.p,
                "q": c.q,
                "overlap": c.overlap,
                "accept_prob": c.accept_prob,
                "u": c.u,
                "status": c.status,
            }
            for c in r.verify.checks
        ],
        "committed_len": after.committed_len,
        "target_kv_len": after.target_kv_len,
        "draft_kv_len": after.draft_kv_len,
    }


def scenarios_command(args: argparse.Namespace) -> dict:
    """``{scenario: link}`` for every scenario found on the pair (``null``: not found)."""
    pair = load_pair(pair_arg(args.pair))
    base = LessonState(lang=args.lang)
    return {
        f.key: None if f.state is None else f"{args.base_url}?{urlencode(encode(f.state))}"
        for f in find_scenarios(pair, base)
    }
