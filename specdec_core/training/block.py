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

Budgets are wall-clock minutes; ``--max-steps`` caps them (the tiny test uses it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModelForCausalLM, DynamicCache

from specdec_core.training.loop import (
    REPO_ROOT,
    corpus_split,
    load_frozen,
    parser,
    report_args,
    seed_everything,
    train,
    val_windows,
)

DEFAULT_TARGET = REPO_ROOT / "assets/models/embedded/target"
DEFAULT_DRAFT = REPO_ROOT / "assets/models/embedded/draft"
DEFAULT_OUT = REPO_ROOT / "assets/models/embedded/block"
WEIGHTS = "model.safetensors"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; every default is the recipe of the shipped block drafter."""
    ap = parser("python -m specdec_core.training.block", __doc__)
    ap.add_argument("--target", type=Path, default=DEFAULT_TARGET, help="frozen target folder")
    ap.add_argument("--draft", type=Path, default=DEFAULT_DRAFT, help="draft model to adapt")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--minutes", type=float, default=17.0)
    ap.add_argument("--block", type=int, default=8, help="B, positions per block (max γ)")
    ap.add_argument("--cuts", type=int, default=16, help="K, blocks per window")
    ap.add_argument("--context", type=int, default=128, help="window length T, tokens")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--labels", choices=["greedy", "text"], default="greedy", help="mask labels")
    ap.add_argument("--accept-prompts", type=int, default=30, help="held-out prompts, γ 4 / 8")
    ap.add_argument("--accept-tokens", type=int, default=32, help="new tokens per prompt")
    return ap.parse_args(argv)


def add_mask_token(model) -> int:
    """Resize ``model``'s (tied) embeddings from ``V`` to ``V + 1`` rows; the new row (the
    mask ``[M]``) is the mean of the ``V`` token embeddings. Writes ``block_mask_token_id``
    into the config; returns it (``V``)."""
    vocab = model.config.vocab_size
    model.resize_token_embeddings(vocab + 1, mean_resizing=False)
    with torch.no_grad():
        wte = model.get_input_embeddings().weight  # [V + 1, d]
        wte[vocab] = wte[:vocab].mean(0)
    model.config.block_mask_token_id = vocab
    return vocab


def block_layout(
    context: int, cuts: list[int], block: int, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layout of one training row: ``T`` window positions then ``K`` groups of
    ``B − 1`` masks (``N = T + K(B − 1)`` positions in all).

    Returns:
        ``allowed`` ``[N, N]`` bool (row may attend to column), ``positions`` ``[N]`` int64
        (mask ``j`` of cut ``t``: ``t + j``), ``mask_ids`` ``[K(B − 1)]`` int64 (all
        ``mask_id``) and ``p_index`` ``[K(B − 1)]`` int64: the window position whose
        target distribution mask row ``i`` must match (``t_k + j``).
    """
    m = block - 1
    n = context + len(cuts) * m
    allowed = torch.zeros(n, n, dtype=torch.bool)
    allowed[:context, :context] = torch.tril(torch.ones(context, context, dtype=torch.bool))
    positions = torch.empty(n, dtype=torch.long)
    positions[:context] = torch.arange(context)
    p_index = torch.empty(len(cuts) * m, dtype=torch.long)
    for k, t in enumerate(cuts):
        s = context + k * m
        allowed[s : s + m, : t + 1] = True
        allowed[s : s + m, s : s + m] = torch.tril(torch.ones(m, m, dtype=torch.bool))
        positions[s : s + m] = torch.arange(t + 1, t + 1 + m)
        p_index[k * m : (k + 1) * m] = torch.arange(t + 1, t + 1 + m)
    return allowed, positions, torch.full((len(cuts) * m,), mask_id), p_index


