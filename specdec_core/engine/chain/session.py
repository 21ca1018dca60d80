"""The chain shape of a :class:`~specdec_core.engine.session.Session`: :class:`ChainSteps`
(the round in flight and its steps) and :func:`SpeculativeSession`, the factory a page
calls.

One round (docs/ARCHITECTURE.md "One round, step by step"):

1. ``propose()``  — the drafter proposes ``y_1..y_γ`` serially, recording ``q_1..q_γ``.
2. ``edit_draft(i, token)`` (optional, repeatable) — a student replaces ``y_i``; its ``q_i``
   becomes one-hot (still lossless) and later drafts are re-proposed from the edit.
3. ``verify()``   — ONE target forward over the pending committed token(s) + ``y_1..y_γ``
   gives ``p_1..p_{γ+1}``; the rule in ``rules/acceptance.py`` decides.
4. ``commit()``   — append the accepted prefix + correction/bonus token, discard the rest,
   crop both caches to the committed history (the appended token has no KV yet).

State beyond the KV cache: the history-dependent processors (``self.processors``,
``core/processors.py``: penalties, a grammar matcher) process every ``q`` and ``p`` row on
its own prefix and are kept like the caches. Between steps they stand on the committed
ids (``propose`` and an edit's re-proposal advance them through the drafts, then sync
them back); ``verify`` advances them through the drafts (``VerifyTrace.kv_after``);
``commit`` rolls them back with the caches to the committed ids, correction/bonus token
included (``CommitTrace.kv_after``). An edit to a token outside the grammar is allowed:
its ``p`` is 0, so it is rejected.

Each step calls the round's functions (``engine/chain/round.py``; the fast path
``engine/chain/generate.py`` runs the same ones) and returns a frozen trace
(``engine/chain/trace.py``). Besides: ``engine/session.py`` (what every shape shares),
``engine/chain/state.py`` (the pending round, the round's context, previews) and
``engine/chain/edits.py`` (checks).
"""

from __future__ import annotations

import time
from functools import partial

import torch

from specdec_core.core.kvcache import common_prefix_len
from specdec_core.core.models import ModelPair
from specdec_core.core.sampling import one_hot
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import DistSlice
from specdec_core.core.words import CheckStatus
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import ModelDrafter
from specdec_core.engine.chain.edits import (
    build_checks,
    check_position,
    check_token_id,
    unprocessed_slices,
    verify_slices,
)
from specdec_core.engine.chain.round import apply_round, decide_round, propose, verify
from specdec_core.engine.chain.state import (
    PendingRound,
    accept_preview,
    context,
    draft_slices,
    drafts_in,
    gamma_now,
    make_draft_agree,
    make_position_wrong,
    one_slice,
    target_preview,
)
from specdec_core.engine.chain.trace import (
    CommitTrace,
    EditTrace,
    ProposeTrace,
    RoundTrace,
    VerifyTrace,
)
from specdec_core.engine.rounds import round_stream
from specdec_core.engine.session import Session


def SpeculativeSession(  # noqa: N802 - the constructor name callers have always used
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig | None = None,
    drafter: Drafter | None = None,
    prompt_len: int | None = None,
) -> Session:
    """A :class:`~specdec_core.engine.session.Session` of chain rounds (``drafter``:
    default the pair's draft model). Raises what :class:`Session` raises."""
    return Session(pair, prompt, config, drafter, prompt_len, ChainSteps())


