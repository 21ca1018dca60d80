"""Checkpoints of a recurrent state: the rollback of a state that cannot be cropped.

A KV cache keeps one entry per token, so a rejection crops it (``core/kvcache.py``). A
recurrent state ``h_t`` (a GRU's, a state-space layer's) is one fixed-size summary of
every token read: nothing in ``h_t`` can be cut away to get ``h_m`` back, ``m < t``. So the
state is **saved** at the lengths a rollback may need (after each drafted token) and a
rollback **restores** the saved copy at the committed length, discarding the later ones
(a state-space or hybrid *target* that speculates needs the same: its state at every
drafted position, saved or recomputed). Without the restore the next round reads its
first token on top of the state after the rejected drafts: a corrupted state
(:attr:`StateLedger.restore` off, the lesson's wrong way).

Invariant (the tests hold it): with restore on, :attr:`StateLedger.state` is the state
after reading :attr:`StateLedger.ids` from the zero state, equal (allclose) to a fresh
read of those ids; every saved checkpoint is the state after a prefix of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

#: what happened to a checkpoint (the step page's state table): ``saved`` by the last
#: proposal and not yet judged, ``kept`` (on the committed text), ``restored`` (the live
#: state again after a rejection), ``discarded`` (it had read a rejected draft)
CheckpointStatus = Literal["saved", "kept", "restored", "discarded"]


@dataclass(frozen=True)
class StateView:
    """The checkpoints at one moment (lengths in tokens, prompt included; plain values).

    Attributes:
        length: tokens the live state has read.
        checkpoints: lengths with a saved state, ascending (after the last rollback: the
            ones kept).
        made: the checkpoints the last proposal saved.
        restored: the checkpoint the last rollback made the live state again (``None``: no
            rollback since the last proposal, or restore off).
        discarded: the checkpoints the last rollback dropped (after the committed text).
        recomputed: tokens the last proposal read before its first draft (the committed
            tokens the state had not read: the correction or bonus token, and a draft that
            was accepted but never read).
        restore: ``False`` in the wrong way (rollbacks crop the ids, not the state).
        judged: a rollback (the engine's, after the commit) came after the last proposal.
    """

    length: int
    checkpoints: tuple[int, ...]
    made: tuple[int, ...] = ()
    restored: int | None = None
    discarded: tuple[int, ...] = ()
    recomputed: int = 0
    restore: bool = True
    judged: bool = False

    def rows(self) -> tuple[tuple[int, CheckpointStatus], ...]:
        """``(length, status)`` of every checkpoint held or just discarded, ascending."""
        out: list[tuple[int, CheckpointStatus]] = []
        for m in sorted(set(self.checkpoints) | set(self.discarded)):
            if m in self.discarded:
                out.append((m, "discarded"))
            elif m == self.restored:
                out.append((m, "restored"))
            elif m in self.made and not self.judged:
                out.append((m, "saved"))
            else:
                out.append((m, "kept"))
        return tuple(out)

    def to_json(self) -> dict:
        """The CLI's round ``state``: the checkpoints the round's proposal ``made``, the
        ones ``kept`` after its commit (the restored one included), ``restored``,
        ``discarded``, ``recomputed`` and ``state_len`` (tokens the live state has read)."""
        return {
            "made": list(self.made),
            "kept": list(self.checkpoints),
            "restored": self.restored,
            "discarded": list(self.discarded),
            "recomputed": self.recomputed,
            "state_len": self.length,
        }


class StateLedger:
    """A live recurrent state, the ids it has read, and its saved checkpoints.

    ``state`` is any tensor (``None``: the zero state, before any token). Lengths index
    :attr:`ids`: the checkpoint at ``m`` is the state after ``ids[:m]``. Memory is bounded
    by one proposal: :meth:`begin` drops the checkpoints before the one the proposal
    starts from (committed text is never rolled back past it), so at most ``γ + 1`` are
    kept.
    """

    def __init__(self, restore: bool = True) -> None:
        self.restore = restore
        self.ids: list[int] = []
        self.state: torch.Tensor | None = None
        self.saved: dict[int, torch.Tensor | None] = {0: None}
        self._made: list[int] = []
        self._restored: int | None = None
        self._discarded: tuple[int, ...] = ()
        self._recomputed = 0
        self._judged = False

    def begin(self, context: list[int]) -> list[int]:
        """Start a proposal after ``context``: roll back to the longest prefix of it the
        state has read (:meth:`rollback`), forget older checkpoints, and return the ids of
        ``context`` still to be read (the caller reads them, then :meth:`advance`)."""
        keep = 0
        for a, b in zip(self.ids, context, strict=False):
            if a != b:
                break
            keep += 1
        if keep < len(self.ids):
            self.rollback(keep)
        base = max((m for m in self.saved if m <= len(self.ids)), default=0)
        self.saved = {m: s for m, s in self.saved.items() if m >= base}
        self._made, self._restored, self._discarded = [], None, ()
        self._recomputed, self._judged = 0, False
        return context[len(self.ids) :]

    def advance(self, ids: list[int], state: torch.Tensor) -> None:
        """The live state has read ``ids`` more and is now ``state``: save it (a
        checkpoint at the new length)."""
        if not self._made:  # the proposal's first read: the committed ids it lacked
            self._recomputed = len(ids)
        self.ids.extend(ids)
        self.state = state
        self.saved[len(self.ids)] = state
        self._made.append(len(self.ids))

    def rollback(self, length: int) -> int:
        """Back to the first ``length`` ids: the live state becomes the checkpoint at the
        longest saved length ``≤ length`` (none: the zero state; the ids after it are read
        again by the next :meth:`begin`), the later checkpoints are discarded. With
        restore off, the ids are cut and the state is left as it is (the wrong way).
        Returns positions removed."""
        self._judged = True
        old = len(self.ids)
        length = max(0, min(length, old))
        if length == old:
            return 0
        self._discarded = tuple(sorted(m for m in self.saved if m > length))
        if not self.restore:
            self.ids = self.ids[:length]
            self.saved = {m: s for m, s in self.saved.items() if m <= length}
            return old - length
        back = max((m for m in self.saved if m <= length), default=0)  # 0: the zero state
        self.saved = {m: s for m, s in self.saved.items() if m <= back} or {0: None}
        self.ids, self.state, self._restored = self.ids[:back], self.saved[back], back
        return old - back

    def view(self) -> StateView:
        """The checkpoints now (:class:`StateView`)."""
        return StateView(
            length=len(self.ids),
            checkpoints=tuple(sorted(self.saved)),
            made=tuple(self._made),
            restored=self._restored,
            discarded=self._discarded,
            recomputed=self._recomputed,
            restore=self.restore,
            judged=self._judged,
        )
