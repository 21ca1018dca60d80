"""Train the embedded offline GPT-2 target/draft pair shipped in ``assets/models/embedded``.

(The corpus and tokenizer steps are ``embedded_corpus``; this module trains and reports.)

Reproducible recipe (``python -m specdec_core.training.embedded``):

1. a byte-level BPE tokenizer (the GPT-2 algorithm, ``tokenizers`` library) trained on
   Tiny Shakespeare, with ``<|endoftext|>`` as id 0, closing every speech;
2. the *target*: a 4-layer, 256-wide GPT-2 trained with cross-entropy for a wall-clock
   budget (AdamW, linear warmup, cosine decay over the estimated number of steps);
3. the *draft*: a 2-layer, 128-wide GPT-2 with the same tokenizer, distilled from the
   target: ``KL(p || q)`` over every position of the training windows, + 0.1 × CE;
4. both saved as float16 safetensors with the tokenizer, then reloaded in float32 (the way
   the app loads them) to measure validation perplexity and how often the draft agrees
   with the target; everything lands in ``training_report.json``.

Budgets are wall-clock minutes, so step counts depend on the machine; ``--max-steps``
caps them (the tiny test uses it). The seed fixes initialisation and batch order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)

from specdec_core.training.corpus import (
    EOS,
    encode_corpus,
    split_speeches,
    train_tokenizer,
    wrap_tokenizer,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = REPO_ROOT / "data/tinyshakespeare.txt"
DEFAULT_OUT = REPO_ROOT / "assets/models/embedded"
WARMUP_STEPS = 50  # at most; never more than 10% of the estimated steps
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, y) (B, T) -> scalar


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped pair."""
    ap = argparse.ArgumentParser(
        prog="python -m specdec_core.training.embedded",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--target-minutes", type=float, default=14.0)
    ap.add_argument("--draft-minutes", type=float, default=5.0)
    ap.add_argument("--target-layers", type=int, default=4)
    ap.add_argument("--target-width", type=int, default=256)
    ap.add_argument("--target-heads", type=int, default=4)
    ap.add_argument("--draft-layers", type=int, default=2)
    ap.add_argument("--draft-width", type=int, default=128)
    ap.add_argument("--draft-heads", type=int, default=2)
    ap.add_argument("--context", type=int, default=256, help="window length, tokens")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-steps", type=int, default=None, help="cap on steps per model")
    ap.add_argument("--threads", type=int, default=2)
    return ap.parse_args(argv)


def gpt2(
    vocab: int, context: int, layers: int, width: int, heads: int, dropout: float
) -> GPT2LMHeadModel:
    """A freshly initialised GPT-2 (initialisation drawn from torch's global RNG)."""
    cfg = GPT2Config(
        vocab_size=vocab,
        n_positions=context,
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(cfg)


def random_batch(
    data: torch.Tensor, batch: int, context: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows: inputs x and next-token labels y, both (B, T) int64."""
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=gen)
    rows = torch.stack([data[s : s + context + 1] for s in starts.tolist()])  # (B, T + 1)
    return rows[:, :-1], rows[:, 1:]


def lm_loss(model: GPT2LMHeadModel) -> LossFn:
    """Mean next-token cross-entropy (nats) of ``model``."""

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(input_ids=x).logits.flatten(0, 1), y.flatten())  # (BT, V)

    return loss


def distill_loss(draft: GPT2LMHeadModel, target: GPT2LMHeadModel, ce_weight: float) -> LossFn:
    """``KL(p || q)`` per position (p: frozen target, q: draft, temperature 1), averaged
    over all B·T positions, plus ``ce_weight`` × the draft's cross-entropy on the labels."""
    target.eval()

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            logp = F.log_softmax(target(input_ids=x).logits.float(), -1).flatten(0, 1)  # (BT, V)
        logits = draft(input_ids=x).logits.flatten(0, 1)  # (BT, V)
        logq = F.log_softmax(logits, -1)
        kl = F.kl_div(logq, logp, log_target=True, reduction="batchmean")
        return kl + ce_weight * F.cross_entropy(logits, y.flatten())

    return loss


def train(
    name: str,
    model: GPT2LMHeadModel,
    loss_fn: LossFn,
    data: torch.Tensor,
    args: argparse.Namespace,
    minutes: float,
    seed: int,
) -> dict[str, float]:
    """Train ``model`` for ``minutes`` of wall time (or ``--max-steps``) with AdamW, a
    linear warmup and a cosine decay to 10% of ``--lr``. The number of steps the budget
    allows is estimated from the measured step time and re-estimated every 50 steps.
    Returns {"steps", "seconds", "final_loss"} (seconds of wall time, loss in nats)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    budget_s = minutes * 60.0
    est_steps = cap = args.max_steps if args.max_steps is not None else 10**9
    model.train()
    t0 = time.perf_counter()
    step, ema = 0, float("nan")
    while step < est_steps:
        warmup = max(1, min(WARMUP_STEPS, est_steps // 10))
        if step < warmup:
            lr = args.lr * (step + 1) / warmup
        else:
            frac = min(1.0, (step - warmup) / max(1, est_steps - warmup))
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = random_batch(data, args.batch, args.context, gen)
        loss = loss_fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if math.isnan(ema) else 0.95 * ema + 0.05 * loss.item()
        elapsed = time.perf_counter() - t0
        if elapsed >= budget_s:
            break
        if step == 5 or step % 50 == 0:  # re-estimate the steps the budget allows
            est_steps = min(cap, max(step + 1, int(budget_s / (elapsed / step))))
        if step % 50 == 0 or step in (1, 5):
            print(
                f"[{name}] step {step:5d}/{est_steps}  loss {loss.item():.3f} (ema {ema:.3f})"
                f"  lr {lr:.2e}  {elapsed:6.0f}s",
                flush=True,
            )
    seconds = time.perf_counter() - t0
    print(f"[{name}] done: {step} steps in {seconds:.0f}s, loss ema {ema:.3f}", flush=True)
    model.eval()
    return {"steps": step, "seconds": round(seconds, 1), "final_loss": round(ema, 4)}


def val_windows(val: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed, non-overlapping validation windows: x, y both (W, T) int64."""
    t = min(context, len(val) - 1)
    n = (len(val) - 1) // t
    x = val[: n * t].view(n, t)
    y = val[1 : n * t + 1].view(n, t)
    return x, y


@torch.no_grad()
def evaluate(
    target: GPT2LMHeadModel, draft: GPT2LMHeadModel, val: torch.Tensor, context: int, batch: int
) -> dict[str, float]:
    """Validation perplexity of both models (exp of the mean next-token CE over all positions
    of the fixed windows); teacher-forced on the same positions, how often the draft's argmax
    equals the target's (a proxy for greedy acceptance) and the mean Σ min(p, q) at
    temperature 1 (expected acceptance of speculative sampling, Leviathan et al. 2023)."""
    xs, ys = val_windows(val, context)
    ce_t = ce_d = agree = overlap = 0.0
    for i in range(0, len(xs), batch):
        x, y = xs[i : i + batch], ys[i : i + batch]
        lt = target(input_ids=x).logits.float().flatten(0, 1)  # (BT, V)
        ld = draft(input_ids=x).logits.float().flatten(0, 1)
        ce_t += F.cross_entropy(lt, y.flatten(), reduction="sum").item()
        ce_d += F.cross_entropy(ld, y.flatten(), reduction="sum").item()
        agree += (lt.argmax(-1) == ld.argmax(-1)).sum().item()
        overlap += torch.minimum(lt.softmax(-1), ld.softmax(-1)).sum().item()
    n = ys.numel()
    return {
        "target_val_ppl": round(math.exp(ce_t / n), 3),
        "draft_val_ppl": round(math.exp(ce_d / n), 3),
        "draft_target_top1_agreement": round(agree / n, 4),
        "draft_target_mean_min_pq": round(overlap / n, 4),
        "val_positions": n,
    }


def save(model: GPT2LMHeadModel, tok: PreTrainedTokenizerFast, folder: Path) -> None:
    """float16 safetensors + config + tokenizer into ``folder``."""
    model.half().save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)


def main(argv: list[str] | None = None) -> dict:
    """Run the whole recipe; write the models and ``training_report.json`` under
    ``--out`` and return the report (a JSON-able dict)."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    raw = args.corpus.read_bytes()
    speeches = split_speeches(raw.decode("utf-8"))

    tok = train_tokenizer(speeches, args.vocab_size)
    hf_tok = wrap_tokenizer(tok, args.context)
    sample = speeches[0]
    assert hf_tok.decode(hf_tok.encode(sample)) == sample, "tokenizer round trip failed"
    vocab = tok.get_vocab_size()
    ids = torch.from_numpy(encode_corpus(tok, speeches))
    n_train = int(len(ids) * 0.9)
    train_ids, val_ids = ids[:n_train], ids[n_train:]
    print(
        f"corpus {len(raw)} bytes, {len(speeches)} speeches, vocab {vocab}, "
        f"train {len(train_ids)} / val {len(val_ids)} tokens",
        flush=True,
    )

    torch.manual_seed(args.seed)
    target = gpt2(
        vocab, args.context, args.target_layers, args.target_width, args.target_heads, dropout=0.1
    )
    target_run = train(
        "target", target, lm_loss(target), train_ids, args, args.target_minutes, args.seed
    )
    torch.manual_seed(args.seed + 1)
    # No dropout in the draft: it is small, trained briefly, and should copy the target.
    draft = gpt2(
        vocab, args.context, args.draft_layers, args.draft_width, args.draft_heads, dropout=0.0
    )
    draft_run = train(
        "draft",
        draft,
        distill_loss(draft, target, ce_weight=0.1),
        train_ids,
        args,
        args.draft_minutes,
        args.seed + 1,
    )

    out = args.out
    save(target, hf_tok, out / "target")
    save(draft, hf_tok, out / "draft")
    # Measure what ships: the fp16 weights, reloaded in float32 as the app loads them.
    t0 = time.perf_counter()
    target = AutoModelForCausalLM.from_pretrained(out / "target", dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(out / "draft", dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    metrics = evaluate(target, draft, val_ids, args.context, args.batch)
    print(json.dumps(metrics), flush=True)

    report = {
        "corpus": os.path.relpath(args.corpus.resolve(), REPO_ROOT),
        "corpus_bytes": len(raw),
        "corpus_sha256": hashlib.sha256(raw).hexdigest(),
        "speeches": len(speeches),
        "vocab_size": vocab,
        "eos_token": EOS,
        "eos_token_id": tok.token_to_id(EOS),
        "train_tokens": len(train_ids),
        "val_tokens": len(val_ids),
        "seed": args.seed,
        "args": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in vars(args).items()
            if k not in ("corpus", "out")
        },
        "target": {
            "config": json.loads((out / "target/config.json").read_text()),
            "parameters": sum(p.numel() for p in target.parameters()),
            "loss": "cross-entropy, dropout 0.1",
            **target_run,
        },
        "draft": {
            "config": json.loads((out / "draft/config.json").read_text()),
            "parameters": sum(p.numel() for p in draft.parameters()),
            "loss": "KL(p_target || q_draft) + 0.1 * cross-entropy, dropout 0",
            **draft_run,
        },
        **metrics,
        "weights_dtype": "float16",
        "load_seconds_both": round(load_s, 3),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    (out / "training_report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


if __name__ == "__main__":
    main()
