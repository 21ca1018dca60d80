"""Model drafters: a smaller causal LM (the pair's draft model) and early exit (the
target's first layers), each proposing serially from its own KV cache."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel

from specdec_core.core.int8_linear import draft_int8, int8_linear, int8_runs, int8_weights
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.lean_gpt2 import head_columns
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.draft_vocab import DraftVocab, draft_vocab_for

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair


class ModelDrafter(Drafter):
    """A smaller causal LM proposes tokens one at a time (serially) from its own cache.

    The first forward of a proposal catches the cache up on every context token it lacks
    (after a rollback, usually the last committed tokens); each later forward feeds one
    drafted token. ``gamma`` forwards in all; the last draft is not fed (its KV is not
    needed unless it is accepted, and then the next round's catch-up computes it).
    """

    name = "model"
    can_draft_tree = True
    int8_by_default = True  # its input is token ids: the same q at any thread count

    def __init__(
        self, model: PreTrainedModel, vocab: DraftVocab | None = None, int8: bool = False
    ) -> None:
        self.kv = self.clock = ModelCache(model)
        self.device = self.kv.device
        self.vocab_size = model.config.vocab_size
        self.vocab = vocab
        self._columns = None if vocab is None else vocab.columns(self.kv.weights.lm_head)
        # weight-only int8 blocks and LM head columns (``core/int8_linear.py``; the lean
        # forward only, i.e. a float32 model)
        self.int8 = int8 and self.kv.lean and int8_runs(self.kv.weights, self.device)
        if self.int8:
            self.kv.weights = int8_weights(self.kv.weights)
        self._set_head()
        # the tree level drafting now: cache row of each tree path fed (rows past kv_len)
        self._tree_rows: dict[tuple[int, ...], int] = {}

    def cached_ids(self) -> list[int] | None:
        return self.kv.ids

    def rollback(self, length: int) -> int:
        self._drop_tree()
        return self.kv.crop(length)

    def _drop_tree(self) -> None:
        """Forget the tree rows a level forward left past the committed ids."""
        if self._tree_rows or self.kv.cache.length > self.kv.kv_len:
            self.kv.truncate(self.kv.kv_len)
            self._tree_rows = {}

    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """``gamma`` forwards (fewer when the confidence stop ends drafting early);
        ``last``: the LM head on the last position only (:meth:`ModelCache.extend_last`,
        the greedy fast path)."""
        ids: list[int] = []
        self._drop_tree()
        self._set_head()
        pending = self.kv.sync_to(context)
        for _ in range(gamma):
            logits = self.kv.extend_last(pending) if last else self.kv.extend(pending)[-1]
            ids.append(pick(logits))  # logits: [V]
            if not self._keep_drafting():  # the confidence stop (Drafter._keep_drafting)
                break
            pending = [ids[-1]]
        return ids

    def _set_head(self) -> None:
        """The cache's logits on the reduced head, or all rows (:meth:`head_vocab`); int8
        columns when :attr:`int8`."""
        columns = None if self.head_vocab() is None else self._columns
        if self.int8:
            lm_head = self.kv.weights.lm_head
            columns = int8_linear(head_columns(lm_head) if columns is None else columns, None, 1)
        self.kv.head = columns

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside this drafter's model forwards (:class:`ModelCache`)."""
        return self.kv.forward_ms

    @property
    def forwards(self) -> int:
        """Model forwards run since the drafter was made (:class:`ModelCache` counts them)."""
        return self.kv.forwards

    def tree_logits(self, context: list[int]) -> torch.Tensor:
        """``[V]`` float32 next-token logits after ``context`` (one cached forward over the
        ids the cache lacks)."""
        self._drop_tree()
        self._set_head()
        return self.widen(self.kv.extend(self.kv.sync_to(context))[-1])

    def tree_level_logits(self, context: list[int], paths: list[list[int]]) -> torch.Tensor:
        """``[n, V]`` float32 logits after ``context + paths[i]``, a whole tree level in ONE
        forward (tree attention in the draft, as in the target's verification): each
        path's last token at position ``len(context) + depth − 1``, attending to the
        context and its ancestors' rows, which the previous level's forward left in the
        cache past the committed ids (dropped at the next proposal or rollback). The root
        level (one empty path) is the cached forward of :meth:`tree_logits`; paths whose
        ancestors are not in the cache fall back to one forward per path."""
        depth = len(paths[0])
        self._set_head()
        if depth == 0 and len(paths) == 1:
            self._drop_tree()
            rows = self.kv.extend(self.kv.sync_to(context))[-1:]  # [1, N or V]
            self._tree_rows = {(): -1}
            return self.widen(rows)
        known = all(len(p) == depth and tuple(p[:-1]) in self._tree_rows for p in paths)
        if depth == 0 or not known or self.kv.ids != context:
            return super().tree_level_logits(context, paths)  # type: ignore[return-value]
        kv, n = self.kv, len(paths)
        rows = kv.cache.length  # committed rows + the earlier levels' nodes
        allowed = torch.zeros(n, rows + n, dtype=torch.bool)
        allowed[:, : kv.kv_len] = True
        for i, path in enumerate(paths):
            ancestors = [self._tree_rows[tuple(path[:j])] for j in range(1, depth)]
            allowed[i, ancestors + [rows + i]] = True
            self._tree_rows[tuple(path)] = rows + i
        positions = [len(context) + depth - 1] * n
        return self.widen(kv.extend_masked([p[-1] for p in paths], positions, allowed, known=0))


def make_model_drafter(
    pair: ModelPair, top_n: int | None = None, int8: bool | None = None
) -> ModelDrafter:
    """The pair's draft model as a drafter, on its reduced vocabulary when the pair ships
    one (:func:`~specdec_core.drafters.draft_vocab.draft_vocab_for`; ``top_n`` another
    ``N``, ``0`` the full head), with weight-only int8 weights where the device runs them
    (:func:`~specdec_core.core.int8_linear.draft_int8`), unless the draft model is the
    target's own (a self pair: the draft stays the target); ``int8``: force on or off."""
    vocab = draft_vocab_for(pair, "model", top_n)
    if int8 is None:  # a draft that is the target's own model stays the reference
        itself = pair.draft is pair.target or pair.draft_source == pair.target_source
        int8 = draft_int8(pair.device, ModelDrafter.int8_by_default) and not itself
    return ModelDrafter(pair.draft, vocab, int8)


def early_exit_model(target: PreTrainedModel, layers: int) -> PreTrainedModel:
    """A GPT-2 made of the target's first ``layers`` blocks + its final layer norm + LM
    head, *sharing* those modules (no copy, the shared model's config and weights are not
    changed). Self-speculative decoding (Elhoushi et al. 2024, "LayerSkip").

    Raises:
        ValueError: ``layers`` outside ``1..n_layer`` or a model that is not GPT-2.
    """
    config = copy.deepcopy(target.config)
    total = getattr(config, "n_layer", None)
    if total is None or not hasattr(target, "transformer"):
        raise ValueError("early exit is implemented for GPT-2 models only")
    if not 1 <= layers <= total:
        raise ValueError(f"early-exit layers must be between 1 and {total}, got {layers}")
    config.n_layer = layers
    with torch.device("meta"):
        shallow = type(target)(config)
    body = shallow.transformer
    body.wte, body.wpe, body.ln_f = (
        target.transformer.wte,
        target.transformer.wpe,
        target.transformer.ln_f,
    )
    body.h = torch.nn.ModuleList(list(target.transformer.h[:layers]))
    shallow.lm_head = target.lm_head
    # Only the new wrappers get flags set: ``.eval()`` / ``.requires_grad_()`` on the whole
    # model would write to the shared modules, which other sessions are using.
    for module in (shallow, body, body.drop, body.h):
        module.training = False
    return shallow


class EarlyExitDrafter(ModelDrafter):
    """The target's first ``layers`` layers + final layer norm + LM head propose, one
    token at a time, from their own KV cache (a ``DynamicCache`` of ``layers`` layers, not
    the target's)."""

    name = "early-exit"

    def __init__(self, target: PreTrainedModel, layers: int) -> None:
        super().__init__(early_exit_model(target, layers))
        self.layers = layers

    @property
    def knob(self) -> int:
        """Layers kept (``k``)."""
        return self.layers
