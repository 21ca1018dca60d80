"""The tree shape of a :class:`~specdec_core.engine.session.Session`: :class:`TreeSteps`
(the round in flight and its steps) and :func:`TreeSession`, the factory a page calls.

1. ``propose()`` — the drafter expands a token tree (``shape`` = children per node at
   each depth, at most ``budget`` nodes; one ``tree_logits`` call per expanded node,
   counting the draft forwards that ran).
2. ``verify()``  — ONE target forward over the pending committed token(s) and every
   node, with the tree attention mask; the walk from the root decides the accepted
   path and the correction/bonus token. Every node gets its state
   (``engine/tree/records.py``).
3. ``commit()``  — append the committed path + the target's token, move the path's KV
   rows into place after the committed prefix and drop the rest (compaction), roll both
   caches back to the committed history.

State beyond the KV cache (penalties, a grammar matcher: ``self.processors``,
``core/processors.py``) follows the round like the caches, and every ``kv_state``
shows it: between rounds and before verify it stands on the committed ids (``propose``
processes each node's draft row on that node's path, then syncs it back); after verify it
stands on the committed ids + the path the walk accepted (each target row it read was
processed on its node's path; the correction/bonus token is not included yet); the
commit brings it to the new committed ids with the caches. A finished round
(:class:`~specdec_core.engine.tree.trace.TreeRoundTrace`) holds its three step records, so
the three states are ``propose.kv_before``, ``verify.kv_after`` and ``commit.kv_after``.

Any step that raises leaves the session as it was; a step out of phase raises
:class:`PhaseError`. Views for the page (frozen, plain values + numpy), on
``session.steps``: :meth:`tree_view`, :meth:`attention_mask`, :meth:`compaction`,
:meth:`summary`; and the session's ``kv_state``, ``history``.

Files a reader opens besides this one: ``engine/session.py`` (what every shape shares:
prompt, caches, phase, atomic steps, ``run_round``/``run``/``run_until``),
``engine/tree/round.py`` (the round's functions: drafting the tree, the masked forward,
the walk, its record and commit, shared with the fast path
:func:`~specdec_core.engine.tree.generate.generate_tree`), ``engine/tree/generate.py``
(settings), ``engine/tree/views.py`` (the frozen views and the pure functions that build
them) and ``engine/rounds.py`` (the round's random streams and the stop rule).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, partial

import torch

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.core.words import StopReason
from specdec_core.drafters.base import Drafter
from specdec_core.engine.rounds import round_stream
from specdec_core.engine.session import Session
from specdec_core.engine.tree.generate import (
    check_budget,
    check_tree_settings,
    parse_shape,
    resolve_drafter,
    round_shape,
)
from specdec_core.engine.tree.records import TreeRoundRecord, TreeStats, summarize_tree
from specdec_core.engine.tree.round import (
    DraftTree,
    TreeContext,
    TreeVerdict,
    apply_round,
    decide_round,
    draft_tree,
    tree_forward,
    walk,
)
from specdec_core.engine.tree.trace import (
    TreeCommitTrace,
    TreeProposeTrace,
    TreeRoundTrace,
    TreeVerifyTrace,
)
from specdec_core.engine.tree.views import (
    CompactionView,
    MaskView,
    TreeView,
    build_mask_view,
    build_tree_view,
    plan_compaction,
)


@dataclass
class _Pending:
    """The round in flight: its tree and, step by step, the step records and the verdict."""

    shape: tuple[int, ...]
    tree: DraftTree
    target_forwards: int  # run while proposing (an EAGLE drafter's first-round prefill)
    propose: TreeProposeTrace | None = None
    verdict: TreeVerdict | None = None
    record: TreeRoundRecord | None = None
    stop_reason: StopReason | None = None
    verify: TreeVerifyTrace | None = None


def TreeSession(  # noqa: N802 - the constructor name callers have always used
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig | None = None,
    drafter: Drafter | str | None = None,
    shape: Sequence[int] = (2, 2, 1, 1),
    budget: int = 12,
    prompt_len: int | None = None,
) -> Session[TreeSteps]:
    """A :class:`~specdec_core.engine.session.Session` of tree rounds.

    Args:
        drafter: a :class:`Drafter`, a name for
            :func:`~specdec_core.drafters.registry.make_named_drafter` (``"model"``,
            ``"eagle"``, ...) or ``None`` (the pair's draft model).
        shape: children per node at each depth
            (:func:`~specdec_core.engine.tree.generate.parse_shape` rules).
        budget: most nodes per tree. prompt_len: the first ``prompt_len`` ids are the
            prompt, the rest already generated.

    Raises:
        PromptError, ConfigError, InputError: bad prompt, settings, shape or
        ``prompt_len``. A drafter without a distribution (prompt lookup) makes
        ``propose`` raise :class:`ConfigError`.
    """
    steps = partial(TreeSteps, shape=shape, budget=budget)
    return Session(pair, prompt, config, drafter, prompt_len, steps)


class TreeSteps:
    """The tree shape over its ``session``: the round in flight, the three steps of a
    tree round and the views only a tree has; ``shape`` and ``budget`` are checked with
    the session's settings (:meth:`check_settings`)."""

    unit = "tree"

    def __init__(self, session: Session[TreeSteps], shape: Sequence[int], budget: int) -> None:
        self.session = session
        self._asked = (shape, budget)
        self.shape: tuple[int, ...] = ()
        self.budget = 0
        self.pending: _Pending | None = None

    @cached_property
    def ctx(self) -> TreeContext:
        """The round functions' context, built once (a session's settings never change)."""
        s = self.session
        return TreeContext(s.target, s.drafter, s.processors, s.stop, s.prompt_len)

    def check_settings(self, config: SessionConfig) -> None:
        """Refuse settings a tree cannot run; parse the shape and the budget."""
        shape, budget = self._asked
        check_tree_settings(config)
        self.shape = parse_shape(",".join(str(k) for k in shape))
        self.budget = check_budget(budget)

    def make_drafter(self, pair: ModelPair, drafter: Drafter | str | None) -> Drafter:
        return resolve_drafter(pair, drafter)

    @property
    def drafts(self) -> list[int]:
        """None: a tree's nodes are not listed in the KV-state table before the commit."""
        return []

    def draft_stream(self) -> torch.Generator | None:
        """Each step makes its stream afresh: none is kept between steps."""
        return None

    # ------------------------------------------------------------------ steps
    def propose(self) -> TreeProposeTrace:
        """Phase 1: draft the round's tree. Raises PhaseError out of phase, ConfigError
        for a drafter without a distribution (the session is unchanged)."""
        s = self.session
        s._require("propose", "propose")
        kv_before = s.kv_state()
        shape = round_shape(
            self.shape, len(s.generated_ids), s.config, len(s.ids), s.pair.context_length
        )
        with s._atomic():
            started = time.perf_counter()
            before = s.target.forwards
            rng = round_stream(s.config.seed, s.round_index, "draft")
            tree, forwards = draft_tree(
                s.drafter, s.ids, shape, s.config.sampling, rng, self.budget, s.processors
            )
            s.processors.sync_to(s.ids)  # before verify: on the committed ids
            ms = (time.perf_counter() - started) * 1e3
        pending = self.pending = _Pending(shape, tree, s.target.forwards - before)
        view, mask = self._build_view(pending), build_mask_view(tree, s.ids, s.token)
        trace = TreeProposeTrace(
            s.round_index, shape, view, mask, forwards, ms, kv_before, s.kv_state()
        )
        pending.propose = trace
        return trace

    def verify(self) -> TreeVerifyTrace:
        """Phase 2: one target forward over the pending tokens and the whole tree, then
        the walk; decides what the commit appends. Raises PhaseError out of phase."""
        s = self.session
        pending = s._require("verify", "verify")
        proposed = pending.propose
        assert proposed is not None
        with s._atomic():
            started = time.perf_counter()
            logits, fed = tree_forward(s.target, s.ids, pending.tree)
            rng = round_stream(s.config.seed, s.round_index, "verify")
            verdict = walk(pending.tree, logits, s.config.sampling, rng, s.processors, s.ids)
            ms = (time.perf_counter() - started) * 1e3
            ran, drafted = pending.target_forwards + 1, proposed.draft_forwards
            record, reason = decide_round(
                self.ctx, pending.tree, verdict, s.ids, pending.shape, drafted, ran
            )
        pending.verdict, pending.record, pending.stop_reason = verdict, record, reason
        view = self._build_view(pending)
        # nothing changes the state between propose and verify: its after is verify's before
        trace = TreeVerifyTrace(s.round_index, view, ms, fed, proposed.kv_after, s.kv_state())
        pending.verify = trace
        return trace

    def commit(self) -> TreeCommitTrace:
        """Phase 3: append the committed path + the target's token, compact the target's
        cache and roll both caches back; the compaction as applied rides in the trace."""
        s = self.session
        pending = s._require("commit", "commit")
        record, proposed, verified = pending.record, pending.propose, pending.verify
        assert record is not None and proposed is not None and verified is not None
        plan = self.compaction()
        assert plan is not None
        s.ids, _ = apply_round(self.ctx, s.ids, record)
        done = CompactionView(plan.slots, plan.rows_before, s.target.kv_len, True)
        self.pending = None
        s.stop_reason = pending.stop_reason
        appended = tuple(s.token(t) for t in record.appended)
        trace = TreeCommitTrace(
            s.round_index,
            appended,
            record.kind,
            done,
            pending.stop_reason,
            verified.kv_after,  # the state verify left
            s.kv_state(),
        )
        s.history.append(TreeRoundTrace(s.round_index, proposed, verified, trace, record))
        s.round_index += 1
        return trace

    # ------------------------------------------------------------------ views
    @property
    def current_propose(self) -> TreeProposeTrace | None:
        """The pending round's propose record (its ``kv_before``: the state before it)."""
        return self.pending.propose if self.pending else None

    @property
    def current_verify(self) -> TreeVerifyTrace | None:
        """The pending round's verify record once verified (phase ``commit``)."""
        return self.pending.verify if self.pending else None

    def summary(self) -> TreeStats:
        """:func:`~specdec_core.engine.tree.records.summarize_tree` of the finished rounds."""
        return summarize_tree(self.session.records)

    def tree_view(self) -> TreeView | None:
        """The pending round's tree (phases ``verify``/``commit``), else ``None``: the
        frozen view its propose or verify record holds, the same object on every call."""
        pending = self.pending
        if pending is None:
            return None
        frozen = pending.verify or pending.propose
        return frozen.tree if frozen else None

    def _build_view(self, pending: _Pending) -> TreeView:
        s = self.session
        return build_tree_view(
            pending.tree,
            pending.shape,
            pending.verdict,
            pending.record,
            s.round_index,
            s.ids,
            s.token,
        )

    def attention_mask(self) -> MaskView | None:
        """The pending round's tree mask (phases ``verify``/``commit``), else ``None``."""
        proposed = self.pending.propose if self.pending else None
        return proposed.mask if proposed else None

    def compaction(self) -> CompactionView | None:
        """Phase ``commit``: the planned compaction of the target's cache (which rows the
        commit keeps, moves, drops); otherwise the last finished round's, or ``None``."""
        s, pending = self.session, self.pending
        if pending is None or pending.record is None:
            return s.history[-1].commit.compaction if s.history else None
        return plan_compaction(s.ids, s.prompt_len, pending.record, s.token)
