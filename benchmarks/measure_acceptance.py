"""Measure the embedded pair's acceptance on held-out prompts (for the model card).

For 100 speeches from the held-out last 10 % of the corpus, the prompt is the speaker's
name line plus the first line of the speech; γ = 4, 40 new tokens, greedy and sampled
(T = 1). Prints α (mean Σ min(p, q) over checked positions: accepted drafts and the first
rejected one, ``records.summarize``), mean committed drafts per round, committed /
drafted, the accepted-length histogram, and the target/draft validation perplexity.

    python benchmarks/measure_acceptance.py [--prompts 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.core.models import load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize

CORPUS = Path(__file__).resolve().parents[1] / "data" / "tinyshakespeare.txt"


def heldout_prompts(n: int) -> list[str]:
    text = CORPUS.read_text(encoding="utf-8")
    tail = text[int(len(text) * 0.9) :]
    speeches = [s for s in tail.split("\n\n")[1:] if s.count("\n") >= 2]
    step = max(1, len(speeches) // n)
    return ["\n".join(s.split("\n")[:2]) + "\n" for s in speeches[::step][:n]]


@torch.inference_mode()
def perplexity(model, ids: list[int], window: int) -> float:
    nll, count = 0.0, 0
    for start in range(0, len(ids) - window, window):
        chunk = torch.tensor([ids[start : start + window + 1]])
        logits = model(input_ids=chunk[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
        nll, count = nll + loss.item(), count + window
    return math.exp(nll / count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    pair = load_pair("embedded", device="cpu")
    prompts = heldout_prompts(args.prompts)
    out: dict = {"prompts": len(prompts), "gamma": args.gamma}
    for name, temperature in (("greedy", 0.0), ("sampled_T1", 1.0)):
        records = []
        for i, prompt in enumerate(prompts):
            config = SessionConfig(
                gamma=args.gamma, temperature=temperature, seed=i, max_new_tokens=40
            )
            records += generate(pair, prompt, config).records
        s = summarize(records)
        out[name] = {
            "alpha": s.acceptance_rate,
            "checked_positions": s.checked,
            "mean_accepted": s.mean_accepted,
            "accepted_per_drafted": s.accepted / s.drafted,
            "tokens_per_round": s.tokens_per_round,
            "accepted_histogram": list(s.accepted_histogram),
            "rounds": s.rounds,
            "cut": s.cut,
        }
    ids: list[int] = []  # as in training: speeches separated by the end-of-text token
    for speech in CORPUS.read_text(encoding="utf-8")[-60000:].split("\n\n")[1:]:
        ids += pair.tokenizer.encode(speech) + [pair.eos_token_id]
    out["val_ppl_target"] = perplexity(pair.target, ids, 255)
    out["val_ppl_draft"] = perplexity(pair.draft, ids, 255)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
