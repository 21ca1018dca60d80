"""The chain's round in flight (:class:`PendingRound`) and the read-only pieces its steps
(``engine/chain/session.py``) use: the round functions' context for a session, γ for the
next round, the draft slices, and the previews of the target before verification. What
every shape shares (prompt, caches, phase, atomic steps, drivers) is the session's
(``engine/session.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from specdec_core.core.slices import dist_slice
from specdec_core.core.trace import DistSlice, TokenInfo
from specdec_core.core.words import StopReason
from specdec_core.engine.chain.edits import accept_preview as accept_probs
from specdec_core.engine.chain.edits import check_position, first_mismatch, target_top_ids
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.round import ChainContext
from specdec_core.engine.chain.trace import EditTrace, ProposeTrace, VerifyTrace
from specdec_core.engine.schedule import confidence_for, round_gamma
from specdec_core.rules.lossy import lossy_rule
from specdec_core.rules.verification import sampled_rule

if TYPE_CHECKING:
    from specdec_core.engine.session import Session


@dataclass
class PendingRound:
    """The current round's in-flight state (tensors; never put in a trace)."""

    ids: list[int]
    q_rows: torch.Tensor  # [γ', V] float32 CPU
    gamma: int  # γ the drafter was asked for
    draft_rng: torch.Generator  # the round's drafting stream (re-drafts continue it)
    edited: set[int] = field(default_factory=set)
    propose: ProposeTrace | None = None
    edits: list[EditTrace] = field(default_factory=list)
    record: RoundRecord | None = None
    stop_reason: StopReason | None = None
    verify: VerifyTrace | None = None

    @property
    def draft_dists(self) -> tuple[DistSlice, ...]:
        """``q`` slices of the drafts now pending (after the latest propose or edit)."""
        if self.edits:
            return self.edits[-1].draft_dists
        assert self.propose is not None
        return self.propose.draft_dists


def context(s: Session) -> ChainContext:
    """The round functions' context (``engine/chain/round.py``) for session ``s``."""
    c = s.config
    return ChainContext(
        s.target,
        s.drafter,
        c.sampling,
        s.processors,
        c.draft_method,
        confidence_for(c),
        sampled_rule(c.verification, lossy_rule(c)),
        s.stop,
        s.prompt_len,
    )


def gamma_now(s: Session) -> int:
    """γ for the next round: the γ schedule (``engine/schedule.py``) of the finished
    rounds' accepted counts, cut near ``max_new_tokens`` or the context end."""
    return round_gamma(
        s.config,
        s.drafter,
        (r.record.accepted for r in s.history),
        now=(len(s.generated_ids), len(s.ids), s.pair.context_length),
    )


def one_slice(s: Session, p: torch.Tensor | None, q: torch.Tensor | None, extra: list[int]):
    """:func:`~specdec_core.core.slices.dist_slice` with the session's top-n and tokens."""
    return dist_slice(p, q, extra, s.config.top_n, s.token)


def draft_slices(s: Session, ids: list[int], q_rows: torch.Tensor) -> tuple[DistSlice, ...]:
    """The ``q`` slice of each drafted id."""
    return tuple(one_slice(s, None, q_rows[i], [t]) for i, t in enumerate(ids))


def drafts_in(s: Session, record: RoundRecord, *statuses: str) -> tuple[TokenInfo, ...]:
    """The drafted tokens of ``record`` whose status is one of ``statuses``."""
    pairs = zip(record.drafted, record.statuses, strict=True)
    return tuple(s.token(t) for t, st in pairs if st in statuses)


def target_preview(s: Session, top_n: int = 5) -> list[list[TokenInfo]]:
    """The target's top ``top_n`` tokens at each drafted position, before verification,
    after the processors (:func:`~specdec_core.engine.chain.edits.target_top_ids`; caches
    untouched, the processors back on the committed ids).

    Raises:
        PhaseError: not after ``propose``.
    """
    pending = s._require("verify", "preview the target")
    rows = target_top_ids(s.pair, s.ids, pending.ids, top_n, s.processors)
    return [[s.token(t) for t in row] for row in rows]


def accept_preview(s: Session) -> list[float]:
    """Exact ``a_i`` at each drafted position before verification
    (:func:`~specdec_core.engine.chain.edits.accept_preview`).

    Raises:
        PhaseError: not after ``propose``.
    """
    pending = s._require("verify", "preview the acceptance probabilities")
    return accept_probs(s.pair, s.ids, pending.ids, pending.q_rows, s.config.sampling, s.processors)


def make_position_wrong(s: Session, position: int) -> EditTrace:
    """Quick edit: ``y_position`` becomes the target's second choice there, a plausible
    token that greedy verification rejects.

    Raises:
        InputError: position out of range (checked before the preview's forward).
        PhaseError: not after ``propose``.
    """
    check_position(position, len(s.drafts))
    return s.edit_draft(position, target_preview(s, top_n=2)[position - 1][1].id)


def make_draft_agree(s: Session) -> list[EditTrace]:
    """Quick edit: replace each draft that differs from the target's argmax (first mismatch
    first, re-checking after each edit, since an edit may re-draft the rest) so that greedy
    verification accepts all of them. At most γ' edits, each after one cache-free target
    forward."""
    edits = []
    for _ in range(len(s.drafts)):
        fix = first_mismatch([[t.id for t in row] for row in target_preview(s, 1)], s.drafts)
        if fix is None:
            break
        edits.append(s.edit_draft(*fix))
    return edits
