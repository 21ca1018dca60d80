"""The state a :class:`~specdec_core.engine.chain.session.SpeculativeSession` keeps between
steps, and its read-only views (phase, pending drafts, KV table, records), kept apart from the steps
themselves so ``session.py`` reads as the round does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.inputs import SessionConfig, prompt_ids
from specdec_core.core.kvcache import ModelCache, kv_state
from specdec_core.core.models import ModelPair
from specdec_core.core.records import RoundRecord
from specdec_core.core.slices import dist_slice
from specdec_core.core.trace import (
    DistSlice,
    EditTrace,
    KVState,
    ProposeTrace,
    RoundTrace,
    TokenInfo,
    VerifyTrace,
    token_lookup,
)
from specdec_core.core.words import CheckStatus, Phase, StopReason
from specdec_core.drafters import Drafter, ModelDrafter
from specdec_core.engine.rounds import gamma_for_round, stop_rule


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


class SessionState:
    """Owns one target ``DynamicCache`` (via :class:`ModelCache`), the drafter (with its own
    cache), the committed ids and the finished rounds; the steps live in
    :class:`~specdec_core.engine.chain.session.SpeculativeSession`. Random draws: each round has a
    drafting and a verification stream of its own (:func:`rounds.round_stream` of
    ``config.seed``, the round index and the stream's name); the pending round keeps its
    drafting stream (re-drafting after an edit continues it), ``verify`` makes the
    verification stream afresh.

    ``prompt_len`` continues a generation: the first ``prompt_len`` ids of ``prompt`` are
    the prompt and the rest count as already generated (towards ``max_new_tokens``, and
    in ``generated_ids``); default: all of them are the prompt.

    Raises:
        PromptError: bad prompt (text or ids, :func:`inputs.prompt_ids`). ConfigError: bad
        settings. InputError: ``prompt_len`` outside ``1..len(ids)``.
    """

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[int],
        config: SessionConfig | None = None,
        drafter: Drafter | None = None,
        prompt_len: int | None = None,
    ) -> None:
        self.pair = pair
        self.config = (config or SessionConfig()).validate(pair.vocab_size)
        ids = prompt_ids(pair, prompt)
        if prompt_len is None:
            prompt_len = len(ids)
        if isinstance(prompt_len, bool) or not isinstance(prompt_len, int):
            raise InputError(f"prompt length must be a whole number, got {prompt_len!r}")
        if not 1 <= prompt_len <= len(ids):
            raise InputError(f"prompt length must be 1..{len(ids)}, got {prompt_len}")
        self.ids: list[int] = ids
        self.prompt_len = prompt_len
        self.target = ModelCache(pair.target)
        self.drafter: Drafter = drafter or ModelDrafter(pair.draft)
        self.drafter.attach(self.target)
        self.round_index = 0
        self.stop_reason: StopReason | None = None
        self.history: list[RoundTrace] = []
        self._pending: PendingRound | None = None
        self._token = token_lookup(pair.tokenizer)

    # ------------------------------------------------------------------ state
    @property
    def phase(self) -> Phase:
        if self._pending is None:
            return "finished" if self.stop_reason else "propose"
        return "commit" if self._pending.record is not None else "verify"

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

    @property
    def generated_ids(self) -> list[int]:
        return self.ids[self.prompt_len :]

    @property
    def text(self) -> str:
        return self.pair.tokenizer.decode(self.generated_ids)

    def token(self, token_id: int) -> TokenInfo:
        """The :class:`TokenInfo` of ``token_id`` (memoised per session)."""
        return self._token(token_id)

    def kv_state(self, tentative_states: list[str] | None = None) -> KVState:
        """The KV-state table now: committed tokens, then this round's drafts (if any)."""
        drafts = self._pending.ids if self._pending else []
        tokens = [self.token(t) for t in self.ids + drafts]
        return kv_state(
            tokens,
            self.prompt_len,
            len(self.ids),
            self.target,
            self.drafter.cached_ids(),
            tentative_states,
        )

    def _require(self, phase: Phase, action: str) -> PendingRound | None:
        if self.phase != phase:
            hint = {
                "propose": "propose first",
                "verify": "verify the drafts first",
                "commit": "commit the verified round first",
                "finished": "generation has finished (reset to start again)",
            }[self.phase]
            raise PhaseError(f"cannot {action} in phase {self.phase!r}: {hint}")
        return self._pending

    def _gamma_now(self) -> int:
        return gamma_for_round(
            self.config.gamma,
            len(self.generated_ids),
            self.config.max_new_tokens,
            len(self.ids),
            self.pair.context_length,
        )

    def rng_state(self) -> list[int]:
        """The state of the random stream the session keeps between steps (the pending
        round's drafting stream, as ``torch.Generator.get_state()`` bytes; empty between
        rounds). The verification stream is made afresh inside ``verify``."""
        return self._pending.draft_rng.get_state().tolist() if self._pending else []

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Run a step so that, if it raises, the session is as it was: the pending round's
        drafting stream and both caches' lengths are restored (the step assigns its new
        state only after all of its work succeeded; a stream the step made afresh is
        simply dropped)."""
        rng = self._pending.draft_rng if self._pending else None
        rng_state = rng.get_state() if rng is not None else None
        target_len = self.target.kv_len
        draft_len = len(self.drafter.cached_ids() or [])
        try:
            yield
        except BaseException:
            if rng is not None and rng_state is not None:
                rng.set_state(rng_state)
            self.target.crop(min(target_len, self.target.kv_len))
            self.drafter.rollback(min(draft_len, len(self.drafter.cached_ids() or [])))
            raise

    def _stop(self, generated: list[int], total_len: int) -> str | None:
        """Why generation stops after ``generated`` (``rounds.stop_rule`` of the session's
        pair and settings, looked up at each call)."""
        return stop_rule(self.pair, self.config)(generated, total_len)

    @property
    def records(self) -> tuple[RoundRecord, ...]:
        """One :class:`RoundRecord` per finished round (for :func:`records.summarize`)."""
        return tuple(r.record for r in self.history)

    def _draft_slices(self, ids: list[int], q_rows: torch.Tensor) -> tuple[DistSlice, ...]:
        return tuple(self._slice(None, q_rows[i], [t]) for i, t in enumerate(ids))

    def _slice(self, p: torch.Tensor | None, q: torch.Tensor | None, extra: list[int]) -> DistSlice:
        return dist_slice(p, q, extra, self.config.top_n, self.token)
