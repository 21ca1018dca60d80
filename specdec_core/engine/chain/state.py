"""The state a :class:`~specdec_core.engine.chain.session.SpeculativeSession` keeps between
steps (:class:`PendingRound`) and its read-only views (pending drafts, edits, records), kept
apart from the steps so ``engine/chain/session.py`` reads as the round does. What both
shapes share (prompt, caches, phase, atomic steps, drivers) is in ``engine/machine.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specdec_core.core.slices import dist_slice
from specdec_core.core.trace import DistSlice, TokenInfo
from specdec_core.core.words import CheckStatus, StopReason
from specdec_core.drafters import Drafter, ModelDrafter
from specdec_core.engine.chain.edits import accept_preview, target_top_ids
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.round import ChainContext
from specdec_core.engine.chain.trace import EditTrace, ProposeTrace, RoundTrace, VerifyTrace
from specdec_core.engine.machine import StepMachine
from specdec_core.engine.schedule import confidence_for, round_gamma
from specdec_core.rules.lossy import lossy_rule


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


class SessionState(StepMachine[PendingRound, RoundTrace]):
    """The chain's state between steps on top of the shared
    :class:`~specdec_core.engine.machine.StepMachine` (prompt, caches, phase, atomic steps,
    drivers): the pending round (:class:`PendingRound`) and its read-only views; the steps
    live in :class:`~specdec_core.engine.chain.session.SpeculativeSession`. Random draws:
    each round has a drafting and a verification stream of its own
    (:func:`specdec_core.engine.rounds.round_stream` of ``config.seed``, the round index and
    the stream's name); the pending round keeps its drafting stream (re-drafting after an
    edit continues it), ``verify`` makes the verification stream afresh.

    Raises:
        PromptError, ConfigError, InputError: see :class:`StepMachine`.
    """

    unit = "drafts"

    def _make_drafter(self, drafter: Drafter | None) -> Drafter:
        return drafter or ModelDrafter(self.pair.draft)

    def _kv_drafts(self) -> list[int]:
        return list(self._pending.ids) if self._pending else []

    # ------------------------------------------------------------------ views
    @property
    def current_edits(self) -> tuple[EditTrace, ...]:
        """The edits made to the pending round's drafts, in order (empty between rounds)."""
        return tuple(self._pending.edits) if self._pending else ()

    @property
    def current_draft_dists(self) -> tuple[DistSlice, ...]:
        """``q`` slices of the drafts now pending (after the latest propose or edit)."""
        if self._pending is None:
            return ()
        if self._pending.edits:
            return self._pending.edits[-1].draft_dists
        assert self._pending.propose is not None
        return self._pending.propose.draft_dists

    @property
    def current_propose(self) -> ProposeTrace | None:
        """The pending round's proposal trace (phases ``verify``/``commit``)."""
        return self._pending.propose if self._pending else None

    @property
    def current_gamma(self) -> int | None:
        """γ the drafter was asked for in the pending round (after shortening near
        ``max_new_tokens`` or the context end; 0: no room for a draft), else ``None``."""
        return self._pending.gamma if self._pending else None

    @property
    def edited_positions(self) -> set[int]:
        return set(self._pending.edited) if self._pending else set()

    @property
    def current_record(self) -> RoundRecord | None:
        """The pending round's record once verified (phase ``commit``), else ``None``."""
        return self._pending.record if self._pending else None

    @property
    def current_verify(self) -> VerifyTrace | None:
        """The verification of the pending round (phase ``commit``), else ``None``."""
        return self._pending.verify if self._pending else None

    def current_statuses(self) -> list[CheckStatus] | None:
        """Per-draft status for the KV table after verify (accepted / rejected /
        discarded / cut), else ``None``."""
        if self._pending is None or self._pending.record is None:
            return None
        return list(self._pending.record.statuses)

    @property
    def drafts(self) -> list[int]:
        """This round's drafted ids (empty outside the verify/commit phases)."""
        return list(self._pending.ids) if self._pending else []

    def _context(self) -> ChainContext:
        """The round functions' context (``engine/chain/round.py``) for this session."""
        c = self.config
        return ChainContext(
            self.target,
            self.drafter,
            c.sampling,
            self.processors,
            c.draft_method,
            confidence_for(c),
            lossy_rule(c),
            self._stop,
            self.prompt_len,
            c.verification,
        )

    def _gamma_now(self) -> int:
        """γ for the next round: the γ schedule (``engine/schedule.py``) of the finished
        rounds' accepted counts, cut near ``max_new_tokens`` or the context end."""
        return round_gamma(
            self.config,
            self.drafter,
            (r.record.accepted for r in self.history),
            now=(len(self.generated_ids), len(self.ids), self.pair.context_length),
        )

    def rng_state(self) -> list[int]:
        """The state of the random stream the session keeps between steps (the pending
        round's drafting stream, as ``torch.Generator.get_state()`` bytes; empty between
        rounds). The verification stream is made afresh inside ``verify``."""
        return self._pending.draft_rng.get_state().tolist() if self._pending else []

    def _draft_slices(self, ids: list[int], q_rows: torch.Tensor) -> tuple[DistSlice, ...]:
        return tuple(self._slice(None, q_rows[i], [t]) for i, t in enumerate(ids))

    def _slice(self, p: torch.Tensor | None, q: torch.Tensor | None, extra: list[int]) -> DistSlice:
        return dist_slice(p, q, extra, self.config.top_n, self.token)

    def _drafts_in(self, record: RoundRecord, *statuses: str) -> tuple[TokenInfo, ...]:
        """The drafted tokens of ``record`` whose status is one of ``statuses``."""
        pairs = zip(record.drafted, record.statuses, strict=True)
        return tuple(self.token(t) for t, st in pairs if st in statuses)

    # ------------------------------------------------------------------ previews
    def target_preview(self, top_n: int = 5) -> list[list[TokenInfo]]:
        """The target's top ``top_n`` tokens at each drafted position, before verification,
        after the processors (:func:`~specdec_core.engine.chain.edits.target_top_ids`;
        caches untouched, the processors back on the committed ids).

        Raises:
            PhaseError: not after ``propose``.
        """
        pending = self._require("verify", "preview the target")
        assert pending is not None
        rows = target_top_ids(self.pair, self.ids, pending.ids, top_n, self.processors)
        return [[self.token(t) for t in row] for row in rows]

    def accept_preview(self) -> list[float]:
        """Exact ``a_i`` at each drafted position before verification
        (:func:`~specdec_core.engine.chain.edits.accept_preview`).

        Raises:
            PhaseError: not after ``propose``.
        """
        pending = self._require("verify", "preview the acceptance probabilities")
        assert pending is not None
        return accept_preview(
            self.pair, self.ids, pending.ids, pending.q_rows, self.config.sampling, self.processors
        )
