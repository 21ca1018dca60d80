"""``TreeSession``: the step machine of a *tree* round, for the step-through page — the
tree counterpart of :class:`~specdec_core.engine.chain.session.SpeculativeSession` (``tree.py`` has
the round's pieces; :func:`tree_generate.generate_tree` runs the same pieces without
views).

1. ``propose()`` — the drafter expands a token tree (``shape`` = children per node at
   each depth, at most ``budget`` nodes; one ``tree_logits`` call per expanded node,
   counting the draft forwards that ran).
2. ``verify()``  — ONE target forward over the pending committed token(s) and every
   node, with the tree attention mask; the walk from the root decides the accepted
   path and the correction/bonus token. Every node gets its state (``tree_records.py``).
3. ``commit()``  — append the committed path + the target's token, move the path's KV
   rows into place after the committed prefix and drop the rest (compaction), roll both
   caches back to the committed history.

Any step that raises leaves the session as it was; a step out of phase raises
:class:`PhaseError`. Views for the page (frozen, plain values + numpy): :meth:`tree_view`,
:meth:`attention_mask`, :meth:`compaction`, :meth:`kv_state`, ``history``, ``records``.

The view dataclasses and the pure functions that build them live in ``tree_views.py``;
the round driver's shared pieces in ``tree_generate.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.inputs import SessionConfig, prompt_ids
from specdec_core.core.kvcache import ModelCache, kv_state
from specdec_core.core.models import ModelPair
from specdec_core.core.trace import KVState, token_lookup
from specdec_core.core.words import Phase, StopReason
from specdec_core.drafters import Drafter
from specdec_core.engine.rounds import round_stream, stop_rule
from specdec_core.engine.tree.generate import (
    apply_round,
    check_budget,
    check_tree_settings,
    decide_round,
    resolve_drafter,
    round_shape,
)
from specdec_core.engine.tree.records import TreeRoundRecord, TreeStats, summarize_tree
from specdec_core.engine.tree.steps import (
    DraftTree,
    TreeVerdict,
    draft_tree,
    parse_shape,
    tree_forward,
    truncate_cache,
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


class TreeSession:
    """Step-by-step tree-speculative decoding over a shared, read-only :class:`ModelPair`.

    Args:
        drafter: a :class:`Drafter`, a name for :func:`drafters.make_named_drafter`
            (``"model"``, ``"eagle"``, ...) or ``None`` (the pair's draft model).
        shape: children per node at each depth (``tree.parse_shape`` rules).
        budget: most nodes per tree. prompt_len: as for ``SpeculativeSession`` (the
            first ``prompt_len`` ids are the prompt, the rest already generated).

    Raises:
        PromptError, ConfigError, InputError: bad prompt, settings, shape or
        ``prompt_len``. A drafter without a distribution (prompt lookup) makes
        :meth:`propose` raise :class:`ConfigError`.
    """

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
        self.pair = pair
        self.config = (config or SessionConfig()).validate(pair.vocab_size)
        check_tree_settings(self.config)
        self.shape = parse_shape(",".join(str(k) for k in shape))
        self.budget = check_budget(budget)
        ids = prompt_ids(pair, prompt)
        prompt_len = len(ids) if prompt_len is None else prompt_len
        if isinstance(prompt_len, bool) or not isinstance(prompt_len, int):
            raise InputError(f"prompt length must be a whole number, got {prompt_len!r}")
        if not 1 <= prompt_len <= len(ids):
            raise InputError(f"prompt length must be 1..{len(ids)}, got {prompt_len}")
        self.ids: list[int] = ids
        self.prompt_len = prompt_len
        self.target = ModelCache(pair.target)
        self.drafter: Drafter = resolve_drafter(pair, drafter)
        self.drafter.attach(self.target)
        self.round_index = 0
        self.stop_reason: StopReason | None = None
        self.history: list[TreeRoundTrace] = []
        self._pending: _Pending | None = None
        self._stop = stop_rule(pair, self.config)
        self.token = token_lookup(pair.tokenizer)

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
                self.drafter, self.ids, shape, self.config.sampling, rng, self.budget
            )
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
            verdict = walk(pending.tree, logits, self.config.sampling, rng)
            ms = (time.perf_counter() - started) * 1e3
            record, reason = decide_round(
                pending.tree,
                verdict,
                self.ids,
                self.prompt_len,
                self._stop,
                pending.shape,
                pending.draft_forwards,
                pending.target_forwards + 1,
            )
        pending.verdict, pending.record, pending.stop_reason = verdict, record, reason
        pending.verify_ms = ms
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
        self.ids = apply_round(self.target, self.drafter, self.ids, pending.record)
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
            )
        )
        self.round_index += 1
        return done

    def run_round(self) -> TreeRoundTrace:
        """Propose, verify and commit in one call."""
        self.propose()
        self.verify()
        self.commit()
        return self.history[-1]

    def run(self, max_rounds: int | None = None) -> list[TreeRoundTrace]:
        """Rounds until a stop (or ``max_rounds``)."""
        out = []
        while self.phase == "propose" and (max_rounds is None or len(out) < max_rounds):
            out.append(self.run_round())
        return out

    # ------------------------------------------------------------------ views
    @property
    def phase(self) -> Phase:
        if self._pending is None:
            return "finished" if self.stop_reason else "propose"
        return "commit" if self._pending.record is not None else "verify"

    @property
    def generated_ids(self) -> list[int]:
        return self.ids[self.prompt_len :]

    @property
    def text(self) -> str:
        """The generated text (prompt excluded)."""
        return self.pair.tokenizer.decode(self.generated_ids)

    @property
    def records(self) -> tuple[TreeRoundRecord, ...]:
        return tuple(r.record for r in self.history)

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
        """:func:`tree_records.summarize_tree` of the finished rounds."""
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

    def kv_state(self) -> KVState:
        """The KV-state table of the committed tokens (both caches; the chain's format).
        During phase ``commit`` the target's cache also holds one row per node: see
        :meth:`compaction`."""
        tokens = [self.token(t) for t in self.ids]
        return kv_state(
            tokens, self.prompt_len, len(self.ids), self.target, self.drafter.cached_ids()
        )

    # ------------------------------------------------------------------ helpers
    def _require(self, phase: Phase, action: str) -> _Pending | None:
        if self.phase != phase:
            hint = {
                "propose": "propose first",
                "verify": "verify the tree first",
                "commit": "commit the verified round first",
                "finished": "generation has finished (reset to start again)",
            }[self.phase]
            raise PhaseError(f"cannot {action} in phase {self.phase!r}: {hint}")
        return self._pending

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """If the step raises: the target's cache (tree rows included) and the drafter's
        cache are restored. No random state needs restoring: each step makes its round's
        stream afresh (:func:`rounds.round_stream`), so a step run again draws the same."""
        target_len = self.target.kv_len
        draft_len = len(self.drafter.cached_ids() or [])
        try:
            yield
        except BaseException:
            truncate_cache(self.target, target_len)
            self.drafter.rollback(min(draft_len, len(self.drafter.cached_ids() or [])))
            raise
