"""The training loop the four recipes share (``python -m specdec_core.training.X``: X =
``embedded`` the pair, ``eagle``, ``mtp``, ``block`` its drafters): the common
command-line options (``--pair`` picks the corpus, tokenizer and folders:
:func:`pair_defaults`), seeding, the 90 / 10 split of the token stream, random training
windows, AdamW with a linear warmup and a cosine decay over ``--max-steps`` or a wall-clock
budget, and the fixed validation windows. The report's ``args`` block is :func:`report_args`.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from specdec_core.training.corpus import CORPORA, REPO_ROOT, encode_corpus, split_speeches

MODELS = REPO_ROOT / "assets/models"
DEFAULT_CORPUS = CORPORA["embedded"].path
WARMUP_STEPS = 50  # at most; never more than 10% of the estimated steps
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, y) (B, T) -> scalar


def positive(text: str) -> int:
    """An ``int ≥ 1`` option (argparse type)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not ≥ 1")
    return value


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """A recipe's parser with the options every recipe has (``--pair``, ``--corpus``,
    ``--seed``, ``--max-steps``, ``--threads``); each recipe adds its own."""
    ap = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pair", choices=sorted(CORPORA), default="embedded")
    ap.add_argument("--corpus", type=Path, default=None, help="default: the pair's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--max-steps", type=positive, default=None, help="fixed steps (the budget only stops early)"
    )
    ap.add_argument("--threads", type=int, default=2)
    return ap


def pair_defaults(args: argparse.Namespace, **folders: str) -> argparse.Namespace:
    """``args`` with the options left unset filled from ``--pair``: ``--corpus`` (its
    :data:`~specdec_core.training.corpus.CORPORA` file) and each option named in
    ``folders`` (option → subfolder of ``assets/models/<pair>``, ``""`` for the folder)."""
    if args.corpus is None:
        args.corpus = CORPORA[args.pair].path
    for option, sub in folders.items():
        if getattr(args, option) is None:
            setattr(args, option, MODELS / args.pair / sub if sub else MODELS / args.pair)
    return args


def seed_everything(args: argparse.Namespace) -> None:
    """``--threads`` torch CPU threads; Python's, NumPy's and torch's RNGs seeded with
    ``--seed``."""
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)


def split_ids(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The token stream's first 90 % for training, the rest for validation."""
    n_train = int(len(ids) * 0.9)
    return ids[:n_train], ids[n_train:]


def load_frozen(path: Path) -> PreTrainedModel:
    """A saved model in float32 (safetensors only, never remote code), eval mode, no
    gradients: the frozen target (or draft) a recipe reads."""
    load = {"dtype": torch.float32, "use_safetensors": True, "trust_remote_code": False}
    return AutoModelForCausalLM.from_pretrained(path, **load).eval().requires_grad_(False)


def corpus_split(corpus: Path, tokenizer_dir: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair's training and validation token streams (``[N]`` int64 each): the corpus
    split into speeches joined by end-of-text (``training/corpus.py``), encoded with the
    tokenizer saved in ``tokenizer_dir``, first 90 % / last 10 % (:func:`split_ids`)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    speeches = split_speeches(corpus.read_bytes().decode("utf-8"))
    ids = torch.from_numpy(encode_corpus(tokenizer.backend_tokenizer, speeches))
    train_ids, val_ids = split_ids(ids)
    print(f"train {len(train_ids)} / val {len(val_ids)} tokens ({tokenizer_dir})", flush=True)
    return train_ids, val_ids


def report_args(args: argparse.Namespace, paths: tuple[str, ...]) -> dict:
    """The options for the report (paths named in ``paths`` left out: they are reported
    relative to the repository)."""
    return {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in paths
    }


def random_batch(
    data: torch.Tensor, batch: int, context: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows: inputs x and next-token labels y, both (B, T) int64."""
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=gen)
    rows = torch.stack([data[s : s + context + 1] for s in starts.tolist()])  # (B, T + 1)
    return rows[:, :-1], rows[:, 1:]


def train(
    name: str,
    model: torch.nn.Module,
    loss_fn: LossFn,
    data: torch.Tensor,
    args: argparse.Namespace,
    minutes: float,
    seed: int,
) -> dict[str, float]:
    """Train ``model`` with AdamW, a linear warmup and a cosine decay to 10% of ``--lr``.
    With ``--max-steps`` the schedule spans exactly that many steps whatever the machine's
    speed, and ``minutes`` only stops a run early (a printed warning; ``steps`` tells).
    Without it the run lasts ``minutes`` of wall time: the steps the budget allows are
    estimated from the measured step time and re-estimated every 50 steps.
    Returns {"steps", "seconds", "final_loss"} (seconds of wall time, loss in nats)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    budget_s = minutes * 60.0
    fixed = args.max_steps is not None
    est_steps = args.max_steps if fixed else 10**9
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
            if fixed and step < est_steps:
                print(f"[{name}] warning: the budget stopped it at {step}/{est_steps} steps")
            break
        if not fixed and (step == 5 or step % 50 == 0):  # the steps the budget allows
            est_steps = max(step + 1, int(budget_s / (elapsed / step)))
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
