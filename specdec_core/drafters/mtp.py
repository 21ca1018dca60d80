"""MTP drafting: multi-token prediction heads (Medusa-1 style) on the target's own last
hidden state (Cai et al. 2024, "Medusa"; the heads are
:mod:`specdec_core.drafters.mtp_heads`). **No extra forward at all**: the heads read the
hidden states the previous round's verify forward already computed.

Which head drafts which position. After every round the target's cache holds KV (and,
with ``track_hidden``, the hidden rows ``h_0..h_{m−1}``) for the committed ids except the
last one (the correction or bonus, committed before its KV exists). With ``m`` hidden
rows matching the context, the token after a context of length ``n`` (committed ids,
possibly followed by drafted, edited or tree-path ids) is ``d + 2`` positions ahead of
``h_{m−1}``, with depth ``d = n − m − 1``; its row is head ``d + 1`` on ``h_{m−1}``
(head 0 is the target's own LM head: the correction/bonus came from it). When
``d + 1 > K`` nothing more can be drafted. The same rule serves the chain, a
re-proposal after a student's edit, and :meth:`MtpDrafter.tree_logits` (every tree node
at depth ``d`` gets head ``d + 1``'s row: a Medusa tree).

The very first round, when the target has run nothing, there is no hidden state: the
chain drafts nothing and the round is one plain target step (which computes the hidden
states); a tree then gets a uniform row (zero logits) at every node, as it does below a
depth of ``K`` (the rule stays lossless; those levels are guesses).

**Why a q_i that ignores y_<i is still exact.** Head ``i``'s row ``q_i`` depends only on
``h_{m−1}`` (the committed prefix), not on the drafts ``y_1..y_{i−1}`` before it, while
the target's ``p_i`` does condition on them. The verification rule accepts ``y_i`` with
probability ``min(1, p_i(y_i) / q_i(y_i))`` and otherwise draws from
``norm([p_i − q_i]+)``; for *any* distribution ``q_i`` fixed before ``y_i`` is drawn,
with ``y_i ~ q_i``, the token it emits is distributed exactly as ``p_i`` (Leviathan et
al. 2023, Theorem 1: ``P(y) = min(q, p)(y) + (1 − Σ min(p, q)) · [p − q]+(y) / Σ [p −
q]+ = p(y)``). ``q_i`` may be any function of the prefix, including one that ignores
``y_<i``: the conditioning only lowers the acceptance (``Σ min(p_i, q_i)``), never the
exactness. Medusa (Cai et al. 2024) relies on exactly this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel

from specdec_core.core.device import sync
from specdec_core.core.kvcache import ModelCache, common_prefix_len
from specdec_core.core.lean_gpt2 import head_columns
from specdec_core.core.timeline import ForwardClock
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.mtp_heads import MtpHeads, load_mtp_heads

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair


class MtpDrafter(Drafter):
    """Drafts position ``d`` (0-based after the newest committed token) with head ``d + 1``
    on the target's last real hidden state (see the module doc for why this is exact).

    Keeps no state of its own: :meth:`cached_ids` is ``None`` (the KV table shows no
    drafter row) and :meth:`rollback` removes nothing. :attr:`forwards` (model forwards
    run to draft) is always ``0``: the heads run no model forward, so ``Draft.forwards``,
    the CLI JSON's ``draft_forwards`` and the comparison's "draft forwards per round" are
    0 for this drafter. :attr:`head_evaluations` counts, separately, the **head
    evaluations** (one residual block + the target's LM head row, a ``[d] → [V]``
    matrix-vector product, not a model forward): one per row computed, and every row
    computed is used. A chain proposal without a confidence stop computes the rows of
    every position it may draft, ``min(γ, K − d)``, in one batch (all of them are drafted);
    with the confidence stop on, it computes them one at a time and stops computing when
    the stop fires (so a proposal that drafts 1 counts 1); a tree computes one per
    expanded node that has a head. The target runs no forward for the drafter:
    ``target forwards == rounds``.

    Attributes:
        max_gamma: ``K``, the number of heads (the most drafts one proposal can make).
    """

    name = "mtp"
    draft_cost = "heads"  # one head evaluation per draft, no model forward
    can_draft_tree = True

    def __init__(self, heads: MtpHeads, target_model: PreTrainedModel) -> None:
        self.heads = heads
        self.lm_head = target_model.get_output_embeddings()
        self.device = target_model.device
        self.vocab_size = self.lm_head.weight.shape[0]
        self.max_gamma = heads.k
        self.target: ModelCache | None = None
        self.clock = ForwardClock()
        self.head_evaluations = 0  # rows computed by the heads (not model forwards)

    @property
    def forwards(self) -> int:
        """Model forwards run to draft: always ``0`` (the heads are not a model forward;
        see :attr:`head_evaluations`)."""
        return 0

    # ------------------------------------------------------------------ protocol
    def attach(self, target: ModelCache) -> None:
        """Read the target's hidden states from now on (sets ``track_hidden``).

        Raises:
            ValueError: the target already ran forwards without keeping hidden states.
        """
        target.track_hidden = True
        rows = 0 if target.hidden is None else len(target.hidden)
        if rows != target.kv_len:
            raise ValueError("attach the MTP drafter before the target's first forward")
        self.target = target

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside head evaluations (block + the LM head row)."""
        return self.clock.forward_ms

    @torch.inference_mode()
    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """Heads ``d + 1, d + 2, …`` on the one hidden state ``h_{m−1}`` (``d``: the
        context's depth), up to ``gamma`` ids and never past head ``K``; nothing when the
        target has no hidden state yet (the first round). The rows do not depend on the
        picks, so without a confidence stop they are computed together (one block matmul
        and one LM-head matmul for all of them: the LM head's weight is read once per
        proposal, not once per draft) and ``pick`` takes them in order; with the confidence
        stop on they are computed one at a time, so the rows after the stop are never
        computed (nor counted in :attr:`head_evaluations`)."""
        ids: list[int] = []
        found = self._anchor(context)
        if found is None:
            return ids
        hidden, depth = found
        n = min(gamma, self.heads.k - depth, self.heads.k)
        if n <= 0:
            return ids
        if self._threshold is not None:  # confidence stop: compute a row only when needed
            for i in range(n):
                ids.append(pick(self._logits(hidden, depth + 1 + i)))
                if not self._keep_drafting():
                    break
            return ids
        rows = self._rows(hidden, depth + 1, n)  # [n, V]
        for i in range(n):
            ids.append(pick(rows[i]))
        return ids

    @torch.inference_mode()
    def tree_logits(self, context: list[int]) -> torch.Tensor:
        """``[V]`` float32 logits after ``context`` (committed ids + a tree path): head
        ``d + 1`` on ``h_{m−1}`` (one head evaluation, counted in :attr:`head_evaluations`); zeros
        (a uniform row, no evaluation) when there is no hidden state yet or ``d + 1 > K``."""
        found = self._anchor(context)
        if found is None or found[1] + 1 > self.heads.k:
            return torch.zeros(self.vocab_size, device=self.device)
        return self._logits(found[0], found[1] + 1)

    # ------------------------------------------------------------------ internals
    def _anchor(self, context: list[int]) -> tuple[torch.Tensor, int] | None:
        """``(h_{m−1} [d] float32, depth d)`` for ``context``: ``m`` = the leading context
        ids the target holds hidden rows for, ``d = len(context) − m − 1`` (``−1`` when the
        target has run the whole context: head 0, its own LM head); ``None`` when ``m = 0``.

        Raises:
            RuntimeError: :meth:`attach` was not called.
        """
        target = self.target
        if target is None:
            raise RuntimeError("MtpDrafter.attach(target cache) must be called first")
        known = min(common_prefix_len(target.ids, context), len(context))
        if known == 0 or target.hidden is None:
            return None
        return target.hidden[known - 1], len(context) - known - 1

    def _logits(self, hidden: torch.Tensor, k: int) -> torch.Tensor:
        """``[V]`` float32 logits of head ``k`` (``0``: the target's LM head itself) on one
        ``[d]`` hidden state; one head evaluation."""
        return self._rows(hidden, k, 1)[0]

    def _rows(self, hidden: torch.Tensor, first: int, n: int) -> torch.Tensor:
        """``[n, V]`` float32 logits of heads ``first .. first + n − 1`` (head ``0``: the
        target's LM head itself) on one ``[d]`` hidden state; ``n`` head evaluations."""
        started = time.perf_counter()
        features = self.heads.blocks_from(first, n, hidden)  # [n, d]
        logits = torch.mm(features, head_columns(self.lm_head.weight)).float()  # [n, V]
        sync(self.device)  # the kernels' time, not the launch's (core/device.py)
        self.clock.add(started)
        self.head_evaluations += n
        return logits


def make_mtp_drafter(pair: ModelPair) -> MtpDrafter:
    """A fresh :class:`MtpDrafter` on the pair's shared heads.

    Raises:
        ConfigError: code ``mtp_missing`` (see :func:`load_mtp_heads`).
    """
    return MtpDrafter(load_mtp_heads(pair), pair.target)
