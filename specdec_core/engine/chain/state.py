"""The chain's round in flight (:class:`PendingRound`) and the read-only pieces its steps
(``engine/chain/session.py``) use: the round functions' context for a session, γ for the
next round, the draft slices and the verify step's trace. What
every shape shares (prompt, caches, phase, atomic steps, drivers) is the session's
(``engine/session.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import torch

from specdec_core.core.slices import dist_slice
from specdec_core.core.trace import DistSlice, KVState, TokenInfo
from specdec_core.core.words import StopReason
from specdec_core.engine.chain.edits import build_checks, unprocessed_slices, verify_slices
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.round import ChainContext, Checked
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


def verify_trace(
    s: Session,
    pending: PendingRound,
    checked: Checked,
    record: RoundRecord,
    verify_ms: float,
    kv_before: KVState,
) -> VerifyTrace:
    """The :class:`VerifyTrace` of a verified round: each position's check and slices
    (:func:`~specdec_core.engine.chain.edits.build_checks`), the next-token slice, and the
    KV table with the checks' statuses."""
    slicer = partial(one_slice, s)
    ids, verdict = pending.ids, checked.verdict
    checks = build_checks(ids, pending.q_rows, checked, record, pending.edited, s.token, slicer)
    next_dist, contexts = verify_slices(ids, checked, checks, slicer)
    unprocessed = unprocessed_slices(checked.unprocessed, checks, contexts, next_dist, slicer)
    return VerifyTrace(
        round_index=s.round_index,
        greedy=s.config.sampling.greedy,
        checks=checks,
        accepted=verdict.accepted,
        next_token=s.token(verdict.next_token),
        kind=verdict.kind,
        next_dist=next_dist,
        verify_ms=verify_ms,
        target_forward_tokens=checked.fed,
        kv_before=kv_before,
        kv_after=s.kv_state(list(record.statuses)),
        context_dists=contexts,
        unprocessed_dists=unprocessed,
        block=checked.block,
    )
