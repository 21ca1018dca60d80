"""``SpeculativeSession``: the step machine a page drives.

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

Each step calls the round's functions (``engine/chain/round.py``: ``propose``,
``verify``, ``decide_round``, ``apply_round``; the fast path ``engine/chain/generate.py``
runs the same ones) and returns a frozen trace (``engine/chain/trace.py``). Besides:
``engine/machine.py`` (what chain and tree share: prompt, caches, phase, atomic steps,
``run_round``/``run``/``run_until``), ``engine/chain/state.py`` (the pending round and its
views) and ``engine/chain/edits.py`` (previews, checks). A call out of phase raises
:class:`PhaseError`; any step that raises leaves the session as it was.
"""

from __future__ import annotations

import time

import torch

from specdec_core.core.kvcache import common_prefix_len
from specdec_core.core.sampling import one_hot
from specdec_core.engine.chain.edits import (
    build_checks,
    check_position,
    check_token_id,
    first_mismatch,
    unprocessed_slices,
    verify_slices,
)
from specdec_core.engine.chain.round import apply_round, decide_round, propose, verify
from specdec_core.engine.chain.state import PendingRound, SessionState
from specdec_core.engine.chain.trace import (
    CommitTrace,
    EditTrace,
    ProposeTrace,
    RoundTrace,
    VerifyTrace,
)
from specdec_core.engine.rounds import round_stream