class ChainSteps:
    """The chain shape: the round in flight (:class:`PendingRound`) and the four steps of
    a round over :class:`~specdec_core.engine.session.Session` ``s``. Random draws: each
    round has a drafting and a verification stream of its own
    (:func:`~specdec_core.engine.rounds.round_stream` of ``config.seed``, the round index
    and the stream's name); the pending round keeps its drafting stream (re-drafting after
    an edit continues it), ``verify`` makes the verification stream afresh. Every step
    either completes or raises and leaves the session as it was."""

    unit = "drafts"

    def __init__(self) -> None:
        self.pending: PendingRound | None = None

    def check_settings(self, config: SessionConfig) -> None:
        """Every valid setting runs as a chain."""

    def make_drafter(self, pair: ModelPair, drafter: Drafter | None) -> Drafter:
        return drafter or ModelDrafter(pair.draft)

    def kv_drafts(self) -> list[int]:
        """The pending drafts (listed after the committed ids in the KV-state table)."""
        return list(self.pending.ids) if self.pending else []

    def draft_stream(self) -> torch.Generator | None:
        return self.pending.draft_rng if self.pending else None

    # ------------------------------------------------------------------ propose
    def propose(self, s: Session) -> ProposeTrace:
        """Phase 1: draft up to γ tokens serially (a drafter may propose fewer, even none;
        γ and the confidence stop follow the γ schedule, ``engine/schedule.py``).

        Raises:
            PhaseError: not in phase ``propose``.
        """
        s._require("propose", "propose")
        kv_before = s.kv_state()
        gamma = gamma_now(s)
        rng = round_stream(s.config.seed, s.round_index, "draft")
        with s._atomic():
            draft = propose(context(s), s.ids, gamma, rng)
            s.processors.sync_to(s.ids)  # drafting advanced them: back to the commit
            ids = draft.ids.tolist()
            pending = PendingRound(ids, draft.probs, gamma, rng)
            drafted = tuple(s.token(t) for t in ids)
            dists = draft_slices(s, ids, draft.probs)
        self.pending = pending
        trace = ProposeTrace(
            round_index=s.round_index,
            gamma=len(ids),
            drafted=drafted,
            draft_dists=dists,
            draft_ms=draft.ms,
            draft_forwards=draft.forwards,
            kv_before=kv_before,
            kv_after=s.kv_state(),
        )
        pending.propose = trace
        return trace

    # ------------------------------------------------------------------ edit
    def edit_draft(self, s: Session, position: int, token_id: int) -> EditTrace:
        """Phase 2 (optional): replace drafted token ``y_position`` (1-based) by ``token_id``.

        The edited token is a deterministic proposal: ``q_position`` becomes one-hot, so the
        sampling rule accepts it with ``p(y)`` and stays lossless. With
        ``repropose_after_edit`` later drafts are re-proposed from the edited prefix, with
        draws from the round's drafting stream (never the verification stream, so
        ``u_1..u_{position−1}`` stay as they were); the drafter may then propose fewer than
        before (prompt lookup), so the round may end up with fewer drafts.

        Raises:
            PhaseError: not after ``propose``. InputError: position or id out of range (the
            session is unchanged).
        """
        pending = s._require("verify", "edit a draft")
        gamma = len(pending.ids)
        check_position(position, gamma)
        vocab = s.pair.vocab_size
        check_token_id(token_id, vocab)
        old = pending.ids[position - 1]
        ids = pending.ids[: position - 1] + [token_id]
        rows = [pending.q_rows[: position - 1], one_hot(torch.tensor([token_id]), vocab)]
        edited = {i for i in pending.edited if i < position} | {position}
        rest = gamma - position
        forwards = 0
        reproposed = s.config.repropose_after_edit and rest > 0
        with s._atomic():
            if reproposed:
                draft = propose(context(s), s.ids + ids, rest, pending.draft_rng)
                s.processors.sync_to(s.ids)
                ids += draft.ids.tolist()
                rows.append(draft.probs)
                forwards = draft.forwards
            else:
                ids += pending.ids[position:]
                rows.append(pending.q_rows[position:])
                edited |= {i for i in pending.edited if i > position}
                keep = common_prefix_len(s.drafter.cached_ids() or [], s.ids + ids)
                s.drafter.rollback(keep)
            q_rows = torch.cat(rows)
            drafted = tuple(s.token(t) for t in ids)
            dists = draft_slices(s, ids, q_rows)
        pending.ids, pending.q_rows, pending.edited = ids, q_rows, edited
        trace = EditTrace(
            round_index=s.round_index,
            position=position,
            old_token=s.token(old),
            new_token=s.token(token_id),
            drafted=drafted,
            edited_positions=tuple(sorted(edited)),
            reproposed=reproposed,
            draft_forwards=forwards,
            draft_dists=dists,
            kv_after=s.kv_state(),
        )
        pending.edits.append(trace)
        return trace

    # Quick edits and previews (``engine/chain/state.py``), over the session.
    make_position_wrong = staticmethod(make_position_wrong)
    make_draft_agree = staticmethod(make_draft_agree)
    target_preview = staticmethod(target_preview)
    accept_preview = staticmethod(accept_preview)

    # ------------------------------------------------------------------ verify
    def verify(self, s: Session) -> VerifyTrace:
        """Phase 3: one parallel target forward over the pending tokens and all drafts,
        then the rule (``rules/acceptance.py``) with draws from the round's own
        verification stream (:func:`~specdec_core.engine.rounds.round_stream`). The checks'
        statuses are final: the commit that follows is already decided (a stop on a
        committed draft makes later drafts ``cut``,
        :func:`~specdec_core.engine.chain.records.round_statuses`).

        Raises:
            PhaseError: not after ``propose``.
        """
        pending = s._require("verify", "verify")
        kv_before = s.kv_state()
        ctx = context(s)
        with s._atomic():
            started = time.perf_counter()
            rng = round_stream(s.config.seed, s.round_index, "verify")
            checked = verify(ctx, s.ids, pending.ids, pending.q_rows, rng, views=True)
            verify_ms = (time.perf_counter() - started) * 1e3
            record, stop_reason = decide_round(ctx, s.ids, pending.gamma, pending.ids, checked)
            verdict = checked.verdict

            slicer = partial(one_slice, s)
            checks = build_checks(
                pending.ids, pending.q_rows, checked, record, pending.edited, s.token, slicer
            )
            next_dist, contexts = verify_slices(pending.ids, checked, checks, slicer)
            unprocessed = unprocessed_slices(
                checked.unprocessed, checks, contexts, next_dist, slicer
            )
            trace = VerifyTrace(
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
        pending.record, pending.stop_reason, pending.verify = record, stop_reason, trace
        return trace

    # ------------------------------------------------------------------ commit
    def commit(self, s: Session) -> CommitTrace:
        """Phase 4 (+ reject): append the round's committed tokens (accepted drafts +
        correction/bonus, cut short by EOS, a stop string, ``max_new_tokens`` or the
        context), and roll both caches back to the committed history. The appended token
        is committed with no KV yet.

        Raises:
            PhaseError: not after ``verify``.
        """
        pending = s._require("commit", "commit")
        assert pending.record is not None
        assert pending.propose is not None and pending.verify is not None
        record = pending.record
        kv_before = s.kv_state(list(record.statuses))
        s.ids, (rolled_target, rolled_draft) = apply_round(context(s), s.ids, record)
        self.pending = None
        s.stop_reason = pending.stop_reason
        trace = CommitTrace(
            round_index=s.round_index,
            appended=tuple(s.token(t) for t in record.appended),
            kind=record.kind,
            discarded=drafts_in(s, record, "rejected", "discarded"),
            cut=drafts_in(s, record, "cut"),
            stop_reason=pending.stop_reason,
            rolled_back_target=rolled_target,
            rolled_back_draft=rolled_draft,
            kv_before=kv_before,
            kv_after=s.kv_state(),
        )
        s.history.append(
            RoundTrace(
                s.round_index, pending.propose, tuple(pending.edits), pending.verify, trace, record
            )
        )
        s.round_index += 1
        return trace

    # ------------------------------------------------------------------ views
    # Between rounds: None / () / empty; ``current_gamma`` is γ after shortening near
    # ``max_new_tokens`` or the context end (0: no room for a draft).
    @property
    def current_propose(self) -> ProposeTrace | None:
        return self.pending.propose if self.pending else None

    @property
    def current_verify(self) -> VerifyTrace | None:
        return self.pending.verify if self.pending else None

    @property
    def current_edits(self) -> tuple[EditTrace, ...]:
        return tuple(self.pending.edits) if self.pending else ()

    @property
    def current_draft_dists(self) -> tuple[DistSlice, ...]:
        return self.pending.draft_dists if self.pending else ()

    @property
    def current_gamma(self) -> int | None:
        return self.pending.gamma if self.pending else None

    @property
    def edited_positions(self) -> set[int]:
        return set(self.pending.edited) if self.pending else set()

    def current_statuses(self) -> list[CheckStatus] | None:
        """After verify: accepted / rejected / discarded / cut per draft."""
        record = self.pending.record if self.pending else None
        return list(record.statuses) if record is not None else None

    def rng_state(self) -> list[int]:
        """The state of the random stream kept between steps (the pending round's
        drafting stream, as ``torch.Generator.get_state()`` bytes; empty between rounds).
        The verification stream is made afresh inside ``verify``."""
        return self.pending.draft_rng.get_state().tolist() if self.pending else []
