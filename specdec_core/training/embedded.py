"""Train the embedded offline GPT-2 target/draft pair shipped in ``assets/models/embedded``.

(The corpus and tokenizer steps are ``specdec_core/training/corpus.py``, the training
loop ``specdec_core/training/loop.py``; this module builds, trains and reports.)

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
fixes the step count instead (the budget then only stops a run early; the tiny test
uses it). The seed fixes initialisation and batch order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from pathlib import Path

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
    CORPORA,
    EOS,
    REPO_ROOT,
    encode_corpus,
    make_tokenizer,
    split_speeches,
    wrap_tokenizer,
)
from specdec_core.training.loop import (
    LossFn,
    pair_defaults,
    parser,
    report_args,
    seed_everything,
    split_ids,
    train,
    val_windows,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped pair."""
    ap = parser("python -m specdec_core.training.embedded", __doc__)
    ap.add_argument("--out", type=Path, default=None, help="default: the pair's folder")
    ap.add_argument("--vocab-size", type=int, default=None, help="default: the pair's")
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
    args = pair_defaults(ap.parse_args(argv), out="")
    if args.vocab_size is None:
        args.vocab_size = CORPORA[args.pair].vocab_size
    return args


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
    seed_everything(args)
    raw = args.corpus.read_bytes()
    speeches = split_speeches(raw.decode("utf-8"))

    tok = make_tokenizer(CORPORA[args.pair].kind, speeches, args.vocab_size)
    hf_tok = wrap_tokenizer(tok, args.context)
    sample = speeches[0]
    assert hf_tok.decode(hf_tok.encode(sample)) == sample, "tokenizer round trip failed"
    vocab = tok.get_vocab_size()
    ids = torch.from_numpy(encode_corpus(tok, speeches))
    train_ids, val_ids = split_ids(ids)
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
        "args": report_args(args, ("corpus", "out")),
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
