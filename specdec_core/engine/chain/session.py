"""The chain shape of a :class:`~specdec_core.engine.session.Session`: :class:`ChainSteps`
(the round in flight, its steps, the edits, previews and views only a chain has; a page
reaches them as ``session.steps``) and :func:`SpeculativeSession`, the factory it calls.

One round (docs/ARCHITECTURE.md "One round, step by step"):

1. ``propose()``  — the drafter proposes ``y_1..y_γ`` serially, recording ``q_1..q_γ``.
2. ``edit_draft(i, token)`` (optional, repeatable) — a student replaces ``y_i``; its ``q_i``
   becomes one-hot (still lossless) and later drafts are re-proposed from the edit.
3. ``verify()``   — ONE target forward over the pending committed token(s) + ``y_1..y_γ``
   gives ``p_1..p_{γ+1}``; the rule in ``rules/acceptance.py`` decides.
4. ``commit()``   — append the accepted prefix + correction/bonus token, discard the rest,
   crop both caches to the committed history (the appended token has no KV yet).

The history-dependent processors (``session.processors``: penalties, a grammar matcher)
process every ``q`` and ``p`` row on its own prefix and are kept like the caches: on the
committed ids between steps, through the drafts after ``verify``. An edit to a token
outside the grammar is allowed: its ``p`` is 0, so it is rejected.

Each step calls the round's functions (``engine/chain/round.py``, which the fast path
``engine/chain/generate.py`` runs too) and returns a frozen trace (``engine/chain/trace.py``).
Besides: ``engine/session.py`` (what every shape shares), ``engine/chain/state.py`` (the
pending round, its context) and ``engine/chain/edits.py`` (checks, the target's preview).
"""

from __future__ import annotations

import time
from functools import cached_property

import torch

from specdec_core.core.kvcache import common_prefix_len
from specdec_core.core.models import ModelPair
from specdec_core.core.sampling import one_hot
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import DistSlice, TokenInfo
from specdec_core.core.words import CheckStatus
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import make_model_drafter
from specdec_core.engine.chain.edits import (
    accept_preview,
    check_position,
    check_token_id,
    first_mismatch,
    target_top_ids,
)
from specdec_core.engine.chain.round import ChainContext, apply_round, decide_round, propose, verify
from specdec_core.engine.chain.state import (
    PendingRound,
    context,
    draft_slices,
    drafts_in,
    gamma_now,
    verify_trace,
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
) -> Session[ChainSteps]:
    """A :class:`~specdec_core.engine.session.Session` of chain rounds (``drafter``:
    default the pair's draft model). Raises what :class:`Session` raises."""
    return Session(pair, prompt, config, drafter, prompt_len, ChainSteps)