class SpeculativeSession(SessionState):
    """Step-by-step speculative decoding over a shared, read-only :class:`ModelPair`: the
    four steps of a round. Every step either completes or raises and leaves the session as
    it was (state and views: :class:`~specdec_core.engine.chain.state.SessionState`).

    Raises:
        PromptError: bad prompt (text or ids). ConfigError: bad settings.
    """

    # ------------------------------------------------------------------ propose
    def propose(self) -> ProposeTrace:
        """Phase 1: draft up to γ tokens serially (a drafter may propose fewer, even none;
        γ and the confidence stop follow the γ schedule, ``engine/schedule.py``).

        Raises:
            PhaseError: not in phase ``propose``.
        """
        self._require("propose", "propose")
        kv_before = self.kv_state()
        gamma = self._gamma_now()
        rng = round_stream(self.config.seed, self.round_index, "draft")
        with self._atomic():
            draft = propose(self._context(), self.ids, gamma, rng)
            self.processors.sync_to(self.ids)  # drafting advanced them: back to the commit
            ids = draft.ids.tolist()
            pending = PendingRound(ids, draft.probs, gamma, rng)
            drafted = tuple(self.token(t) for t in ids)
            dists = self._draft_slices(ids, draft.probs)
        self._pending = pending
        trace = ProposeTrace(
            round_index=self.round_index,
            gamma=len(ids),
            drafted=drafted,
            draft_dists=dists,
            draft_ms=draft.ms,
            draft_forwards=draft.forwards,
            kv_before=kv_before,
            kv_after=self.kv_state(),
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
        pending = self._require("verify", "edit a draft")
        assert pending is not None
        gamma = len(pending.ids)
        check_position(position, gamma)
        vocab = self.pair.vocab_size
        check_token_id(token_id, vocab)
        old = pending.ids[position - 1]
        ids = pending.ids[: position - 1] + [token_id]
        rows = [pending.q_rows[: position - 1], one_hot(torch.tensor([token_id]), vocab)]
        edited = {i for i in pending.edited if i < position} | {position}
        rest = gamma - position
        forwards = 0
        reproposed = self.config.repropose_after_edit and rest > 0
        with self._atomic():
            if reproposed:
                draft = propose(self._context(), self.ids + ids, rest, pending.draft_rng)
                self.processors.sync_to(self.ids)
                ids += draft.ids.tolist()
                rows.append(draft.probs)
                forwards = draft.forwards
            else:
                ids += pending.ids[position:]
                rows.append(pending.q_rows[position:])
                edited |= {i for i in pending.edited if i > position}
                keep = common_prefix_len(self.drafter.cached_ids() or [], self.ids + ids)
                self.drafter.rollback(keep)
            q_rows = torch.cat(rows)
            drafted = tuple(self.token(t) for t in ids)
            dists = self._draft_slices(ids, q_rows)
        pending.ids, pending.q_rows, pending.edited = ids, q_rows, edited
        trace = EditTrace(
            round_index=self.round_index,
            position=position,
            old_token=self.token(old),
            new_token=self.token(token_id),
            drafted=drafted,
            edited_positions=tuple(sorted(edited)),
            reproposed=reproposed,
            draft_forwards=forwards,
            draft_dists=dists,
            kv_after=self.kv_state(),
        )
        pending.edits.append(trace)
        return trace

    def make_position_wrong(self, position: int) -> EditTrace:
        """Quick edit: ``y_position`` becomes the target's second choice there, a plausible
        token that greedy verification rejects.

        Raises:
            InputError: position out of range (checked before the preview's forward).
            PhaseError: not after ``propose``.
        """
        check_position(position, len(self.drafts))
        return self.edit_draft(position, self.target_preview(top_n=2)[position - 1][1].id)

    def make_draft_agree(self) -> list[EditTrace]:
        """Quick edit: replace each draft that differs from the target's argmax (first
        mismatch first, re-checking after each edit, since an edit may re-draft the rest)
        so that greedy verification accepts all of them. At most γ' edits, each after one
        cache-free target forward."""
        edits = []
        for _ in range(len(self.drafts)):
            fix = first_mismatch(
                [[t.id for t in row] for row in self.target_preview(1)], self.drafts
            )
            if fix is None:
                break
            edits.append(self.edit_draft(*fix))
        return edits

    # ------------------------------------------------------------------ verify
    def verify(self) -> VerifyTrace:
        """Phase 3: one parallel target forward over the pending tokens and all drafts,
        then the rule (``rules/acceptance.py``) with draws from the round's own
        verification stream (:func:`~specdec_core.engine.rounds.round_stream`). The checks'
        statuses are final: the commit that follows is already decided (a stop on a
        committed draft makes later drafts ``cut``,
        :func:`~specdec_core.engine.chain.records.round_statuses`).

        Raises:
            PhaseError: not after ``propose``.
        """
        pending = self._require("verify", "verify")
        assert pending is not None
        kv_before = self.kv_state()
        ctx = self._context()
        with self._atomic():
            started = time.perf_counter()
            rng = round_stream(self.config.seed, self.round_index, "verify")
            checked = verify(ctx, self.ids, pending.ids, pending.q_rows, rng, views=True)
            verify_ms = (time.perf_counter() - started) * 1e3
            record, stop_reason = decide_round(ctx, self.ids, pending.gamma, pending.ids, checked)
            verdict, slicer = checked.verdict, self._slice
            checks = build_checks(
                pending.ids, pending.q_rows, checked, record, pending.edited, self.token, slicer
            )
            next_dist, contexts = verify_slices(pending.ids, checked, checks, slicer)
            unprocessed = unprocessed_slices(
                checked.unprocessed, checks, contexts, next_dist, slicer
            )
            trace = VerifyTrace(
                round_index=self.round_index,
                greedy=self.config.sampling.greedy,
                checks=checks,
                accepted=verdict.accepted,
                next_token=self.token(verdict.next_token),
                kind=verdict.kind,
                next_dist=next_dist,
                verify_ms=verify_ms,
                target_forward_tokens=checked.fed,
                kv_before=kv_before,
                kv_after=self.kv_state(list(record.statuses)),
                context_dists=contexts,
                unprocessed_dists=unprocessed,
                block=checked.block,
            )
        pending.record, pending.stop_reason, pending.verify = record, stop_reason, trace
        return trace

    # ------------------------------------------------------------------ commit
    def commit(self) -> CommitTrace:
        """Phase 4 (+ reject): append the round's committed tokens (accepted drafts +
        correction/bonus, cut short by EOS, a stop string, ``max_new_tokens`` or the
        context), and roll both caches back to the committed history. The appended token
        is committed with no KV yet.

        Raises:
            PhaseError: not after ``verify``.
        """
        pending = self._require("commit", "commit")
        assert pending is not None and pending.record is not None
        assert pending.propose is not None and pending.verify is not None
        record = pending.record
        kv_before = self.kv_state(list(record.statuses))
        self.ids, (rolled_target, rolled_draft) = apply_round(self._context(), self.ids, record)
        self._pending = None
        self.stop_reason = pending.stop_reason
        trace = CommitTrace(
            round_index=self.round_index,
            appended=tuple(self.token(t) for t in record.appended),
            kind=record.kind,
            discarded=self._drafts_in(record, "rejected", "discarded"),
            cut=self._drafts_in(record, "cut"),
            stop_reason=pending.stop_reason,
            rolled_back_target=rolled_target,
            rolled_back_draft=rolled_draft,
            kv_before=kv_before,
            kv_after=self.kv_state(),
        )
        self.history.append(
            RoundTrace(
                self.round_index,
                pending.propose,
                tuple(pending.edits),
                pending.verify,
                trace,
                record,
            )
        )
        self.round_index += 1
        return trace
