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
from specdec_core.core.grammar import MAX_GRAMMAR_CHARS, GrammarSpec
from specdec_core.core.models import ModelPair, load_pair
from specdec_core.core.penalties import MAX_NGRAM_SIZE
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import KVState
from specdec_core.core.trace_json import to_jsonable
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.tree.generate import parse_shape
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState, encode
from specdec_core.lessons.scenarios import find_scenarios
from specdec_core.server.gamma_args import gamma_settings
from specdec_core.server.lossless_args import acceptance_settings, lossless_pair

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


def add_processor_args(parser: argparse.ArgumentParser) -> None:
    """``run``'s history-dependent processors (``core/processors.py``): the penalties and a
    grammar, applied to ``p`` and ``q`` on each row's own prefix, in speculative and
    autoregressive mode alike."""
    group = parser.add_argument_group("logits processors (applied to p and q, per prefix)")
    for flag, what in (
        ("--repetition-penalty", "CTRL / transformers repetition penalty (1 = off)"),
        ("--frequency-penalty", "OpenAI frequency penalty over generated tokens (0 = off)"),
        ("--presence-penalty", "OpenAI presence penalty over generated tokens (0 = off)"),
    ):
        group.add_argument(flag, type=float, default=None, metavar="F", help=what)
    group.add_argument(
        "--no-repeat-ngram-size",
        type=int,
        default=None,
        metavar="N",
        help=f"ban a token that repeats an n-gram of the prefix (1..{MAX_NGRAM_SIZE})",
    )
    group.add_argument("--regex", default=None, metavar="PATTERN", help="generated text matches")
    group.add_argument(
        "--json-schema",
        default=None,
        metavar="JSON_OR_FILE",
        help="generated text is a JSON object of this schema (text or a file path)",
    )


def read_schema(value: str) -> str:
    """``--json-schema``'s text: ``value`` itself when it looks like JSON (starts with
    ``{``), else the file it names, read with a bound (more than
    :data:`MAX_GRAMMAR_CHARS` characters is refused without reading further).

    Raises:
        InputError: no such readable file, or not UTF-8. ConfigError: code
        ``grammar_too_long``.
    """
    if value.lstrip().startswith("{"):
        return value
    try:
        with open(value, "rb") as handle:
            raw = handle.read(4 * MAX_GRAMMAR_CHARS + 4)  # ≤ 4 bytes a character
        text = raw.decode("utf-8")
    except (OSError, ValueError) as exc:
        shown = value if len(value) <= 60 else value[:60] + "…"
        raise InputError(
            f"--json-schema is neither JSON text nor a readable UTF-8 file: {shown!r}"
        ) from exc
    if len(text) > MAX_GRAMMAR_CHARS:
        GrammarSpec("json_schema", text).validate()  # raises grammar_too_long
    return text


def processor_settings(args: argparse.Namespace) -> dict:
    """The :class:`SessionConfig` fields the processor flags set (only those given, so a
    run without them has the default settings).

    Raises:
        InputError: ``--no-repeat-ngram-size`` ≤ 0, or both ``--regex`` and
        ``--json-schema``; see :func:`read_schema`.
    """
    out: dict = {}
    for name in ("repetition_penalty", "frequency_penalty", "presence_penalty"):
        if getattr(args, name, None) is not None:
            out[name] = getattr(args, name)
    n = getattr(args, "no_repeat_ngram_size", None)
    if n is not None:
        if n <= 0:
            raise InputError(f"--no-repeat-ngram-size must be ≥ 1 (leave it out for off), got {n}")
        out["no_repeat_ngram_size"] = n
    regex, schema = getattr(args, "regex", None), getattr(args, "json_schema", None)
    if regex is not None and schema is not None:
        raise InputError("--regex and --json-schema cannot be used together: choose one")
    if regex is not None:
        out["grammar"] = GrammarSpec("regex", regex)
    elif schema is not None:
        out["grammar"] = GrammarSpec("json_schema", read_schema(schema))
    return out


