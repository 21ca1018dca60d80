"""Train the EAGLE-1-style draft head of the embedded pair (``assets/models/embedded/eagle``).

Reproducible recipe (``python -m specdec_core.training.eagle``; Li et al. 2024, "EAGLE:
Speculative Sampling Requires Rethinking Feature Uncertainty"):

1. data: the corpus split exactly as ``python -m specdec_core.training.embedded`` splits it
   (speeches joined by end-of-text, first 90 % of the token stream = train, last 10 % =
   validation), encoded with the shipped target's own tokenizer; random 256-token windows
   (``training/loop.py``: ``random_batch``), the training loop ``train`` (AdamW,
   warm-up + cosine over a fixed number of steps, 800 for this head, so the schedule never
   follows the machine's load);
2. the target is frozen: per window one no-grad forward gives its last hidden states
   ``f_0..f_{T−1}`` (after ``ln_f``: the LM head's input) and its next-token distributions;
3. the head reads ``(f_t + noise, wte(x_{t+1}))`` for ``t = 0..T−2`` and predicts
   ``f̂_{t+1}``; loss = SmoothL1(f̂_{t+1}, f_{t+1}) + ``w`` × soft cross-entropy of
   ``lm_head(f̂_{t+1})`` against the *target's distribution* ``softmax(lm_head(f_{t+1}))``
   (as EAGLE's code does; equal to KL(p ‖ q) + H(p), so it trains towards Σ min(p, q),
   the acceptance at T = 1). ``w`` = 1.0 here, heavier than EAGLE-1's 0.1, because the
   budget is minutes on a CPU, not hours on GPUs (EAGLE-3 keeps only the token loss).
   The input noise is EAGLE's uniform U(−0.1, 0.1) on the features (ours have std ≈ 1.3);
4. saved as float16 safetensors + ``config.json``, reloaded in float32 (as the drafter
   loads it) and evaluated teacher-forced on the validation windows against the pair's
   draft model: top-1 agreement with the target and mean Σ min(p, q) at T = 1.

``--max-steps`` fixes the step count and the schedule; ``--minutes`` is then only a cap
(120 unless given; a warning says when it stopped a run). Without ``--max-steps`` the
schedule spans the steps the ``--minutes`` budget allows. With neither, each pair trains
its shipped head's recipe (``RECIPES``): the embedded head 800 steps (23 min on the shared
2-core CPU at load 5–8) under a 120-minute cap, the embedded-zh head a 9-minute budget.
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

from specdec_core.drafters.eagle_head import (
    EagleConfig,
    EagleHead,
    parameter_count,
    target_parts,
)
from specdec_core.drafters.head_files import WEIGHTS
from specdec_core.training.corpus import REPO_ROOT
from specdec_core.training.loop import (
    corpus_split,
    load_frozen,
    pair_defaults,
    parser,
    positive,
    report_args,
    seed_everything,
    train,
    val_windows,
)

#: Each pair's shipped head's recipe, as its ``training_report.json`` records it:
#: (``--max-steps``, ``--minutes``); ``None`` steps: a wall-clock budget run. A pair
#: missing here trains for :data:`DEFAULT_MINUTES`.
RECIPES: dict[str, tuple[int | None, float]] = {
    "embedded": (800, 120.0),
    "embedded-zh": (None, 9.0),
}
DEFAULT_MINUTES = 120.0  # the cap of a run given ``--max-steps`` alone


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped head."""
    ap = parser("python -m specdec_core.training.eagle", __doc__)
    ap.add_argument("--target", type=Path, default=None, help="frozen target folder")
    ap.add_argument(
        "--draft",
        type=Path,
        default=None,
        help="draft model folder, only to compare with in the report",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--minutes", type=float, default=None, help="wall-clock budget (default: the pair's)"
    )
    ap.add_argument("--context", type=int, default=None, help="window (default: target's)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ce-weight", type=float, default=1.0)
    ap.add_argument("--noise", type=float, default=0.1, help="U(-a, a) on input features")
    ap.add_argument(
        "--inner", type=positive, default=None, help="the block's MLP inner width (default 4 d)"
    )
    args = ap.parse_args(argv)
    if args.minutes is None and args.max_steps is None:  # the pair's shipped recipe
        args.max_steps, args.minutes = RECIPES.get(args.pair, (None, DEFAULT_MINUTES))
    elif args.minutes is None:  # fixed steps under the cap
        args.minutes = DEFAULT_MINUTES
    return pair_defaults(args, target="target", draft="draft", out="eagle")


@torch.no_grad()
def target_features(target, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One frozen-target forward: ``[B, T, d]`` float32 last hidden states (after ``ln_f``)
    and ``[B, T, V]`` float32 next-token probabilities at T = 1."""
    out = target(input_ids=x, output_hidden_states=True)
    return out.hidden_states[-1].float(), F.softmax(out.logits.float(), -1)


def head_loss(
    head: EagleHead,
    target,
    ce_weight: float,
    noise: float,
    gen: torch.Generator,
    parts: dict[str, float],
):
    """The loss function ``training.loop.train`` calls with each window batch ``(x, y)``
    (``y`` unused: the labels are the target's own features and distributions). Keeps an
    EMA of each term in ``parts`` (``regression``, ``cross_entropy``; nats for CE)."""
    wte, lm_head = target_parts(target)

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        feats, probs = target_features(target, x)  # [B, T, d], [B, T, V]
        inputs, labels = feats[:, :-1], feats[:, 1:]
        p = probs[:, 1:]  # [B, T-1, V]: the target's distribution after x_{t+1}
        with torch.no_grad():
            emb = wte(x[:, 1:])  # [B, T-1, d]
        if noise > 0:
            inputs = inputs + (torch.rand(inputs.shape, generator=gen) * 2 - 1) * noise
        pred = head(inputs, emb)  # [B, T-1, d]
        reg = F.smooth_l1_loss(pred, labels)
        ce = -(p * F.log_softmax(lm_head(pred), -1)).sum(-1).mean()
        for key, value in (("regression", reg.item()), ("cross_entropy", ce.item())):
            old = parts.get(key)
            parts[key] = value if old is None else 0.95 * old + 0.05 * value
        return reg + ce_weight * ce

    return loss


@torch.no_grad()
def evaluate(
    head: EagleHead, target, draft, val: torch.Tensor, context: int, batch: int
) -> dict[str, float]:
    """Teacher-forced on fixed validation windows (real features as the head's input):
    the head's and the draft's top-1 agreement with the target's next token and mean
    Σ min(p, q) at T = 1, and the head's regression loss / soft CE (nats)."""
    wte, lm_head = target_parts(target)
    xs, _ = val_windows(val, context)
    n = agree_h = agree_d = ov_h = ov_d = reg = ce = 0.0
    for i in range(0, len(xs), batch):
        x = xs[i : i + batch]
        feats, probs = target_features(target, x)
        labels, p = feats[:, 1:], probs[:, 1:]  # [B, T-1, d], [B, T-1, V]
        pred = head(feats[:, :-1], wte(x[:, 1:]))
        logq = F.log_softmax(lm_head(pred).float(), -1)
        qd = F.softmax(draft(input_ids=x).logits.float()[:, 1:], -1)
        count = labels.shape[0] * labels.shape[1]
        agree_h += (logq.argmax(-1) == p.argmax(-1)).sum().item()
        agree_d += (qd.argmax(-1) == p.argmax(-1)).sum().item()
        ov_h += torch.minimum(p, logq.exp()).sum().item()
        ov_d += torch.minimum(p, qd).sum().item()
        reg += F.smooth_l1_loss(pred, labels, reduction="sum").item() / labels.shape[-1]
        ce += -(p * logq).sum().item()
        n += count
    return {
        "head_target_top1_agreement": round(agree_h / n, 4),
        "head_target_mean_min_pq": round(ov_h / n, 4),
        "draft_target_top1_agreement": round(agree_d / n, 4),
        "draft_target_mean_min_pq": round(ov_d / n, 4),
        "head_val_regression": round(reg / n, 4),
        "head_val_cross_entropy": round(ce / n, 4),
        "val_positions": int(n),
    }


def main(argv: list[str] | None = None) -> dict:
    """Run the recipe; write the head and ``training_report.json`` under ``--out`` and
    return the report (a JSON-able dict)."""
    args = parse_args(argv)
    seed_everything(args)
    target = load_frozen(args.target)
    draft = load_frozen(args.draft)
    args.context = args.context or target.config.n_positions

    train_ids, val_ids = corpus_split(args.corpus, args.target)  # the pair's split

    torch.manual_seed(args.seed)
    head = EagleHead(EagleConfig.for_target(target.config, inner=args.inner))
    parts: dict[str, float] = {}
    noise_gen = torch.Generator().manual_seed(args.seed + 1)
    run = train(
        "eagle",
        head,
        head_loss(head, target, args.ce_weight, args.noise, noise_gen, parts),
        train_ids,
        args,
        args.minutes,
        args.seed,
    )
    head.save(args.out)
    head = EagleHead.load(args.out)  # what ships: fp16 weights upcast to float32
    metrics = evaluate(head, target, draft, val_ids, args.context, args.batch)
    print(json.dumps(metrics), flush=True)
    size = (args.out / WEIGHTS).stat().st_size
    report = {
        "source": "Li et al. 2024, EAGLE: Speculative Sampling Requires Rethinking Feature "
        "Uncertainty (EAGLE-1 head: fc(2d→d) + one decoder block)",
        "target": os.path.relpath(args.target.resolve(), REPO_ROOT),
        "corpus": os.path.relpath(args.corpus.resolve(), REPO_ROOT),
        "train_tokens": len(train_ids),
        "val_tokens": len(val_ids),
        "seed": args.seed,
        "args": report_args(args, ("corpus", "out", "target", "draft")),
        "config": json.loads((args.out / "config.json").read_text()),
        "parameters": parameter_count(head),
        "weights_bytes": size,
        "weights_dtype": "float16",
        "loss": f"SmoothL1(f̂, f) + {args.ce_weight} × soft CE(lm_head(f̂), softmax(lm_head(f)))"
        f", input noise U(-{args.noise}, {args.noise})",
        **run,
        "final_regression_ema": round(parts.get("regression", math.nan), 4),
        "final_cross_entropy_ema": round(parts.get("cross_entropy", math.nan), 4),
        **metrics,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    (args.out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
