"""``SpeculativeSession``: the step machine a page drives.

One round (docs/ARCHITECTURE.md "One round, step by step"):

1. ``propose()``  — the drafter proposes ``y_1..y_γ`` serially, recording ``q_1..q_γ``.
2. ``edit_draft(i, token)`` (optional, repeatable) — a student replaces ``y_i``; its ``q_i``
   becomes one-hot (still lossless) and later drafts are re-proposed from the edit.
3. ``verify()``   — ONE target forward over the pending committed token(s) + ``y_1..y_γ``
   gives ``p_1..p_{γ+1}``; the rule in ``acceptance.py`` decides.
4. ``commit()``   — append the accepted prefix + correction/bonus token, discard the rest,
   crop both caches to the committed history (the appended token has no KV yet).

The round's pieces (γ, the verification forward, the commit that produces the round's
:class:`~specdec_core.records.RoundRecord`, rollback) live in ``rounds.py`` and are shared
with the fast path (``generate.py``). Each call returns a frozen trace (``trace.py``). A
call out of phase raises :class:`PhaseError`; any step that raises leaves the session as
it was.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch

from .drafters import Drafter, ModelDrafter
from .edits import build_checks, make_draft_agree, make_position_wrong, target_preview
from .errors import PhaseError
from .inputs import (  # noqa: F401 - re-exported: pages and tests import them from here
    MAX_GAMMA,
    InputError,
    PromptError,
    SessionConfig,
    TokenTextError,
    encode_prompt,
    prompt_ids,
    single_token_id,
)
from .kvcache import ModelCache, common_prefix_len, kv_state
from .models import ModelPair
from .records import RoundRecord
from .rounds import (
    commit_round,
    gamma_for_round,
    overlaps,
    rollback,
    stop_reason_after,
    verify_drafts,
)
from .sampling import one_hot
from .slices import dist_slice
from .trace import (
    CommitTrace,
    DistSlice,
    EditTrace,
    KVState,
    ProposeTrace,
    RoundTrace,
    TokenInfo,
    VerifyTrace,
)

Phase = Literal["propose", "verify", "commit", "finished"]


@dataclass
class _Pending:
    """The current round's in-flight state (tensors; never put in a trace)."""

    ids: list[int]
    q_rows: torch.Tensor  # [γ', V] float32 CPU
    gamma: int  # γ the drafter was asked for
    edited: set[int] = field(default_factory=set)
    propose: ProposeTrace | None = None
    edits: list[EditTrace] = field(default_factory=list)
    record: RoundRecord | None = None
    stop_reason: str | None = None
    verify: VerifyTrace | None = None


