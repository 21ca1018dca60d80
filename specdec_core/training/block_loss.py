"""The parallel block drafter's training objective (PARD, An et al. 2025; the recipe:
``training/block.py``): the mask token added to the draft model, the layout of many blocks
per window in one forward (a 4-D attention mask), the frozen target's rows along its own
greedy continuation from every cut, and the soft cross-entropy loss over both.
Shapes: ``b`` windows of ``T`` tokens, ``K`` cuts, blocks of ``B`` positions, vocabulary
``V`` (the mask is id ``V``; every logit row is sliced back to ``V`` columns).
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from transformers import DynamicCache


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