class ChainSteps:
    """The chain shape over its ``session``: the round in flight (:class:`PendingRound`),
    the four steps of a round, the quick edits and previews, and the views. Random draws: each
    round has a drafting and a verification stream of its own
    (:func:`~specdec_core.engine.rounds.round_stream` of ``config.seed``, the round index
    and the stream's name); the pending round keeps its drafting stream (re-drafting after
    an edit continues it), ``verify`` makes the verification stream afresh. Every step
    either completes or raises and leaves the session as it was."""

    unit = "drafts"

    def __init__(self, session: Session[ChainSteps]) -> None:
        self.session = session
        self.pending: PendingRound | None = None

    @cached_property
    def ctx(self) -> ChainContext:
        """The round functions' context, built once (a session's settings never change)."""
        return context(self.session)

    def check_settings(self, config: SessionConfig) -> None:
        """Every valid setting runs as a chain."""

    def make_drafter(self, pair: ModelPair, drafter: Drafter | None) -> Drafter:
        return drafter or make_model_drafter(pair)

    @property
    def drafts(self) -> list[int]:
        """The pending drafted ids (after the latest propose or edit; empty between rounds)."""
        return list(self.pending.ids) if self.pending else []

    def draft_stream(self) -> torch.Generator | None:
        return self.pending.draft_rng if self.pending else None

    # ------------------------------------------------------------------ propose
    def propose(self) -> ProposeTrace:
        """Phase 1: draft up to γ tokens serially (a drafter may propose fewer, even none;
        γ and the confidence stop follow the γ schedule, ``engine/schedule.py``). Raises
        PhaseError: not in phase ``propose``."""
        s = self.session
        s._require("propose", "propose")
        kv_before = s.kv_state()
        gamma = gamma_now(s)
        rng = round_stream(s.config.seed, s.round_index, "draft")
        with s._atomic():
            draft = propose(self.ctx, s.ids, gamma, rng)
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
    def edit_draft(self, position: int, token_id: int) -> EditTrace:
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
        s = self.session
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
                draft = propose(self.ctx, s.ids + ids, rest, pending.draft_rng)
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

    def make_position_wrong(self, position: int) -> EditTrace:
        """Quick edit: ``y_position`` becomes the target's second choice there, a plausible
        token that greedy verification rejects. Raises InputError (position out of range,
        checked before the preview's forward), PhaseError (not after ``propose``)."""
        check_position(position, len(self.drafts))
        return self.edit_draft(position, self.target_preview(top_n=2)[position - 1][1].id)

    def make_draft_agree(self) -> list[EditTrace]:
        """Quick edit: replace each draft that differs from the target's argmax (first
        mismatch first, re-checking after each edit, which may re-draft the rest) so that
        greedy verification accepts all. At most γ' edits, each after one cache-free
        target forward."""
        edits = []
        for _ in range(len(self.drafts)):
            top = [[t.id for t in row] for row in self.target_preview(1)]
            if (fix := first_mismatch(top, self.drafts)) is None:
                break
            edits.append(self.edit_draft(*fix))
        return edits

    # ------------------------------------------------------------------ previews
    def target_preview(self, top_n: int = 5) -> list[list[TokenInfo]]:
        """The target's top ``top_n`` tokens at each drafted position before verification,
        after the processors (:func:`~specdec_core.engine.chain.edits.target_top_ids`;
        caches untouched). Raises PhaseError: not after ``propose``."""
        s = self.session
        pending = s._require("verify", "preview the target")
        rows = target_top_ids(s.pair, s.ids, pending.ids, top_n, s.processors)
        return [[s.token(t) for t in row] for row in rows]

    def accept_preview(self) -> list[float]:
        """Exact ``a_i`` at each drafted position before verification
        (:func:`~specdec_core.engine.chain.edits.accept_preview`). Raises PhaseError: not
        after ``propose``."""
        s = self.session
        pending = s._require("verify", "preview the acceptance probabilities")
        c = s.config
        return accept_preview(s.pair, s.ids, pending.ids, pending.q_rows, c.sampling, s.processors)

    # ------------------------------------------------------------------ verify
    def verify(self) -> VerifyTrace:
        """Phase 3: one parallel target forward over the pending tokens and all drafts,
        then the rule (``rules/acceptance.py``) with draws from the round's own
        verification stream (:func:`~specdec_core.engine.rounds.round_stream`). The checks'
        statuses are final: the commit that follows is already decided (a stop on a
        committed draft makes later drafts ``cut``,
        :func:`~specdec_core.engine.chain.records.round_statuses`). Raises PhaseError: not
        after ``propose``."""
        s = self.session
        pending = s._require("verify", "verify")
        kv_before = s.kv_state()
        ctx = self.ctx
        with s._atomic():
            started = time.perf_counter()
            rng = round_stream(s.config.seed, s.round_index, "verify")
            checked = verify(ctx, s.ids, pending.ids, pending.q_rows, rng, views=True)
            verify_ms = (time.perf_counter() - started) * 1e3
            record, stop_reason = decide_round(ctx, s.ids, pending.gamma, pending.ids, checked)
            trace = verify_trace(s, pending, checked, record, verify_ms, kv_before)
        pending.record, pending.stop_reason, pending.verify = record, stop_reason, trace
        return trace

    # ------------------------------------------------------------------ commit
    def commit(self) -> CommitTrace:
        """Phase 4 (+ reject): append the round's committed tokens (accepted drafts +
        correction/bonus, cut short by EOS, a stop string, ``max_new_tokens`` or the
        context), and roll both caches back to the committed history. The appended token
        is committed with no KV yet. Raises PhaseError: not after ``verify``."""
        s = self.session
        pending = s._require("commit", "commit")
        assert pending.record is not None
        assert pending.propose is not None and pending.verify is not None
        record = pending.record
        kv_before = pending.verify.kv_after  # nothing changed since verify
        s.ids, (rolled_target, rolled_draft) = apply_round(self.ctx, s.ids, record)
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
