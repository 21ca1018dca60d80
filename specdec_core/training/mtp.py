"""Train the embedded pair's multi-token prediction heads (``assets/models/embedded/mtp``).

Reproducible recipe (``python -m specdec_core.training.mtp``; Cai et al. 2024, "Medusa:
Simple LLM Inference Acceleration Framework with Multiple Decoding Heads", Medusa-1:
frozen backbone, heads only):

1. data: the corpus split exactly as ``python -m specdec_core.training.embedded`` splits it
   (speeches joined by end-of-text, first 90 % of the token stream = train, last 10 % =
   validation), encoded with the shipped target's own tokenizer; random 256-token windows
   and the shared loop (``training/loop.py``: AdamW, warm-up + cosine, wall-clock budget);
2. the target is frozen: per window batch one no-grad forward gives its last hidden
   states ``h_0..h_{T−1}`` (after ``ln_f``: the LM head's input) and its next-token
   distributions ``p_0..p_{T−1}`` at T = 1 (``p_t`` = the target's distribution of token
   ``t + 1`` given the true prefix ``x_0..x_t``);
3. head ``k`` (``k = 1..K``) reads ``h_t`` and is trained towards ``p_{t+k}``, the target's
   own distribution of token ``t + k + 1`` given the true prefix: loss = mean over heads
   of the soft cross-entropy ``−Σ_v p_{t+k}(v) log q_{k,t}(v)`` (Medusa-2's
   self-distillation; equal to KL(p ‖ q) + H(p), so it trains towards Σ min(p, q), the
   acceptance at T = 1, and towards the target's argmax, the greedy acceptance). It is
   chosen over plain cross-entropy on the corpus token ``x_{t+k+1}`` because the heads are
   judged against the target, not the corpus: the target's distribution is the exact
   label for what the verifier accepts, and it carries the whole row (a far denser signal
   than one token per position for a minutes-long CPU budget);
4. saved as float16 safetensors + ``config.json``, reloaded in float32 (as the drafter
   loads them) and evaluated teacher-forced on the validation windows, per head: top-1
   agreement with the target's argmax and mean Σ min(p, q) at T = 1.

Budgets are wall-clock minutes; ``--max-steps`` fixes the step count instead (the budget
then only stops a run early; the tiny test uses it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers

from specdec_core.drafters.head_files import WEIGHTS
from specdec_core.drafters.mtp_heads import MtpConfig, MtpHeads, parameter_count
from specdec_core.training.corpus import REPO_ROOT
from specdec_core.training.loop import (
    corpus_split,
    load_frozen,
    pair_defaults,
    parser,
    report_args,
    seed_everything,
    train,
    val_windows,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped heads."""
    ap = parser("python -m specdec_core.training.mtp", __doc__)
    ap.add_argument("--target", type=Path, default=None, help="frozen target folder")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--heads", type=int, default=4, help="K, heads k = 1..K")
    ap.add_argument("--context", type=int, default=None, help="window (default: target's)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    return pair_defaults(ap.parse_args(argv), target="target", out="mtp")


@torch.no_grad()
def target_outputs(target, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One frozen-target forward: ``[B, T, d]`` float32 last hidden states (after ``ln_f``)
    and ``[B, T, V]`` float32 next-token probabilities at T = 1."""
    out = target(input_ids=x, output_hidden_states=True)
    return out.hidden_states[-1].float(), F.softmax(out.logits.float(), -1)


def heads_loss(heads: MtpHeads, target, parts: dict[str, float]):
    """The loss function ``training.loop.train`` calls with each window batch ``(x, y)``
    (``y`` unused: the labels are the target's own distributions). Keeps an EMA of each
    head's soft CE in ``parts`` (``ce_1`` … ``ce_K``, nats)."""
    lm_head = target.get_output_embeddings()

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        hidden, probs = target_outputs(target, x)  # [B, T, d], [B, T, V]
        total = hidden.new_zeros(())
        for k in range(1, heads.k + 1):
            h, p = hidden[:, :-k], probs[:, k:]  # h_t → p_{t+k}: token t + k + 1
            logq = F.log_softmax(lm_head(heads.block(k, h)).float(), -1)
            ce = -(p * logq).sum(-1).mean()
            total = total + ce
            old = parts.get(f"ce_{k}")
            parts[f"ce_{k}"] = ce.item() if old is None else 0.95 * old + 0.05 * ce.item()
        return total / heads.k

    return loss


@torch.no_grad()
def evaluate(heads: MtpHeads, target, val: torch.Tensor, context: int, batch: int) -> dict:
    """Teacher-forced on fixed validation windows, per head ``k``: top-1 agreement of head
    ``k`` at ``t`` with the target's argmax at ``t + k`` and mean Σ min(p, q) at T = 1, its
    soft CE (nats); and, as the baseline, the same for the target's own row at ``t``
    standing in for head ``k`` (what the zero-initialised head starts from)."""
    lm_head = target.get_output_embeddings()
    xs, _ = val_windows(val, context)
    keys = ("agree", "min_pq", "ce", "base_agree", "base_min_pq", "n")
    acc = {k: dict.fromkeys(keys, 0.0) for k in range(1, heads.k + 1)}
    for i in range(0, len(xs), batch):
        hidden, probs = target_outputs(target, xs[i : i + batch])
        for k in range(1, heads.k + 1):
            h, p = hidden[:, :-k], probs[:, k:]
            logq = F.log_softmax(lm_head(heads.block(k, h)).float(), -1)
            base = probs[:, :-k]  # the target's row at t: the identity head
            a = acc[k]
            top = p.argmax(-1)
            a["agree"] += (logq.argmax(-1) == top).sum().item()
            a["min_pq"] += torch.minimum(p, logq.exp()).sum().item()
            a["ce"] += -(p * logq).sum().item()
            a["base_agree"] += (base.argmax(-1) == top).sum().item()
            a["base_min_pq"] += torch.minimum(p, base).sum().item()
            a["n"] += p.shape[0] * p.shape[1]
    per_head = []
    for k, a in acc.items():
        n = a["n"]
        per_head.append(
            {
                "head": k,
                "tokens_ahead": k + 1,
                "target_top1_agreement": round(a["agree"] / n, 4),
                "target_mean_min_pq": round(a["min_pq"] / n, 4),
                "val_cross_entropy": round(a["ce"] / n, 4),
                "identity_top1_agreement": round(a["base_agree"] / n, 4),
                "identity_mean_min_pq": round(a["base_min_pq"] / n, 4),
                "val_positions": int(n),
            }
        )
    return {"per_head": per_head}


def main(argv: list[str] | None = None) -> dict:
    """Run the recipe; write the heads and ``training_report.json`` under ``--out`` and
    return the report (a JSON-able dict)."""
    args = parse_args(argv)
    seed_everything(args)
    target = load_frozen(args.target)
    args.context = args.context or target.config.n_positions

    train_ids, val_ids = corpus_split(args.corpus, args.target)  # the pair's split

    torch.manual_seed(args.seed)
    heads = MtpHeads(MtpConfig.for_target(target.config, args.heads))
    parts: dict[str, float] = {}
    run = train(
        "mtp", heads, heads_loss(heads, target, parts), train_ids, args, args.minutes, args.seed
    )
    heads.save(args.out)
    heads = MtpHeads.load(args.out)  # what ships: fp16 weights upcast to float32
    metrics = evaluate(heads, target, val_ids, args.context, args.batch)
    print(json.dumps(metrics), flush=True)
    size = (args.out / WEIGHTS).stat().st_size
    report = {
        "source": "Cai et al. 2024, Medusa: Simple LLM Inference Acceleration Framework with "
        "Multiple Decoding Heads (Medusa-1 heads: h + SiLU(W_k h + b_k) into the frozen LM "
        "head; loss: Medusa-2 self-distillation)",
        "target": os.path.relpath(args.target.resolve(), REPO_ROOT),
        "corpus": os.path.relpath(args.corpus.resolve(), REPO_ROOT),
        "train_tokens": len(train_ids),
        "val_tokens": len(val_ids),
        "seed": args.seed,
        "args": report_args(args, ("corpus", "out", "target")),
        "config": json.loads((args.out / "config.json").read_text()),
        "parameters": parameter_count(heads),
        "weights_bytes": size,
        "weights_dtype": "float16",
        "loss": "mean over heads k of soft CE(lm_head(r_k(h_t)), softmax(target logits at t+k))",
        **run,
        "final_cross_entropy_ema": {
            k: round(v, 4) for k, v in sorted(parts.items()) if not math.isnan(v)
        },
        **metrics,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    (args.out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