class SpeculativeSession:
    """Step-by-step speculative decoding over a shared, read-only :class:`ModelPair`.

    Owns one target ``DynamicCache`` (via :class:`ModelCache`), the drafter (with its own
    cache) and a CPU ``torch.Generator`` seeded from ``config.seed``.

    Every step either completes or raises and leaves the session as it was.

    Raises:
        PromptError: bad prompt (text or ids, :func:`inputs.prompt_ids`). ConfigError: bad
        settings.
    """

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[int],
        config: SessionConfig | None = None,
        drafter: Drafter | None = None,
    ) -> None:
        self.pair = pair
        self.config = (config or SessionConfig()).validate(pair.vocab_size)
        ids = prompt_ids(pair, prompt)
        self.ids: list[int] = ids
        self.prompt_len = len(ids)
        self.target = ModelCache(pair.target)
        self.drafter: Drafter = drafter or ModelDrafter(pair.draft)
        self.generator = torch.Generator().manual_seed(self.config.seed)
        self.round_index = 0
        self.stop_reason: str | None = None
        self.history: list[RoundTrace] = []
        self._pending: _Pending | None = None
        self._token_cache: dict[int, TokenInfo] = {}

    # ------------------------------------------------------------------ state
    @property
    def phase(self) -> Phase:
        if self._pending is None:
            return "finished" if self.stop_reason else "propose"
        return "commit" if self._pending.record is not None else "verify"

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

    def current_statuses(self) -> list[str] | None:
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
        info = self._token_cache.get(token_id)
        if info is None:
            tok = self.pair.tokenizer
            info = TokenInfo(token_id, tok.decode([token_id]), tok.convert_ids_to_tokens(token_id))
            self._token_cache[token_id] = info
        return info

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

    def _require(self, phase: Phase, action: str) -> _Pending | None:
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

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Run a step so that, if it raises, the session is as it was: the generator's
        state and both caches' lengths are restored (the step assigns its new state only
        after all of its work succeeded)."""
        generator_state = self.generator.get_state()
        target_len = self.target.kv_len
        draft_len = len(self.drafter.cached_ids() or [])
        try:
            yield
        except BaseException:
            self.generator.set_state(generator_state)
            self.target.crop(min(target_len, self.target.kv_len))
            self.drafter.rollback(min(draft_len, len(self.drafter.cached_ids() or [])))
            raise

    # ------------------------------------------------------------------ propose
    def propose(self) -> ProposeTrace:
        """Phase 1: draft up to γ tokens serially (a drafter may propose fewer, even none).

        Raises:
            PhaseError: not in phase ``propose``.
        """
        self._require("propose", "propose")
        kv_before = self.kv_state()
        gamma = self._gamma_now()
        with self._atomic():
            draft = self.drafter.propose(
                self.ids, gamma, self.config.sampling, self.config.draft_method, self.generator
            )
            ids = draft.ids.tolist()
            pending = _Pending(ids, draft.probs, gamma)
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
        ``repropose_after_edit`` later drafts are re-proposed from the edited prefix; the
        drafter may then propose fewer than before (prompt lookup), so the round may end up
        with fewer drafts.

        Raises:
            PhaseError: not after ``propose``. InputError: position or id out of range (the
            session is unchanged).
        """
        pending = self._require("verify", "edit a draft")
        assert pending is not None
        gamma = len(pending.ids)
        if (
            isinstance(position, bool)
            or not isinstance(position, int)
            or not 1 <= position <= gamma
        ):
            raise InputError(
                f"position must be between 1 and {gamma}, got {position!r}",
                "edit_position",
                gamma=gamma,
            )
        vocab = self.pair.vocab_size
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < vocab:
            raise InputError(
                f"token id must be between 0 and {vocab - 1}, got {token_id!r}",
                "edit_token_id",
                vocab=vocab,
            )
        old = pending.ids[position - 1]
        ids = pending.ids[: position - 1] + [token_id]
        rows = [pending.q_rows[: position - 1], one_hot(torch.tensor([token_id]), vocab)]
        edited = {i for i in pending.edited if i < position} | {position}
        rest = gamma - position
        forwards = 0
        reproposed = self.config.repropose_after_edit and rest > 0
        with self._atomic():
            if reproposed:
                draft = self.drafter.propose(
                    self.ids + ids, rest, self.config.sampling, self.config.draft_method,
                    self.generator,
                )  # fmt: skip
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

    def target_preview(self, top_n: int = 5) -> list[list[TokenInfo]]:
        """The target's top tokens at each drafted position (see :func:`edits.target_preview`)."""
        pending = self._require("verify", "preview the target")
        assert pending is not None
        return target_preview(self, pending.ids, top_n)

    def make_position_wrong(self, position: int) -> EditTrace:
        """Quick edit: ``y_position`` becomes the target's second choice there."""
        return make_position_wrong(self, position)

    def make_draft_agree(self) -> list[EditTrace]:
        """Quick edit: every draft that differs from the target's argmax is replaced."""
        return make_draft_agree(self)

    # ------------------------------------------------------------------ verify
    def verify(self) -> VerifyTrace:
        """Phase 3: one parallel target forward over the pending tokens and all drafts,
        then the rule (``acceptance.py``). The checks' statuses are final: the commit that
        follows is already decided (a stop on a committed draft makes later drafts
        ``cut``, :func:`records.round_statuses`).

        Raises:
            PhaseError: not after ``propose``.
        """
        pending = self._require("verify", "verify")
        assert pending is not None
        kv_before = self.kv_state()
        with self._atomic():
            started = time.perf_counter()
            p_rows, verdict, fed = verify_drafts(
                self.target, self.ids, pending.ids, pending.q_rows, self.config.sampling,
                self.generator,
            )  # fmt: skip
            verify_ms = (time.perf_counter() - started) * 1e3
            round_overlaps = overlaps(p_rows, pending.q_rows)
            record, stop_reason = commit_round(
                self.ids, self.prompt_len, pending.gamma, pending.ids, verdict, round_overlaps,
                self._stop,
            )  # fmt: skip
            checks = build_checks(
                pending.ids, pending.q_rows, p_rows, verdict, record, pending.edited,
                self.token, self._slice,
            )  # fmt: skip
            n, gamma = verdict.accepted, len(pending.ids)
            next_dist = (
                checks[n].dist
                if n < gamma
                else self._slice(p_rows[gamma], None, [verdict.next_token])
            )
            trace = VerifyTrace(
                round_index=self.round_index,
                greedy=self.config.sampling.greedy,
                checks=checks,
                accepted=n,
                next_token=self.token(verdict.next_token),
                kind=verdict.kind,
                next_dist=next_dist,
                verify_ms=verify_ms,
                target_forward_tokens=fed,
                kv_before=kv_before,
                kv_after=self.kv_state(list(record.statuses)),
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
        by_status = {s: [self.token(t) for t, st in zip(record.drafted, record.statuses,
                                                          strict=True) if st == s]
                     for s in ("rejected", "discarded", "cut")}  # fmt: skip
        self.ids = self.ids + list(record.appended)
        rolled_target, rolled_draft = rollback(self.target, self.drafter, self.ids)
        self._pending = None
        self.stop_reason = pending.stop_reason
        trace = CommitTrace(
            round_index=self.round_index,
            appended=tuple(self.token(t) for t in record.appended),
            kind=record.kind,
            discarded=tuple(by_status["rejected"] + by_status["discarded"]),
            cut=tuple(by_status["cut"]),
            stop_reason=pending.stop_reason,
            rolled_back_target=rolled_target,
            rolled_back_draft=rolled_draft,
            kv_before=kv_before,
            kv_after=self.kv_state(),
        )
        self.history.append(
            RoundTrace(
                self.round_index, pending.propose, tuple(pending.edits), pending.verify, trace,
                record,
            )
        )  # fmt: skip
        self.round_index += 1
        return trace

    def _stop(self, generated: list[int], total_len: int) -> str | None:
        return stop_reason_after(
            generated,
            total_len,
            self.pair.eos_token_id,
            self.config.max_new_tokens,
            self.pair.context_length,
            self.config.stop_strings,
            self.pair.tokenizer.decode,
        )

    # ------------------------------------------------------------------ helpers
    @property
    def records(self) -> tuple[RoundRecord, ...]:
        """One :class:`RoundRecord` per finished round (for :func:`records.summarize`)."""
        return tuple(r.record for r in self.history)

    def run_round(self) -> RoundTrace:
        """Propose, verify and commit in one call; returns the round's trace."""
        self.propose()
        self.verify()
        self.commit()
        return self.history[-1]

    def run(self, max_rounds: int | None = None) -> list[RoundTrace]:
        """Run rounds until a stop (or ``max_rounds``)."""
        rounds = []
        while self.phase == "propose" and (max_rounds is None or len(rounds) < max_rounds):
            rounds.append(self.run_round())
        return rounds

    def _draft_slices(self, ids: list[int], q_rows: torch.Tensor) -> tuple[DistSlice, ...]:
        return tuple(self._slice(None, q_rows[i], [t]) for i, t in enumerate(ids))

    def _slice(self, p: torch.Tensor | None, q: torch.Tensor | None, extra: list[int]) -> DistSlice:
        return dist_slice(p, q, extra, self.config.top_n, self.token)
