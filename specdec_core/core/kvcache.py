"""KV bookkeeping for the target and the draft: what each cache holds, crop/rollback, and
the KV-state table the step-through page shows.

Three different states of a position (the lesson):

* **committed** — part of the output; may or may not have KV yet (the correction/bonus
  token of the last round is committed *before* any model has computed its KV: it is the
  first input of the next round);
* **KV-computed** — a model has run a forward over it and keeps its keys/values;
* **tentative** — a drafted candidate, not output until verification accepts it.

Each model's cache is a preallocated :class:`~specdec_core.core.kvbuffer.KVBuffer` owned
by a session (never attached to the shared model), filled by the lean forward
(:mod:`specdec_core.core.lean_gpt2`) over the shared model's weights. ``ModelCache``
remembers which token ids its cache covers, so a rollback is "crop to the longest prefix
that is still the committed history" (a length moves, nothing is copied);
:func:`rollback` is the reject step of every round, both shapes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import torch
from transformers import PreTrainedModel

from specdec_core.core import lean_gpt2
from specdec_core.core.device import sync
from specdec_core.core.hf_forward import hf_forward
from specdec_core.core.kvbuffer import RowBuffer
from specdec_core.core.trace import KVRow, KVState, TokenInfo

if TYPE_CHECKING:
    from specdec_core.core.processors import Processors


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while a[i] == b[i]:
        i += 1
    return i


class ModelCache:
    """One model's KV cache plus the ids it covers.

    Invariant: ``len(self.ids) == self.kv_len == cache.get_seq_length()``, and the cached
    keys/values are exactly those of a fresh forward over ``self.ids``.

    Raises:
        ValueError: the model is not a GPT-2 (:func:`lean_gpt2.gpt2_weights`).
    """

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.weights = lean_gpt2.gpt2_weights(model)
        self.cache = self.weights.new_cache()
        # float32 (the engine's precision): the lean forward; a half-precision copy runs
        # transformers' own forward, whose kernels the numerics lesson measures.
        self.lean = model.dtype == torch.float32
        self.ids: list[int] = []
        self.device = model.device
        # Time spent inside model forwards (ms) and how many ran: the fast path's
        # breakdown (model forward vs everything else). On CUDA each forward is
        # synchronised so the time is the kernels', not the launch's.
        self.forward_ms = 0.0
        self.forwards = 0
        # (start, end) perf_counter pairs of each forward, kept only when a caller sets a
        # list here (the fast path's round timeline); no extra clock reads either way.
        self.spans: list[tuple[float, float]] | None = None
        # Feature-level drafters (EAGLE) read the target's last hidden state (the LM head's
        # input) at every KV-computed position: set ``track_hidden`` before the first
        # forward and ``hidden`` is kept as a ``[kv_len, d]`` float32 tensor (a growing
        # :class:`~specdec_core.core.kvbuffer.RowBuffer`), cropped and
        # compacted with the cache. The verify forward already computes these states; no
        # extra forward is run for them.
        self.track_hidden = False
        self._hidden: RowBuffer | None = None
        # ``[d, N]``: the LM head rows the logits are computed on, transposed (a drafter's
        # reduced vocabulary, ``drafters/draft_vocab.py``): every method then returns
        # ``[.., N]`` logits; ``None``: the model's whole head, ``[.., V]``.
        self.head: torch.Tensor | None = None

    @property
    def hidden(self) -> torch.Tensor | None:
        """``[rows, d]`` float32 last hidden states (``track_hidden``; ``None`` before the
        first forward that kept them), a view valid until the next edit of the cache."""
        return None if self._hidden is None else self._hidden.rows

    @property
    def kv_len(self) -> int:
        """Number of KV-computed positions (tokens)."""
        return len(self.ids)

    @torch.inference_mode()
    def extend(self, new_ids: list[int]) -> torch.Tensor:
        """Run one forward over ``new_ids`` (appended after the cached ones).

        Args:
            new_ids: ``T ≥ 1`` token ids.

        Returns:
            ``[T, V]`` float32 logits on the model's device: row ``t`` predicts the token
            after ``new_ids[t]``.
        """
        return self._forward(new_ids, 0)  # [T, V]

    @torch.inference_mode()
    def extend_last(self, new_ids: list[int]) -> torch.Tensor:
        """Like :meth:`extend` but returns only the last row, ``[V]`` float32 (the LM head
        runs on the last position only: ``logits_to_keep=1``). Used by the fast path,
        which needs just the next-token logits."""
        return self._forward(new_ids, 1)[0]  # [V]

    @torch.inference_mode()
    def extend_keep(self, new_ids: list[int], keep: int) -> torch.Tensor:
        """Like :meth:`extend` but the LM head runs on the last ``keep ≥ 1`` positions only
        (``logits_to_keep``): ``[keep, V]`` float32, the same values as the last ``keep``
        rows of :meth:`extend`."""
        return self._forward(new_ids, keep)  # [keep, V]

    @torch.inference_mode()
    def extend_masked(
        self, new_ids: list[int], positions: list[int], allowed: torch.Tensor, known: int
    ) -> torch.Tensor:
        """One forward over ``new_ids`` at explicit ``positions``, each row attending only
        where ``allowed`` says (the tree's verification forward).

        Args:
            new_ids: ``T`` ids fed after the cached ones. positions: ``[T]`` their position
                ids. allowed: ``[T, kv_len + T]`` bool, row ``t`` may attend to column
                ``j`` (the attention's boolean mask as it is).
            known: how many leading ``new_ids`` form a sequence with the cached ones and
                join :attr:`ids`; the cache (and :attr:`hidden`) also keeps the other
                ``T − known`` rows, which :meth:`keep_rows` or :meth:`truncate` must then
                resolve (until then ``kv_len`` counts only the ``known`` ones).

        Returns:
            ``[T, V]`` float32 logits on the model's device.
        """
        pos = torch.tensor(positions, device=self.device)  # [T]
        return self._forward(new_ids, 0, pos, allowed.to(self.device), known)

    def _forward(
        self,
        new_ids: list[int],
        keep: int,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        known: int | None = None,
    ) -> torch.Tensor:
        """The one forward every method runs: timing, counters, hidden states, ids."""
        started = time.perf_counter()
        if self.lean:
            hidden = lean_gpt2.forward(self.weights, self.cache, new_ids, positions, mask)
        else:
            hidden = hf_forward(self.model, self.cache, new_ids, positions, mask)  # [T, d]
        logits = lean_gpt2.logits(self.weights, hidden[-keep:] if keep else hidden, self.head)
        if self.track_hidden:
            if self._hidden is None:
                self._hidden = RowBuffer(hidden.shape[1], hidden.device, torch.float32)
            self._hidden.append(hidden.float())  # [T, d]
        sync(self.device)
        ended = time.perf_counter()
        self.forward_ms += (ended - started) * 1e3
        if self.spans is not None:
            self.spans.append((started, ended))
        self.forwards += 1
        self.ids.extend(new_ids if known is None else new_ids[:known])
        return logits

    def keep_rows(self, rows: list[int], tokens: list[int]) -> None:
        """After :meth:`extend_masked`: keep the first :attr:`kv_len` cached rows, then the
        rows ``rows`` (absolute indices ≥ ``kv_len``, in order), which hold ``tokens``;
        drop every other row. Keys, values and :attr:`hidden` are moved alike, and
        ``tokens`` join :attr:`ids` (the invariant holds again)."""
        keep = self.kv_len
        self.cache.keep_rows(keep, rows)
        if self._hidden is not None:  # [keep + extra rows, d]
            self._hidden.keep_rows(keep, rows)
        self.ids.extend(tokens)

    def truncate(self, length: int) -> None:
        """Cut the cache back to its first ``length`` rows, rows :attr:`ids` does not cover
        included (restores a cache after a failed step: :meth:`extend_masked` keeps rows
        beyond ``kv_len``)."""
        self.cache.truncate(length)
        del self.ids[length:]
        if self._hidden is not None:
            self._hidden.truncate(length)

    def crop(self, length: int) -> int:
        """Roll back to the first ``length`` positions (the cache's length moves, nothing
        is copied); returns how many were removed."""
        removed = self.kv_len - max(0, length)
        if removed > 0:
            self.cache.truncate(self.kv_len - removed)
            del self.ids[self.kv_len - removed :]
            if self._hidden is not None:
                self._hidden.truncate(self.kv_len)
        return max(0, removed)

    def rollback_to(self, committed: list[int]) -> int:
        """Crop to the part of ``committed`` this cache holds, the last committed token
        left without KV (the next round's first input); returns positions removed."""
        return self.crop(min(common_prefix_len(self.ids, committed), len(committed) - 1))

    def sync_to(self, context: list[int]) -> list[int]:
        """Crop to the longest prefix shared with ``context``; return the ids still to feed.

        The last context token is always left to feed (it produces the next-token logits),
        so at least one id is returned for a non-empty context.
        """
        keep = min(common_prefix_len(self.ids, context), len(context) - 1)
        self.crop(keep)
        return context[keep:]


class RollsBack(Protocol):
    """What :func:`rollback` asks of a drafter (``drafters/base.Drafter``)."""

    def rollback_to(self, committed: list[int]) -> int: ...


def rollback(
    target: ModelCache, drafter: RollsBack, processors: Processors | None, ids: list[int]
) -> tuple[int, int]:
    """Reject: the processors and both caches back to the committed ``ids`` (the last
    one, just appended, keeps no KV: the next round's first input). Returns the rows
    removed from the target's and the drafter's cache."""
    if processors is not None:
        processors.sync_to(ids)
    return target.rollback_to(ids), drafter.rollback_to(ids)


def kv_state(
    tokens: list[TokenInfo],
    prompt_len: int,
    committed_len: int,
    target: ModelCache,
    draft_ids: list[int] | None,
    tentative_states: list[str] | None = None,
) -> KVState:
    """Build the KV-state table for committed tokens followed by tentative ones.

    Args:
        tokens: committed tokens (``committed_len`` of them) then the drafted candidates.
        prompt_len: number of prompt tokens at the start.
        committed_len: how many of ``tokens`` are committed.
        target: the target's cache.
        draft_ids: the ids the draft's cache covers (``None`` for a drafter without one).
        tentative_states: state per drafted candidate (``tentative``, ``accepted``,
            ``rejected``, ``discarded``); default all ``tentative``.

    Returns:
        :class:`KVState`; a position counts as KV-computed for a model only when that
        model's cache holds this very token there.
    """
    states = tentative_states or ["tentative"] * (len(tokens) - committed_len)
    draft = draft_ids or []
    rows = []
    for pos, tok in enumerate(tokens):
        target_kv = pos < target.kv_len and target.ids[pos] == tok.id
        draft_kv = pos < len(draft) and draft[pos] == tok.id
        if pos < prompt_len:
            state = "prompt"
        elif pos < committed_len:
            state = "committed" if target_kv else "committed-no-KV-yet"
        else:
            state = states[pos - committed_len]
        rows.append(
            KVRow(pos, tok.id, tok.piece, tok.text, pos < committed_len, target_kv, draft_kv, state)
        )
    return KVState(committed_len, target.kv_len, len(draft), tuple(rows))
