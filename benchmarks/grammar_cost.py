"""What the grammar mask costs per speculative round, next to the model forwards.

    python benchmarks/grammar_cost.py [--gamma 4] [--max-new-tokens 40] [--repeats 5]
        [--threads 1] [--json OUT.json]

On the shipped ``embedded`` pair, chain rounds at γ (default 4), greedy and T = 1, for the
two grammar presets (``speaker_line``: a regex, ``json_person``: a JSON schema) and, for
comparison, a repetition penalty and no processor (the same general path, so the rounds
differ only by the processors). The loop is the fast path's round
(``engine/chain/generate.py``: ``Drafter.propose`` → ``verify`` → ``decide_round``
→ ``rollback``, each with the session's ``Processors``), timed per phase:

* ``proc_draft`` — ms per round inside the processors while drafting (γ rows; with a
  grammar: the matcher synced to each row's prefix, its bitmask filled and unpacked, the
  row masked — the grammar mask's cost; with a penalty: the penalty's);
* ``proc_verify`` — the same for the γ + 1 verification rows;
* ``target fwd`` / ``draft fwd`` — ms per round inside the target's and the drafter's
  forwards (``ModelCache.forward_ms``);
* ``round`` — wall ms per round; ``rows`` rows processed per round.

Medians over the repeats, with the spread (min–max) of the per-repeat means. Figures
are printed (and optionally saved as JSON), never asserted.
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

from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec
from specdec_core.core.kvcache import ModelCache  # noqa: E402
from specdec_core.core.models import ModelPair, load_pair  # noqa: E402
from specdec_core.core.processors import make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import ModelDrafter  # noqa: E402
from specdec_core.engine.chain.round import (  # noqa: E402
    ChainContext,
    apply_round,
    decide_round,
    verify,
)
from specdec_core.engine.rounds import gamma_for_round, round_stream, stop_rule  # noqa: E402

PROMPTS = ["KING:\nWe", "ROMEO:\nBut soft", "JULIET:\nO Romeo", "First Citizen:\nBefore we"]
FIELDS = ("proc_draft", "proc_verify", "target_fwd", "draft_fwd", "round", "rows")


@torch.inference_mode()
def run_once(pair: ModelPair, prompt: str, config: SessionConfig) -> dict[str, float]:
    """One generation, the fast path's rounds; returns the per-round sums of each field and
    the number of rounds (``rounds``)."""
    ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
    prompt_len = len(ids)
    procs = make_processors(
        pair.tokenizer, pair.vocab_size, config.penalties, config.grammar, prompt_len, ids
    )
    target = ModelCache(pair.target)
    drafter = ModelDrafter(pair.draft)
    drafter.attach(target)
    stop = stop_rule(pair, config)
    sums = dict.fromkeys((*FIELDS, "rounds"), 0.0)
    reason = None

    def spent() -> float:
        return procs.timing["grammar_ms"] + procs.timing["penalty_ms"]

    while reason is None:
        r = int(sums["rounds"])
        gamma = gamma_for_round(
            config.gamma,
            len(ids) - prompt_len,
            config.max_new_tokens,
            len(ids),
            pair.context_length,
        )
        started, t_fwd, d_fwd, rows = (
            time.perf_counter(),
            target.forward_ms,
            drafter.forward_ms,
            procs.timing["rows"],
        )
        mark = spent()
        draft = drafter.propose(
            ids,
            gamma,
            config.sampling,
            config.draft_method,
            round_stream(config.seed, r, "draft"),
            procs,
        )
        sums["proc_draft"] += spent() - mark
        mark = spent()
        draft_ids = draft.ids.tolist()
        ctx = ChainContext(
            target, drafter, config.sampling, procs, stop=stop, prompt_len=prompt_len
        )
        checked = verify(ctx, ids, draft_ids, draft.probs, round_stream(config.seed, r, "verify"))
        sums["proc_verify"] += spent() - mark
        record, reason = decide_round(ctx, ids, gamma, draft_ids, checked)
        ids, _ = apply_round(ctx, ids, record)
        sums["round"] += (time.perf_counter() - started) * 1e3
        sums["target_fwd"] += target.forward_ms - t_fwd
        sums["draft_fwd"] += drafter.forward_ms - d_fwd
        sums["rows"] += procs.timing["rows"] - rows
        sums["rounds"] += 1
    return sums


def measure(pair: ModelPair, config: SessionConfig, repeats: int) -> dict[str, dict]:
    """Per-round means of each field for each repeat (all prompts pooled), then the
    median and min–max of those means."""
    run_once(pair, PROMPTS[0], config)  # warm-up: compile the grammar, touch the weights
    per_repeat: list[dict[str, float]] = []
    for _ in range(repeats):
        total = dict.fromkeys((*FIELDS, "rounds"), 0.0)
        for prompt in PROMPTS:
            for key, value in run_once(pair, prompt, config).items():
                total[key] += value
        per_repeat.append({k: total[k] / total["rounds"] for k in FIELDS})
    return {
        k: {
            "median": statistics.median(r[k] for r in per_repeat),
            "min": min(r[k] for r in per_repeat),
            "max": max(r[k] for r in per_repeat),
        }
        for k in FIELDS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, metavar="OUT.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair("embedded", device="cpu")
    settings = {
        "none (general path)": {},
        "regex speaker_line": {"grammar": GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])},
        "json_schema json_person": {"grammar": GrammarSpec(*GRAMMAR_PRESETS["json_person"])},
        "repetition penalty 1.3": {"repetition_penalty": 1.3},
    }
    results = []
    print(
        f"embedded pair, γ = {args.gamma}, {args.max_new_tokens} new tokens, "
        f"{len(PROMPTS)} prompts × {args.repeats} repeats, {args.threads} thread(s); "
        "ms per round: median [min–max of the repeats' means]"
    )
    header = f"{'processor':26} {'T':>3} " + " ".join(f"{f:>20}" for f in FIELDS)
    print(header)
    for name, extra in settings.items():
        for temperature in (0.0, 1.0):
            config = SessionConfig(
                gamma=args.gamma,
                temperature=temperature,
                max_new_tokens=args.max_new_tokens,
                **extra,
            )
            stats = measure(pair, config, args.repeats)
            cells = " ".join(
                f"{s['median']:7.2f} [{s['min']:5.2f}–{s['max']:5.2f}]"
                for s in (stats[f] for f in FIELDS)
            )
            print(f"{name:26} {temperature:>3g} {cells}")
            results.append({"processor": name, "temperature": temperature, **stats})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