def processor_json(before: KVState, verified: KVState | None, after: KVState) -> dict:
    """A round's processor state for the ``run`` JSON (empty without a processor), from
    its KV states before verify, after the verify forward and after commit: ``grammar``
    and ``penalty``, each ``{before_verify, after_verify, after_commit}``
    (:class:`~specdec_core.core.grammar.GrammarView` fields; the penalty's ``counts``
    as ``[token id, count in the prefix, count in the generated part]`` and ``distinct``).
    A chain round's ``after_verify`` stands on the committed ids + every draft; a tree's
    on the committed ids + the accepted path."""
    states = {
        "before_verify": before.processors,
        "after_verify": verified.processors if verified is not None else None,
        "after_commit": after.processors,
    }
    out: dict = {}
    for key in ("grammar", "penalty"):
        views = {when: getattr(v, key) if v is not None else None for when, v in states.items()}
        if any(view is not None for view in views.values()):
            out[key] = {when: to_jsonable(view) for when, view in views.items()}
    return out


def run_command(args: argparse.Namespace) -> dict:
    pair = lossless_pair(load_pair(pair_arg(args.pair)), args)
    config = SessionConfig(
        gamma=args.gamma,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        draft_method=args.draft_method,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        verification=getattr(args, "verification", "token"),
        **processor_settings(args),
        **acceptance_settings(args),
        **gamma_settings(args),
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
            gamma = max(config.gamma, session.steps.current_gamma or 0)  # a schedule may grow γ
            if pos > gamma:
                raise InputError(f"--edit position {pos} is beyond γ = {gamma}")
            if pos <= len(session.steps.drafts):  # a round near the end may draft fewer
                draft_forwards += session.steps.edit_draft(pos, tok).draft_forwards
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
        "rounds": [round_json(r, config.gamma_schedule != "constant") for r in session.history],
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
        after = trace.commit.kv_after
        lengths = {
            "committed_len": after.committed_len,
            "target_kv_len": after.target_kv_len,
            "draft_kv_len": after.draft_kv_len,
        }
        states = processor_json(trace.propose.kv_before, trace.verify.kv_after, after)
        rounds.append({**trace.record.to_json(), **lengths, **states})
    stats = session.steps.summary()
    return {
        "output_ids": session.generated_ids,
        "text": session.text,
        "stop_reason": session.stop_reason,
        "tree": list(shape),
        "tree_budget": session.steps.budget,
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
    pair = lossless_pair(load_pair(pair_arg(args.pair)), args)
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


def round_json(r: RoundTrace, gamma: bool = False) -> dict:
    """One round of the ``run`` JSON contract (docs/ARCHITECTURE.md "CLI contract");
    ``gamma`` (a γ schedule is on, ``server/gamma_args.py``): also the round's ``gamma``
    and ``drafted_count``; a round block verification decided (``--verification block``,
    sampled rounds): ``block`` (:meth:`~specdec_core.rules.acceptance.BlockDecision.to_json`:
    ``weights`` p'_i, ``stop_probs`` h_i, ``u`` η_i, ``kept`` τ, ``token_wise`` (what
    token-wise verification keeps with the same draws), ``resample_position`` τ + 1,
    ``residual_mass``, ``residual_ids`` / ``residual_probs``)."""
    after = r.commit.kv_after
    shown = {"gamma": r.record.gamma, "drafted_count": len(r.record.drafted)} if gamma else {}
    if r.record.block is not None:  # block verification: what the rule computed
        shown["block"] = r.record.block.to_json()
    return {
        **shown,
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
        **processor_json(r.verify.kv_before, r.verify.kv_after, r.commit.kv_after),
        **({"state": state.to_json()} if (state := r.commit.kv_after.draft_state) else {}),
    }


def scenarios_command(args: argparse.Namespace) -> dict:
    """``{scenario: link}`` for every scenario found on the pair (``null``: not found)."""
    pair = load_pair(pair_arg(args.pair))
    base = LessonState(lang=args.lang)
    return {
        f.key: None if f.state is None else f"{args.base_url}?{urlencode(encode(f.state))}"
        for f in find_scenarios(pair, base)
    }
