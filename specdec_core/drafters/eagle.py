"""EAGLE drafting: a feature-level head reads the target's own last hidden states and
predicts the next ones; the target's frozen LM head turns them into draft tokens (Li et
al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty"; the head
is :mod:`specdec_core.drafters.eagle_head`).

Where the features come from (no target forward is repeated for them):

* every position the target has KV for: ``ModelCache.hidden`` — the verification forward
  of the previous round already computed them (``attach`` sets ``track_hidden``);
* the newest committed token (the correction or bonus) has no target KV yet: its feature
  is the head's own prediction, as in EAGLE; so are the features of drafted tokens within
  a round, and of an edited prefix the target has not verified;
* the very first round, when the target has run nothing: the drafter runs the target's
  prefill over ``context[:-1]`` through the target's own :class:`ModelCache` (one target
  forward, counted there and in :attr:`EagleDrafter.target_forwards`); the verification
  that follows reuses that KV through ``sync_to``. A one-token context has no feature at
  all yet (the target must leave the last token for the verification to feed): that
  round drafts nothing and is one plain target step, which computes ``f_0``.

The head's KV cache: entry ``t`` was computed from ``(f_t, token_{t+1})``. Entries whose
``f_t`` was real are kept across rounds; entries computed from a *predicted* ``f_t`` are
dropped by :meth:`rollback` (and at the next proposal, once the target has the real
feature), so after each round the head's cache holds real-feature entries only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel

from specdec_core.core.device import sync
from specdec_core.core.int8_linear import draft_int8, int8_linear, int8_runs
from specdec_core.core.kvbuffer import RowBuffer
from specdec_core.core.kvcache import ModelCache, common_prefix_len
from specdec_core.core.lean_gpt2 import head_columns
from specdec_core.core.timeline import ForwardClock
from specdec_core.drafters.draft_vocab import DraftVocab, draft_vocab_for
from specdec_core.drafters.eagle_head import EagleHead, load_eagle_head, target_parts
from specdec_core.drafters.eagle_tree import EagleTreeLevels

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair


class EagleDrafter(EagleTreeLevels):
    """Drafts from the target's hidden states with an EAGLE-1 head (see the module doc).

    ``cached_ids()`` are the tokens the head's cache has seen: ``context[: entries + 1]``
    (entry ``t`` holds ``f_t``, which covers tokens ``0..t``, and the embedding of token
    ``t + 1``); empty when it holds no entry. ``vocab``: the target's LM head restricted
    to those ids for drafting (``drafters/draft_vocab.py``; its rows sliced here, once);
    ``sampled_vocab`` the one a sampled proposal (T > 0) drafts on (``None``: full head).
    """

    name = "eagle"
    can_draft_tree = True
    int8_by_default = False  # target features' low bits move with threads; bf16 shows them

    def __init__(
        self,
        head: EagleHead,
        target_model: PreTrainedModel,
        vocab: DraftVocab | None = None,
        int8: bool = False,
        sampled_vocab: DraftVocab | None = None,
    ) -> None:
        self.head = head
        self.wte, self.lm_head = target_parts(target_model)
        self.device = target_model.device
        self.vocab_size = self.lm_head.weight.shape[0]
        self.vocab, self.sampled_vocab = vocab, sampled_vocab
        self._columns = {  # id(vocab) → [d, N] its rows
            id(v): v.columns(self.lm_head.weight) for v in (vocab, sampled_vocab) if v is not None
        }
        # weight-only int8 fc, block and LM head columns (``core/int8_linear.py``)
        self.int8 = int8 and int8_runs(head.lean(), self.device)
        self.target: ModelCache | None = None
        self._reset()
        self.clock = ForwardClock()
        self.forwards = 0  # head forwards run
        self.target_forwards = 0  # target prefills this drafter ran (first round)

    def _reset(self) -> None:
        self.cache = self.head.new_cache()
        self.ids: list[int] = []  # tokens covered: context[: entries + 1], or []
        self.real: list[bool] = []  # per entry: f_t came from the target
        self._pred: RowBuffer | None = None  # entry t's output, f̂_{t+1} (:attr:`pred`)
        self._drop_tree()

    # ------------------------------------------------------------------ protocol
    def attach(self, target: ModelCache) -> None:
        """Read the target's hidden states from now on (sets ``track_hidden``).

        Raises:
            ValueError: the target already ran forwards without keeping hidden states.
        """
        target.track_hidden = True
        rows = 0 if target.hidden is None else len(target.hidden)
        if rows != target.kv_len:
            raise ValueError("attach the EAGLE drafter before the target's first forward")
        self.target = target
        self._reset()

    def cached_ids(self) -> list[int] | None:
        return list(self.ids)

    @property
    def pred(self) -> torch.Tensor | None:
        """``[entries, d]``: entry ``t``'s output, the predicted feature ``f̂_{t+1}``
        (``None`` before the first head forward); a view valid until the next edit."""
        return None if self._pred is None else self._pred.rows

    @property
    def entries(self) -> int:
        """Positions in the head's cache."""
        return len(self.real)

    def real_entries(self) -> int:
        """Leading head-cache entries computed from the target's real features."""
        return self.real.index(False) if False in self.real else len(self.real)

    def rollback(self, length: int) -> int:
        """Keep the entries covering ``cached_ids()[:length]`` that were computed from real
        target features (predicted-feature entries always go); returns tokens removed."""
        before = len(self.ids)
        self._drop_tree()
        self._crop(min(max(0, length - 1), self.real_entries()))
        return before - len(self.ids)

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside the head's forwards and the LM head rows it needs (the
        target's prefill is a target forward, counted in the target's cache)."""
        return self.clock.forward_ms

    @torch.inference_mode()
    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """One head forward per token (the first also catches the cache up on the tokens
        committed last round, from their real features); the last draft is not fed (nor is a
        draft the confidence stop ends drafting after)."""
        ids: list[int] = []
        feature, real = self._next_feature(context) if gamma > 0 else (None, False)
        for i in range(gamma if feature is not None else 0):
            ids.append(pick(self._logits(feature)))
            if not self._keep_drafting():  # the confidence stop (Drafter._keep_drafting)
                break
            if i < gamma - 1:
                feature, real = self._feed(feature[None], [ids[-1]], real, context[0])[-1], False
        return ids

    # ------------------------------------------------------------------ internals
    def _crop(self, entries: int) -> None:
        if entries >= self.entries:
            return
        if entries <= 0:
            self._reset()
            return
        self.cache.truncate(entries)
        del self.real[entries:]
        if self._pred is not None:
            self._pred.truncate(entries)
        del self.ids[entries + 1 :]

    def _real_len(self, context: list[int]) -> int:
        """Context positions whose real target feature exists; runs the target's prefill
        when the target has none (the first round)."""
        target = self.target
        if target is None:
            raise RuntimeError("EagleDrafter.attach(target cache) must be called first")
        known = min(common_prefix_len(target.ids, context), len(context))
        if known == 0 and len(context) > 1:
            target.crop(0)
            target.extend(context[:-1])
            self.target_forwards += 1
            known = target.kv_len
        return known

    def _next_feature(self, context: list[int]) -> tuple[torch.Tensor | None, bool]:
        """Catch the head's cache up on ``context`` and return the feature whose LM head
        row predicts the token after it: ``([d] float32, real?)``; ``(None, False)`` for a
        one-token context the target has not run (no feature to start from)."""
        self._drop_tree()
        n = len(context)
        known = self._real_len(context)
        if known == 0:
            self._reset()
            return None, False
        # keep the longest valid prefix of entries: same tokens (entry t covers token
        # t + 1), and a predicted feature only where the target still has no real one
        # (list scans, not a Python loop over every entry each round)
        keep = 0
        if self.ids and self.ids[0] == context[0]:
            keep = min(common_prefix_len(self.ids, context) - 1, self.entries, n - 1)
            stale = self.real[: min(keep, known)]  # False: predicted, a real one exists now
            if False in stale:
                keep = stale.index(False)
        self._crop(keep)
        hidden = self.target.hidden  # [kv_len, d]
        stop = min(known, n - 1)  # entries t < stop have a real f_t
        if keep < stop:
            self._feed(hidden[keep:stop], context[keep + 1 : stop + 1], True, context[0])
        for t in range(max(keep, stop), n - 1):  # predicted f_t: serial
            self._feed(self.pred[t - 1][None], [context[t + 1]], False, context[0])
        if known >= n:
            return hidden[n - 1], True
        return self.pred[n - 2], False

    def _feed(
        self, features: torch.Tensor, tokens: list[int], real: bool, first: int
    ) -> torch.Tensor:
        """One head forward over new entries (``[T, d]`` features, ``T`` next tokens;
        ``first`` = the context's first token, recorded when the cache was empty); returns
        ``[T, d]`` predicted next features."""
        started = time.perf_counter()
        emb = self.wte.weight[torch.tensor(tokens, device=self.device)]  # [T, d]
        out = self.head.step(features.to(emb.dtype), emb, self.cache, int8=self.int8)  # [T, d]
        sync(self.device)
        self.clock.add(started)
        self.forwards += 1
        if not self.ids:
            self.ids.append(first)
        self.ids.extend(tokens)
        self.real.extend([real] * len(tokens))
        if self._pred is None:
            self._pred = RowBuffer(out.shape[1], out.device, out.dtype)
        self._pred.append(out)
        return out

    def head_vocab(self) -> DraftVocab | None:
        """:meth:`Drafter.head_vocab`, with :attr:`sampled_vocab` in a sampled proposal."""
        if self._full_head:
            return None
        return self.sampled_vocab if self._sampled else self.vocab

    def _head_columns(self) -> torch.Tensor:
        """The LM head rows drafting computes now, transposed: ``[d, N]``
        (:meth:`head_vocab`) or the target's whole head, ``[d, V]``
        (:func:`~specdec_core.core.lean_gpt2.head_columns`)."""
        vocab = self.head_vocab()
        return head_columns(self.lm_head.weight) if vocab is None else self._columns[id(vocab)]

    def _head_mm(self, features: torch.Tensor) -> torch.Tensor:
        """``[T, d]`` features → ``[T, N or V]`` float32 logits on :meth:`_head_columns`
        (weight-only int8 when :attr:`int8`)."""
        columns = self._head_columns()
        if self.int8:
            return int8_linear(columns, None, 1)(features)
        return torch.mm(features, columns).float()

    def _head_width(self) -> int:
        return self._head_columns().shape[1]

    def _logits(self, feature: torch.Tensor) -> torch.Tensor:
        """``[N]`` (reduced head) or ``[V]`` float32 logits of the target's LM head rows on
        one ``[d]`` feature."""
        started = time.perf_counter()
        logits = self._head_mm(feature[None])[0]
        sync(self.device)  # the kernels' time, not the launch's (core/device.py)
        self.clock.add(started)
        return logits


def make_eagle_drafter(
    pair: ModelPair,
    top_n: int | None = None,
    int8: bool | None = None,
    head: EagleHead | None = None,
) -> EagleDrafter:
    """A fresh :class:`EagleDrafter` (its own head cache) on the pair's shared head, on its
    reduced vocabularies when the pair ships them, one greedy and one sampled (``top_n``:
    another ``N`` for both, ``0`` the full head;
    :func:`~specdec_core.drafters.draft_vocab.draft_vocab_for`), float32 unless
    ``SPECDEC_DRAFT_WEIGHTS=int8`` and the device runs int8 (``int8``: force on or off;
    :func:`~specdec_core.core.int8_linear.draft_int8`, :attr:`int8_by_default`). ``head``:
    another head for the pair's target instead (a benchmark's candidate).

    Raises:
        ConfigError: see :func:`load_eagle_head`.
    """
    vocab = draft_vocab_for(pair, "eagle", top_n)
    sampled = vocab if top_n is not None else draft_vocab_for(pair, "eagle", sampled=True)
    int8 = draft_int8(pair.device, EagleDrafter.int8_by_default) if int8 is None else int8
    head = load_eagle_head(pair) if head is None else head
    return EagleDrafter(head, pair.target, vocab, int8, sampled)
