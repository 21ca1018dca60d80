"""Train the recurrent drafter of the embedded pair (``assets/models/embedded/recurrent``).

Reproducible recipe (``python -m specdec_core.training.recurrent``):

1. data: the corpus split exactly as ``python -m specdec_core.training.embedded`` splits
   it (speeches joined by end-of-text, first 90 % of the token stream = train, last 10 % =
   validation), encoded with the shipped target's tokenizer;
2. the model: one GRU layer (``drafters/recurrent_lm.py``: embedding ``E``, state ``H``,
   layer norm, LM head over the pair's ``V``), read from a zero state at the start of each
   random ``--context``-token window;
3. the loss (``--loss``): next-token cross-entropy (``ce``, the default:
   ``training/embedded.lm_loss``, the target's own loss; the shipped model was trained
   on a machine shared by eight jobs, where the target forward of ``distill`` would have
   cost most of the budget) or the draft model's distillation, ``KL(p || q)`` against the
   frozen target at every position + 0.1 × cross-entropy (``distill``,
   ``training/embedded.distill_loss``), with the shared loop ``training/loop.py``
   (AdamW, warm-up + cosine, wall-clock budget, seed 0);
4. saved as float16 safetensors + ``config.json``, reloaded in float32 (as the drafter
   loads it) and measured: validation perplexity, top-1 agreement with the target and
   mean Σ min(p, q) at T = 1 on the fixed validation windows
   (``training/embedded.evaluate``), then greedy speculative decoding through the real
   engine on held-out prompts at γ = 4, with the state restored on rejection and (the
   lesson's wrong way) without (``lessons/wrong_state.py``).

``--eval-only`` measures the saved model again without training.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers

from specdec_core.drafters.recurrent_lm import (
    WEIGHTS,
    RecurrentConfig,
    RecurrentLM,
    load_recurrent,
    save_recurrent,
)
from specdec_core.training.corpus import REPO_ROOT
from specdec_core.training.embedded import distill_loss, evaluate, lm_loss
from specdec_core.training.loop import (
    corpus_split,
    load_frozen,
    pair_defaults,
    parser,
    report_args,
    seed_everything,
    train,
)

REPORT = "training_report.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped recurrent drafter."""
    ap = parser("python -m specdec_core.training.recurrent", __doc__)
    ap.add_argument("--target", type=Path, default=None, help="frozen target folder")
    ap.add_argument("--draft", type=Path, default=None, help="the pair's draft")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--minutes", type=float, default=18.0)
    ap.add_argument("--loss", choices=["ce", "distill"], default="ce")
    ap.add_argument("--embed", type=int, default=128, help="E, token embedding width")
    ap.add_argument("--hidden", type=int, default=256, help="H, the state's width")
    ap.add_argument("--context", type=int, default=64, help="window length T, tokens")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--accept-prompts", type=int, default=30, help="held-out prompts, γ 4")
    ap.add_argument("--accept-tokens", type=int, default=32, help="new tokens per prompt")
    ap.add_argument("--eval-only", action="store_true", help="measure the saved model")
    return pair_defaults(ap.parse_args(argv), target="target", draft="draft", out="recurrent")


def acceptance(args: argparse.Namespace) -> dict:
    """Greedy speculative decoding at γ = 4 on ``--accept-prompts`` held-out prompts,
    ``--accept-tokens`` new tokens each, through the engine: the recurrent drafter (state
    restored, and not restored) and the pair's draft model
    (:func:`specdec_core.lessons.wrong_state.measure_restore`)."""
    from specdec_core.core.models import load_pair
    from specdec_core.lessons.wrong_state import heldout_prompts, measure_restore

    pair = load_pair((args.target, args.draft), device="cpu", allow_custom=True)
    prompts = heldout_prompts(args.corpus, args.accept_prompts)
    model = load_recurrent(args.out)
    rows = measure_restore(pair, model, prompts, 4, args.accept_tokens)
    measured = {name: asdict(row) for name, row in rows.items()}
    return {"prompts": len(prompts), "new_tokens": args.accept_tokens, "gamma": 4, **measured}


def main(argv: list[str] | None = None) -> dict:
    """Run the recipe; write the model and ``training_report.json`` under ``--out`` and
    return the report (a JSON-able dict)."""
    args = parse_args(argv)
    seed_everything(args)
    target = load_frozen(args.target)
    train_ids, val_ids = corpus_split(args.corpus, args.target)  # the pair's split
    if args.eval_only:
        report = json.loads((args.out / REPORT).read_text("utf-8"))
    else:
        config = RecurrentConfig(target.config.vocab_size, args.embed, args.hidden)
        model = RecurrentLM(config)
        if args.loss == "ce":
            loss = lm_loss(model)
        else:
            loss = distill_loss(model, target, ce_weight=0.1)
        run = train("recurrent", model, loss, train_ids, args, args.minutes, args.seed)
        save_recurrent(model, args.out)
        report = {
            "source": "a GRU language model (Cho et al. 2014) on the pair's corpus and tokenizer",
            "target": os.path.relpath(args.target.resolve(), REPO_ROOT),
            "corpus": os.path.relpath(args.corpus.resolve(), REPO_ROOT),
            "train_tokens": len(train_ids),
            "val_tokens": len(val_ids),
            "seed": args.seed,
            "args": report_args(args, ("corpus", "out", "target", "draft")),
            "config": vars(config),
            "parameters": sum(p.numel() for p in model.parameters()),
            "weights_bytes": (args.out / WEIGHTS).stat().st_size,
            "weights_dtype": "float16",
            "loss": "cross-entropy, every position"
            if args.loss == "ce"
            else "KL(p_target || q_recurrent) + 0.1 * cross-entropy, every position",
            **run,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "torch_version": torch.__version__,
            "transformers_version": transformers.__version__,
        }
    model = load_recurrent(args.out)  # what ships: fp16 weights read back in float32
    t0 = time.perf_counter()
    metrics = evaluate(target, model, val_ids, args.context, args.batch)
    metrics = {k.replace("draft_", "recurrent_"): v for k, v in metrics.items()}
    print(json.dumps(metrics), flush=True)
    report.update(metrics, eval_seconds=round(time.perf_counter() - t0, 1))
    if args.accept_prompts > 0:
        report["greedy_acceptance"] = acceptance(args)
        report["load_average_after_eval"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(report["greedy_acceptance"]), flush=True)
    (args.out / REPORT).write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    return report


if __name__ == "__main__":
    main()
