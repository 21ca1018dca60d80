"""``TreeSession``: the step machine of a *tree* round, for the step-through page — the
tree counterpart of :class:`~specdec_core.engine.chain.session.SpeculativeSession`.

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
``core/processors.py``) follows the round like the caches, and every :meth:`kv_state`
shows it: between rounds and before verify it stands on the committed ids (``propose``
processes each node's draft row on that node's path, then syncs it back); after verify it
stands on the committed ids + the path the walk accepted (each target row it read was
processed on its node's path; the correction/bonus token is not included yet); the
commit brings it to the new committed ids with the caches. :class:`TreeRoundTrace` keeps
the three states (``kv_before``, ``kv_verified``, ``kv_after``).

Any step that raises leaves the session as it was; a step out of phase raises
:class:`PhaseError`. Views for the page (frozen, plain values + numpy): :meth:`tree_view`,
:meth:`attention_mask`, :meth:`compaction`, :meth:`kv_state`, ``history``, ``records``.

Files a reader opens besides this one: ``engine/machine.py`` (what chain and tree share:
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

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import KVState
from specdec_core.core.words import StopReason
from specdec_core.drafters import Drafter
from specdec_core.engine.machine import StepMachine
from specdec_core.engine.rounds import round_stream
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
    TreeVerdict,
    apply_round,
    decide_round,
    draft_tree,
    tree_forward,
    walk,
)
from specdec_core.engine.tree.views import (
    CompactionView,
    MaskView,
    TreeRoundTrace,
    TreeView,
    build_mask_view,
    build_tree_view,
    plan_compaction,
)


@dataclass
class _Pending:
    shape: tuple[int, ...]
    tree: DraftTree
    draft_forwards: int
    draft_ms: float
    kv_before: KVState
    target_forwards: int = 0  # run while proposing (an EAGLE drafter's first-round prefill)
    verdict: TreeVerdict | None = None
    record: TreeRoundRecord | None = None
    stop_reason: StopReason | None = None
    verify_ms: float = 0.0
    kv_verified: KVState | None = None


class TreeSession(StepMachine[_Pending, TreeRoundTrace]):
    """Step-by-step tree-speculative decoding over a shared, read-only :class:`ModelPair`.

    Args:
        drafter: a :class:`Drafter`, a name for
            :func:`~specdec_core.drafters.registry.make_named_drafter` (``"model"``,
            ``"eagle"``, ...) or ``None`` (the pair's draft model).
        shape: children per node at each depth
            (:func:`~specdec_core.engine.tree.generate.parse_shape` rules).
        budget: most nodes per tree. prompt_len: as for ``SpeculativeSession`` (the
            first ``prompt_len`` ids are the prompt, the rest already generated).

    Raises:
        PromptError, ConfigError, InputError: bad prompt, settings, shape or
        ``prompt_len``. A drafter without a distribution (prompt lookup) makes
        :meth:`propose` raise :class:`ConfigError`.
    """

    unit = "tree"

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[int],
        config: SessionConfig | None = None,
        drafter: Drafter | str | None = None,
        shape: Sequence[int] = (2, 2, 1, 1),
        budget: int = 12,
        prompt_len: int | None = None,
    ) -> None:
        self._settings = (shape, budget)
        super().__init__(pair, prompt, config, drafter, prompt_len)

    def _check_settings(self) -> None:
        shape, budget = self._settings
        check_tree_settings(self.config)
        self.shape = parse_shape(",".join(str(k) for k in shape))
        self.budget = check_budget(budget)

    def _make_drafter(self, drafter: Drafter | str | None) -> Drafter:
        return resolve_drafter(self.pair, drafter)

    # ------------------------------------------------------------------ steps
    def propose(self) -> TreeView:
        """Phase 1: draft the round's tree. Raises PhaseError out of phase, ConfigError
        for a drafter without a distribution (the session is unchanged)."""
        self._require("propose", "propose")
        kv_before = self.kv_state()
        shape = round_shape(
            self.shape,
            len(self.generated_ids),
            self.config,
            len(self.ids),
            self.pair.context_length,
        )
        with self._atomic():
            started = time.perf_counter()
            before = self.target.forwards
            rng = round_stream(self.config.seed, self.round_index, "draft")
            tree, forwards = draft_tree(
                self.drafter,
                self.ids,
                shape,
                self.config.sampling,
                rng,
                self.budget,
                self.processors,
            )
            self.processors.sync_to(self.ids)  # before verify: on the committed ids
            ms = (time.perf_counter() - started) * 1e3
        self._pending = _Pending(
            shape, tree, forwards, ms, kv_before, self.target.forwards - before
        )
        view = self.tree_view()
        assert view is not None
        return view

    def verify(self) -> TreeView:
        """Phase 2: one target forward over the pending tokens and the whole tree, then
        the walk; decides what the commit appends. Raises PhaseError out of phase."""
        pending = self._require("verify", "verify")
        assert pending is not None
        with self._atomic():
            started = time.perf_counter()
            logits = tree_forward(self.target, self.ids, pending.tree)
            rng = round_stream(self.config.seed, self.round_index, "verify")
            verdict = walk(
                pending.tree, logits, self.config.sampling, rng, self.processors, self.ids
            )
            ms = (time.perf_counter() - started) * 1e3
            record, reason = decide_round(
                pending.tree,
                verdict,
                self.ids,
                self.prompt_len,
                self._stop,
                pending.shape,
                (pending.draft_forwards, pending.target_forwards + 1),
            )
        pending.verdict, pending.record, pending.stop_reason = verdict, record, reason
        pending.verify_ms = ms
        pending.kv_verified = self.kv_state()
        view = self.tree_view()
        assert view is not None
        return view

    def commit(self) -> CompactionView:
        """Phase 3: append the committed path + the target's token, compact the target's
        cache and roll both caches back. Returns the compaction as applied."""
        pending = self._require("commit", "commit")
        assert pending is not None and pending.record is not None
        tree, mask, plan = self.tree_view(), self.attention_mask(), self.compaction()
        assert tree is not None and mask is not None and plan is not None
        self.ids = apply_round(self.target, self.drafter, self.ids, pending.record, self.processors)
        done = CompactionView(plan.slots, plan.rows_before, self.target.kv_len, True)
        self._pending = None
        self.stop_reason = pending.stop_reason
        self.history.append(
            TreeRoundTrace(
                self.round_index,
                tree,
                mask,
                done,
                pending.record,
                pending.draft_ms,
                pending.verify_ms,
                pending.stop_reason,
                pending.kv_before,
                self.kv_state(),
                pending.kv_verified,
            )
        )
        self.round_index += 1
        return done

    # ------------------------------------------------------------------ views
    @property
    def current_record(self) -> TreeRoundRecord | None:
        """The pending round's record once verified (phase ``commit``)."""
        return self._pending.record if self._pending else None

    @property
    def current_stop_reason(self) -> StopReason | None:
        """The stop that cuts the pending round's commit short (phase ``commit``), else
        ``None``."""
        return self._pending.stop_reason if self._pending else None

    def summary(self) -> TreeStats:
        """:func:`~specdec_core.engine.tree.records.summarize_tree` of the finished rounds."""
        return summarize_tree(self.records)

    def tree_view(self) -> TreeView | None:
        """The pending round's tree (phases ``verify``/``commit``), else ``None``."""
        pending = self._pending
        if pending is None:
            return None
        return build_tree_view(
            pending.tree,
            pending.shape,
            pending.verdict,
            pending.record,
            self.round_index,
            self.ids,
            self.token,
        )

    def attention_mask(self) -> MaskView | None:
        """The pending round's tree mask (phases ``verify``/``commit``), else ``None``."""
        if self._pending is None:
            return None
        return build_mask_view(self._pending.tree, self.ids, self.token)

    def compaction(self) -> CompactionView | None:
        """Phase ``commit``: the planned compaction of the target's cache (which rows the
        commit keeps, moves, drops); otherwise the last finished round's, or ``None``."""
        pending = self._pending
        if pending is None or pending.record is None:
            return self.history[-1].compaction if self.history else None
        return plan_compaction(self.ids, self.prompt_len, pending.record, self.token)
