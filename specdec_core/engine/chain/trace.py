"""The chain round's frozen traces, one per step (``engine/chain/session.py`` returns
them; ``core/trace_json.py`` round-trips them): :class:`ProposeTrace`, :class:`EditTrace`,
:class:`VerifyTrace` with one :class:`PositionCheck` per draft, :class:`CommitTrace`, and
the finished :class:`RoundTrace`. Plain values and numpy arrays only, like every trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdec_core.core.trace import DistSlice, KVState, TokenInfo
from specdec_core.core.words import CheckStatus, RoundKind, StopReason, VerdictKind
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.rules.acceptance import BlockDecision


@dataclass(frozen=True)
class PositionCheck:
    """The verification of drafted position ``position`` (1-based, 1..γ).

    ``p``/``q`` are ``p_i(y_i)``/``q_i(y_i)``; ``accept_prob = min(1, p/q)`` (greedy: 1 on
    a match with the target argmax, else 0); ``u`` the uniform draw, ``None`` when not
    drawn (greedy, or discarded); ``status`` accepted | rejected | discarded | cut (see
    ``engine/chain/records.py``); ``overlap = Σ_x min(p_i(x), q_i(x))`` at this position, which the
    acceptance rate averages over checked (accepted or rejected) positions. ``near_tie``:
    the decision at this checked position sat closer to its threshold than float error
    (``core/sampling.near_tie_draw`` / ``near_tie_argmax``): another device or thread
    count could decide it the other way.
    """

    position: int
    token: TokenInfo
    p: float
    q: float
    accept_prob: float
    u: float | None
    status: CheckStatus
    target_argmax: TokenInfo
    edited: bool
    overlap: float
    dist: DistSlice
    near_tie: bool = False


@dataclass(frozen=True)
class ProposeTrace:
    round_index: int
    gamma: int
    drafted: tuple[TokenInfo, ...]
    draft_dists: tuple[DistSlice, ...]
    draft_ms: float
    draft_forwards: int
    kv_before: KVState
    kv_after: KVState


@dataclass(frozen=True)
class EditTrace:
    round_index: int
    position: int
    old_token: TokenInfo
    new_token: TokenInfo
    drafted: tuple[TokenInfo, ...]
    edited_positions: tuple[int, ...]
    reproposed: bool
    draft_forwards: int
    draft_dists: tuple[DistSlice, ...]
    kv_after: KVState


@dataclass(frozen=True)
class VerifyTrace:
    """``accepted`` is the rule's accepted length ``n`` (the correction replaces draft
    ``n + 1``); the committed drafts are the checks whose status is ``accepted`` (fewer
    when a stop cuts the round). ``next_dist`` is ``p_{γ+1}`` (bonus) or, after a
    rejection, the slice at that position (whose ``excess`` is the residual before
    normalisation). ``kv_before`` / ``kv_after``: the caches and the processors' state
    (:attr:`KVState.processors`) before the forward (at the committed ids) and after it
    (advanced through the drafts). ``unprocessed_dists``: ``p`` before the processors,
    next to the checks' processed ``p`` (the masked mass made visible)."""

    round_index: int
    greedy: bool
    checks: tuple[PositionCheck, ...]
    accepted: int
    next_token: TokenInfo
    kind: VerdictKind
    next_dist: DistSlice
    verify_ms: float
    target_forward_tokens: int
    kv_before: KVState
    kv_after: KVState
    # greedy only: the target's T = 1 slices at positions 1..γ+1 from the same logits
    # (context the greedy rule does not use); empty when sampling
    context_dists: tuple[DistSlice, ...] = ()
    # with history-dependent processors (penalties, grammar): the target's slices at
    # positions 1..γ+1 BEFORE them (after temperature/top-k/top-p; at T = 0 the T = 1
    # softmax, like context_dists), showing every token the processed slices show plus
    # their own top tokens; empty when no processor is active
    unprocessed_dists: tuple[DistSlice, ...] = ()
    # block verification (sampled rounds): what the rule computed and decided, next to
    # what token-wise verification decides with the same draws; None under token-wise
    block: BlockDecision | None = None


@dataclass(frozen=True)
class CommitTrace:
    """``kind`` is correction | bonus | stopped (a stop cut the commit short);
    ``discarded`` the rejected draft and those after it, ``cut`` the drafts after a stop
    that fell on a committed draft; ``kv_before`` marks the rows the rollback removes
    (state ``rejected``/``discarded``/``cut``); ``kv_after``'s processors stand rolled
    back to the committed ids, correction/bonus token included."""

    round_index: int
    appended: tuple[TokenInfo, ...]
    kind: RoundKind
    discarded: tuple[TokenInfo, ...]
    cut: tuple[TokenInfo, ...]
    stop_reason: StopReason | None
    rolled_back_target: int
    rolled_back_draft: int
    kv_before: KVState
    kv_after: KVState


@dataclass(frozen=True)
class RoundTrace:
    """A finished round: its four steps and its :class:`RoundRecord` (what the
    statistics are derived from, ``records.summarize``)."""

    round_index: int
    propose: ProposeTrace
    edits: tuple[EditTrace, ...]
    verify: VerifyTrace
    commit: CommitTrace
    record: RoundRecord
