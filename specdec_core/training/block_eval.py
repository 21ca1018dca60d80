"""How good the trained block drafter is (the recipe: ``training/block.py``): per offset on
the validation windows along the target's greedy continuation (top-1 agreement and
Σ min(p, q) for the block and for the plain draft model), and greedy acceptance of both
through the real engine on held-out prompts.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from specdec_core.training.block_loss import block_logits, continuation_rows
from specdec_core.training.corpus import REPO_ROOT
from specdec_core.training.loop import (
    val_windows,
)


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
    drafters = {  # a fresh drafter per run, by the name the report keys
        "block": lambda: BlockDrafter(model, model.config.block_mask_token_id, args.block),
        "model": lambda: ModelDrafter(pair.draft),
    }
    for gamma in sorted({min(4, args.block), args.block}):
        config = SessionConfig(gamma=gamma, max_new_tokens=args.accept_tokens)
        for name, make in drafters.items():
            rounds = accepted = forwards = 0
            equal = True
            for prompt, want in zip(prompts, expected, strict=True):
                drafter = make()
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
