"""Train the parallel block drafter of the embedded pair (``assets/models/embedded/block``).

Reproducible recipe (``python -m specdec_core.training.block``; An et al. 2025, "PARD:
Accelerating LLM Inference with Low-Cost PARallel Draft Model Adaptation"):

1. data: the corpus split exactly as ``python -m specdec_core.training.embedded`` splits
   it (speeches joined by end-of-text, first 90 % of the token stream = train, last 10 % =
   validation), encoded with the shipped target's tokenizer; random ``--context``-token
   windows and the shared loop ``training/loop.py`` (AdamW, warm-up + cosine, wall-clock
   budget, seed 0);
2. the model: the pair's draft model (GPT-2, 2 layers, 128 wide) with one extra token,
   the mask ``[M]`` (id ``V``): embeddings resized to ``V + 1`` rows, the new row set to
   the mean token embedding; every logit row is sliced back to the first ``V`` columns;
3. many blocks per window in one forward (PARD's trick, with a 4-D attention mask): the
   window ``x_0 … x_{T−1}`` is followed by ``K`` groups of ``B − 1`` masks. Group ``k``
   belongs to a cut point ``t_k`` (``K`` distinct, uniform in ``0 … T − B``, fresh each
   step): its ``j``-th mask sits at position ``t_k + j`` and attends to ``x_0 … x_{t_k}``
   and to the group's earlier masks only, exactly what the drafter's input
   ``x_≤t + [M] × (γ − 1)`` shows it at inference;
4. labels from the frozen target (no grad), self-distillation on its own continuation
   (as Medusa-2 distils from the model's outputs): one forward over the window gives
   ``p_t`` at every position; from each cut ``t_k`` the target then continues greedily,
   ``g_1 = argmax p_{t_k}``, ``g_{j+1} = argmax p(· | x_≤t_k, g_1 … g_j)``, all ``K``
   chains at once (one cached forward per step, a 4-D mask: ``B − 1`` small forwards).
   Loss = soft cross-entropy of the ordinary rows (``q_1`` at every ``t``) against
   ``p_t`` + soft cross-entropy of mask ``j`` of cut ``k`` against ``p(· | x_≤t_k,
   g_1 … g_j)`` (means over their rows, nats): exactly the rows a greedy round checks
   once ``y_<j`` were accepted, so it trains towards greedy acceptance and Σ min(p, q)
   along the target's own continuation (``--labels text`` instead uses ``p_{t_k + j}``
   given the true text, PARD's data);
5. saved as an ordinary GPT-2 folder (float16 safetensors, ``config.json`` with
   ``vocab_size = V + 1``, ``block_mask_token_id = V``, ``block_size = B``), reloaded in
   float32 and measured on the validation windows (cuts every ``B`` positions), per
   offset ``j``, along the target's greedy continuation: top-1 agreement with the
   target's greedy token ``g_j`` and mean Σ min(p_j, q_j) at T = 1, for the block's
   ``q_j`` (from ``x_≤t`` and masks alone) and for the plain draft model's serial ``q``
   given ``x_≤t, g_<j`` (what it sees once its drafts ``y_<j`` were accepted); and greedy
   acceptance of both drafters at γ 4 and 8 on held-out prompts through the real engine.

Steps 2–4 are ``training/block_loss.py``, step 5's measurements ``training/block_eval.py``.
Budgets are wall-clock minutes; ``--max-steps`` fixes the step count instead (the budget
then only stops a run early; the tiny test uses it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM

from specdec_core.training.block_eval import evaluate, greedy_acceptance
from specdec_core.training.block_loss import add_mask_token, block_loss
from specdec_core.training.corpus import REPO_ROOT
from specdec_core.training.loop import (
    corpus_split,
    load_frozen,
    pair_defaults,
    parser,
    report_args,
    seed_everything,
    train,
)

WEIGHTS = "model.safetensors"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped block drafter."""
    ap = parser("python -m specdec_core.training.block", __doc__)
    ap.add_argument("--target", type=Path, default=None, help="frozen target folder")
    ap.add_argument("--draft", type=Path, default=None, help="draft model to adapt")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--minutes", type=float, default=17.0)
    ap.add_argument("--block", type=int, default=8, help="B, positions per block (max γ)")
    ap.add_argument("--cuts", type=int, default=16, help="K, blocks per window")
    ap.add_argument("--context", type=int, default=128, help="window length T, tokens")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--labels", choices=["greedy", "text"], default="greedy", help="mask labels")
    ap.add_argument("--accept-prompts", type=int, default=30, help="held-out prompts, γ 4 / 8")
    ap.add_argument("--accept-tokens", type=int, default=32, help="new tokens per prompt")
    return pair_defaults(ap.parse_args(argv), target="target", draft="draft", out="block")


def main(argv: list[str] | None = None) -> dict:
    """Run the recipe; write the model and ``training_report.json`` under ``--out`` and
    return the report (a JSON-able dict)."""
    args = parse_args(argv)
    seed_everything(args)
    target = load_frozen(args.target)
    draft = load_frozen(args.draft)
    if args.context + args.block - 1 > draft.config.n_positions:
        raise SystemExit(f"--context {args.context} too long for {draft.config.n_positions}")

    train_ids, val_ids = corpus_split(args.corpus, args.target)  # the pair's split

    load = {"dtype": torch.float32, "use_safetensors": True, "trust_remote_code": False}
    model = AutoModelForCausalLM.from_pretrained(args.draft, **load)
    model.requires_grad_(True)
    mask_id = add_mask_token(model)
    model.config.block_size = args.block
    parts: dict[str, float] = {}
    rng = random.Random(args.seed + 1)
    run = train(
        "block",
        model,
        block_loss(model, target, args.block, args.cuts, mask_id, rng, parts, args.labels),
        train_ids,
        args,
        args.minutes,
        args.seed,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(args.out, safe_serialization=True)
    # What ships: the fp16 weights reloaded in float32, as the drafter loads them.
    model = load_frozen(args.out)
    metrics = evaluate(model, target, draft, val_ids, args.context, args.block, args.batch)
    print(json.dumps(metrics), flush=True)
    acceptance = greedy_acceptance(args, model) if args.accept_prompts > 0 else {}
    print(json.dumps(acceptance), flush=True)
    report = {
        "source": "An et al. 2025, PARD: Accelerating LLM Inference with Low-Cost PARallel "
        "Draft Model Adaptation (mask tokens after the prefix, one forward per block)",
        "target": os.path.relpath(args.target.resolve(), REPO_ROOT),
        "draft": os.path.relpath(args.draft.resolve(), REPO_ROOT),
        "corpus": os.path.relpath(args.corpus.resolve(), REPO_ROOT),
        "train_tokens": len(train_ids),
        "val_tokens": len(val_ids),
        "seed": args.seed,
        "args": report_args(args, ("corpus", "out", "target", "draft")),
        "block_size": args.block,
        "mask_token_id": mask_id,
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_bytes": (args.out / WEIGHTS).stat().st_size,
        "weights_dtype": "float16",
        "loss": "soft CE(q_1 rows, p_t) + soft CE(mask j rows, p after "
        + ("x_<=t + the target's greedy g_1..g_j" if args.labels == "greedy" else "the true text")
        + f"), means over rows, {args.cuts} blocks of {args.block} per window (4-D mask)",
        **run,
        "final_first_row_ce_ema": round(parts.get("first_row", math.nan), 4),
        "final_mask_rows_ce_ema": round(parts.get("mask_rows", math.nan), 4),
        **metrics,
        "greedy_acceptance": acceptance,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    (args.out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