def block_logits(
    model, x: torch.Tensor, cuts: list[int], block: int, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One forward of ``model`` over windows ``x`` ``[b, T]`` plus the masks of ``cuts``.

    Returns:
        ``[b, T, V]`` logits of the ordinary rows, ``[b, K(B − 1), V]`` logits of the mask
        rows (both sliced to the first ``V = mask_id`` columns) and ``p_index``
        (:func:`block_layout`).
    """
    b, t = x.shape
    allowed, positions, masks, p_index = block_layout(t, cuts, block, mask_id)
    dtype = next(model.parameters()).dtype
    bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    ids = torch.cat([x, masks.expand(b, -1)], dim=1)  # [b, N]
    logits = model(
        input_ids=ids,
        attention_mask=bias[None, None].expand(b, 1, -1, -1),
        position_ids=positions[None].expand(b, -1),
    ).logits[..., :mask_id]  # [b, N, V]
    return logits[:, :t], logits[:, t:], p_index


@torch.no_grad()
def continuation_rows(
    model, x: torch.Tensor, cuts: list[int], steps: int, tokens: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``model``'s rows along a continuation from every cut at once.

    One cached forward over the windows ``x`` ``[b, T]``, then ``steps`` forwards of ``K``
    new tokens each (one per cut, ``K = len(cuts)``): the token fed at step ``s`` for cut
    ``t`` sits at position ``t + s`` and attends to ``x_≤t`` and to that cut's earlier
    fed tokens only (a 4-D additive mask over the cache). The fed tokens are ``tokens``
    ``[b, K, steps]`` or, when ``None``, the model's own greedy continuation.

    Returns:
        ``[b, T, V']`` float32 logits of the window, ``[b, K, steps + 1, V']`` float32
        logits along the continuation (row 0: at ``x_t``; row ``s``: after the ``s``-th
        fed token) and the ``[b, K, steps]`` tokens fed.
    """
    b, t = x.shape
    k = len(cuts)
    cache = DynamicCache(config=model.config)
    window = model(input_ids=x, cache=cache, use_cache=True).logits.float()  # [b, T, V']
    index = torch.tensor(cuts)
    rows = [window[:, index]]  # [b, K, V']
    fed = []
    dtype = next(model.parameters()).dtype
    for s in range(1, steps + 1):
        new = rows[-1].argmax(-1) if tokens is None else tokens[:, :, s - 1]  # [b, K]
        fed.append(new)
        allowed = torch.zeros(k, t + s * k, dtype=torch.bool)
        for i, cut in enumerate(cuts):
            allowed[i, : cut + 1] = True
            allowed[i, t + i :: k] = True  # this cut's fed tokens, steps 1 … s
        bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        out = model(
            input_ids=new,
            cache=cache,
            use_cache=True,
            attention_mask=bias[None, None].expand(b, 1, -1, -1),
            position_ids=(index + s)[None].expand(b, -1),
        )
        rows.append(out.logits.float())
    return window, torch.stack(rows, dim=2), torch.stack(fed, dim=2)


def block_loss(
    model,
    target,
    block: int,
    cuts: int,
    mask_id: int,
    rng: random.Random,
    parts: dict,
    labels: str = "greedy",
):
    """The loss ``training.loop.train`` calls with each window batch ``(x, y)`` (``y``
    unused: the labels are the target's distributions; ``labels``: ``greedy`` along the
    target's greedy continuation from each cut, ``text`` given the true text). Keeps an
    EMA of each term in ``parts`` (``first_row``, ``mask_rows``; soft CE in nats)."""
    target.eval()

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b, t = x.shape
        chosen = sorted(rng.sample(range(t - block + 1), min(cuts, t - block + 1)))
        if labels == "greedy":
            window, chain, _ = continuation_rows(target, x, chosen, block - 1)
            p = F.softmax(window, -1)  # [b, T, V]
            p_mask = F.softmax(chain[:, :, 1:], -1).flatten(1, 2)  # [b, K(B − 1), V]
        else:
            with torch.no_grad():
                p = F.softmax(target(input_ids=x).logits.float(), -1)  # [b, T, V]
        first, masked, p_index = block_logits(model, x, chosen, block, mask_id)
        if labels != "greedy":
            p_mask = p[:, p_index]
        ce_first = -(p * F.log_softmax(first, -1)).sum(-1).mean()
        ce_mask = -(p_mask * F.log_softmax(masked, -1)).sum(-1).mean()
        for key, value in (("first_row", ce_first.item()), ("mask_rows", ce_mask.item())):
            old = parts.get(key)
            parts[key] = value if old is None else 0.95 * old + 0.05 * value
        return ce_first + ce_mask

    return loss


@torch.no_grad()
def evaluate(model, target, draft, val: torch.Tensor, context: int, block: int, batch: int) -> dict:
    """Per offset ``j = 1 … B`` on the fixed validation windows, cuts every ``B`` positions,
    along the target's greedy continuation ``g`` from each cut (:func:`continuation_rows`):
    top-1 agreement with the target's greedy token ``g_j`` and mean Σ min(p_j, q_j) at
    T = 1 (``p_j`` the target's row given ``x_≤t, g_<j``), for the block's ``q_j`` (from
    ``x_≤t`` and ``j − 1`` masks) and for the plain draft model's ``q`` given ``x_≤t,
    g_<j`` (its serial drafting once ``y_<j = g_<j`` were accepted)."""
    mask_id = model.config.block_mask_token_id
    xs, _ = val_windows(val, context)
    t = xs.shape[1]
    cuts = list(range(0, t - block + 1, block))
    sums = {k: [0.0] * block for k in ("ba", "bo", "da", "do")}
    count = 0
    for i in range(0, len(xs), batch):
        x = xs[i : i + batch]
        _, chain, fed = continuation_rows(target, x, cuts, block - 1)
        _, qd, _ = continuation_rows(draft, x, cuts, block - 1, tokens=fed)
        p, qd = F.softmax(chain, -1), F.softmax(qd, -1)  # [b, K, B, V]
        first, masked, _ = block_logits(model, x, cuts, block, mask_id)
        qb = torch.cat(
            [first[:, cuts, None], masked.unflatten(1, (len(cuts), block - 1))], dim=2
        ).float()
        qb = F.softmax(qb, -1)  # [b, K, B, V]
        greedy = p.argmax(-1)  # [b, K, B]
        for j in range(block):
            sums["ba"][j] += (qb[:, :, j].argmax(-1) == greedy[:, :, j]).sum().item()
            sums["bo"][j] += torch.minimum(p[:, :, j], qb[:, :, j]).sum().item()
            sums["da"][j] += (qd[:, :, j].argmax(-1) == greedy[:, :, j]).sum().item()
            sums["do"][j] += torch.minimum(p[:, :, j], qd[:, :, j]).sum().item()
        count += x.shape[0] * len(cuts)

    def per(key: str) -> list[float]:
        return [round(v / count, 4) for v in sums[key]]

    return {
        "block_top1_agreement_by_offset": per("ba"),
        "block_mean_min_pq_by_offset": per("bo"),
        "draft_top1_agreement_by_offset": per("da"),
        "draft_mean_min_pq_by_offset": per("do"),
        "val_blocks": count,
    }


def greedy_acceptance(args: argparse.Namespace, model) -> dict:
    """Greedy speculative decoding through the engine on ``--accept-prompts`` held-out
    prompts (the corpus's last 10 %, ``benchmarks/measure_acceptance.py``), ``--accept-
    tokens`` new tokens each, γ 4 and ``B`` (8; the engine refuses γ > ``B`` for the block
    drafter): the block drafter and the pair's draft model.
    Reports mean accepted drafts per round, draft forwards per round and whether every
    output equals the target alone's."""
    import importlib.util

    from specdec_core.core.models import load_pair
    from specdec_core.core.settings import SessionConfig
    from specdec_core.drafters.block import BlockDrafter
    from specdec_core.drafters.model import ModelDrafter
    from specdec_core.engine.chain.generate import generate

    spec = importlib.util.spec_from_file_location(
        "measure_acceptance", REPO_ROOT / "benchmarks" / "measure_acceptance.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    prompts = bench.heldout_prompts(args.accept_prompts)
    pair = load_pair((args.target, args.draft), device="cpu", allow_custom=True)
    base = SessionConfig(max_new_tokens=args.accept_tokens)
    expected = [generate(pair, p, base, mode="autoregressive").output_ids for p in prompts]
    out: dict = {"prompts": len(prompts), "new_tokens": args.accept_tokens}
    for gamma in sorted({min(4, args.block), args.block}):
        config = SessionConfig(gamma=gamma, max_new_tokens=args.accept_tokens)
        for name in ("block", "model"):
            rounds = accepted = forwards = 0
            equal = True
            for prompt, want in zip(prompts, expected, strict=True):
                drafter = (
                    BlockDrafter(model, model.config.block_mask_token_id, args.block)
                    if name == "block"
                    else ModelDrafter(pair.draft)
                )
                run = generate(pair, prompt, config, drafter=drafter)
                equal &= run.output_ids == want
                rounds += len(run.records)
                accepted += sum(r.accepted for r in run.records)
                forwards += run.stats.draft_forwards
            out[f"{name}_gamma{gamma}"] = {
                "mean_accepted_per_round": round(accepted / max(1, rounds), 3),
                "draft_forwards_per_round": round(forwards / max(1, rounds), 3),
                "rounds": rounds,
                "equals_target_alone": equal,
            }
    return out


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
