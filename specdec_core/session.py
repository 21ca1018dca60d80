"""``SpeculativeSession``: the step machine a page drives.

One round (DESIGN.md "One round, precisely"):

1. ``propose()``  — the drafter proposes ``y_1..y_γ`` serially, recording ``q_1..q_γ``.
2. ``edit_draft(i, token)`` (optional, repeatable) — a student replaces ``y_i``; its ``q_i``
   becomes one-hot (still lossless) and later drafts are re-proposed from the edit.
3. ``verify()``   — ONE target forward over the pending committed token(s) + ``y_1..y_γ``
   gives ``p_1..p_{γ+1}``; the rule in ``acceptance.py`` decides.
4. ``commit()``   — append the accepted prefix + correction/bonus token, discard the rest,
   crop both caches to the committed history (the appended token has no KV yet).

Each call returns a frozen trace (``trace.py``). A call out of phase raises
:class:`PhaseError` and changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from .acceptance import Verdict
from .drafters import Drafter, ModelDrafter
from .errors import PhaseError  # noqa: F401 - re-exported
from .inputs import (  # noqa: F401 - re-exported: pages and tests import them from here
    MAX_GAMMA,
    InputError,
    PromptError,
    SessionConfig,
    TokenTextError,
    encode_prompt,
    single_token_id,
)
from .kvcache import ModelCache, common_prefix_len, kv_state
from .models import ModelPair
from .rounds import commit_tokens, gamma_for_round, rollback, stop_reason_after, verify_drafts
from .sampling import one_hot
from .slices import dist_slice
from .trace import (
    CommitTrace,
    DistSlice,
    EditTrace,
    KVState,
    PositionCheck,
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
    q_rows: torch.Tensor  # [γ, V] float32 CPU
    edited: set[int] = field(default_factory=set)
    propose: ProposeTrace | None = None
    edits: list[EditTrace] = field(default_factory=list)
    p_rows: torch.Tensor | None = None  # [γ+1, V]
    verdict: Verdict | None = None
    verify: VerifyTrace | None = None


class SpeculativeSession:
    """Step-by-step speculative decoding over a shared, read-only :class:`ModelPair`.

    Owns one target ``DynamicCache`` (via :class:`ModelCache`), the drafter (with its own
    cache) and a CPU ``torch.Generator`` seeded from ``config.seed``.

    Raises:
        PromptError: bad prompt. ConfigError: bad settings.
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
        ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
        if not ids or len(ids) >= pair.context_length:
            raise PromptError(f"prompt must have 1..{pair.context_length - 1} tokens")
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
        return "commit" if self._pending.verdict is not None else "verify"

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
    def current_verify(self) -> VerifyTrace | None:
        """The verification of the pending round (phase ``commit``), else ``None``."""
        return self._pending.verify if self._pending else None

    def current_statuses(self) -> list[str] | None:
        """Per-draft status for the KV table: after verify, accepted/rejected/discarded."""
        if self._pending is None or self._pending.verdict is None:
            return None
        return self._statuses(self._pending.verdict, len(self._pending.ids))

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

    # ------------------------------------------------------------------ propose
    def propose(self) -> ProposeTrace:
        """Phase 1: draft γ tokens serially. Returns :class:`ProposeTrace`."""
        self._require("propose", "propose")
        kv_before = self.kv_state()
        draft = self.drafter.propose(
            self.ids,
            self._gamma_now(),
            self.config.sampling,
            self.config.draft_method,
            self.generator,
        )
        pending = _Pending(draft.ids.tolist(), draft.probs)
        self._pending = pending
        trace = ProposeTrace(
            round_index=self.round_index,
            gamma=len(pending.ids),
            drafted=tuple(self.token(t) for t in pending.ids),
            draft_dists=tuple(
                self._slice(None, pending.q_rows[i], [pending.ids[i]])
                for i in range(len(pending.ids))
            ),
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
        ``repropose_after_edit`` later drafts are re-proposed from the edited prefix.

        Raises:
            PhaseError: not after ``propose``. ValueError: position or id out of range.
        """
        pending = self._require("verify", "edit a draft")
        assert pending is not None
        gamma = len(pending.ids)
        if not isinstance(position, int) or not 1 <= position <= gamma:
            raise ValueError(f"position must be between 1 and {gamma}, got {position!r}")
        if not isinstance(token_id, int) or not 0 <= token_id < self.pair.vocab_size:
            raise ValueError(
                f"token id must be between 0 and {self.pair.vocab_size - 1}, got {token_id!r}"
            )
        old = pending.ids[position - 1]
        ids = pending.ids[: position - 1] + [token_id]
        rows = [
            pending.q_rows[: position - 1],
            one_hot(torch.tensor([token_id]), self.pair.vocab_size),
        ]
        edited = {i for i in pending.edited if i < position} | {position}
        rest = gamma - position
        forwards = 0
        if self.config.repropose_after_edit and rest > 0:
            draft = self.drafter.propose(
                self.ids + ids, rest, self.config.sampling, self.config.draft_method, self.generator
            )
            ids += draft.ids.tolist()
            rows.append(draft.probs)
            forwards = draft.forwards
        else:
            ids += pending.ids[position:]
            rows.append(pending.q_rows[position:])
            edited |= {i for i in pending.edited if i > position}
            keep = common_prefix_len(self.drafter.cached_ids() or [], self.ids + ids)
            self.drafter.rollback(keep)
        pending.ids, pending.q_rows, pending.edited = ids, torch.cat(rows), edited
        trace = EditTrace(
            round_index=self.round_index,
            position=position,
            old_token=self.token(old),
            new_token=self.token(token_id),
            drafted=tuple(self.token(t) for t in ids),
            edited_positions=tuple(sorted(edited)),
            reproposed=self.config.repropose_after_edit and rest > 0,
            draft_forwards=forwards,
            draft_dists=tuple(self._slice(None, pending.q_rows[i], [ids[i]]) for i in range(gamma)),
            kv_after=self.kv_state(),
        )
        pending.edits.append(trace)
        return trace

    @torch.inference_mode()
    def target_preview(self, top_n: int = 5) -> list[list[TokenInfo]]:
        """The target's top tokens at each drafted position 1..γ given the current drafts,
        *before* verification (for the edit controls), from a cache-free forward over
        ``committed + drafts``; the session's caches are not touched.

        Returns:
            ``γ`` lists of ``top_n`` :class:`TokenInfo`, most likely first (index 0 is the
            greedy choice ``argmax p_i`` under the session's sampling settings).
        """
        pending = self._require("verify", "preview the target")
        assert pending is not None
        gamma = len(pending.ids)
        if gamma == 0:
            return []
        ids = torch.tensor([self.ids + pending.ids], device=self.pair.device)
        logits = self.pair.target(input_ids=ids).logits[0, -(gamma + 1) : -1].float()
        top = torch.topk(logits, min(top_n, logits.shape[-1]), dim=-1).indices.tolist()
        return [[self.token(t) for t in row] for row in top]

    def make_position_wrong(self, position: int) -> EditTrace:
        """Quick edit: replace ``y_position`` by the target's second choice there, a
        plausible token that greedy verification rejects."""
        preview = self.target_preview(top_n=2)
        if not 1 <= position <= len(preview):
            raise ValueError(f"position must be between 1 and {len(preview)}, got {position!r}")
        return self.edit_draft(position, preview[position - 1][1].id)

    def make_draft_agree(self) -> list[EditTrace]:
        """Quick edit: replace each draft that differs from the target's argmax (first
        mismatch first, re-checking after each edit) so that greedy verification accepts
        all γ. At most γ edits, each one cache-free target forward."""
        edits = []
        for _ in range(len(self.drafts)):
            preview = self.target_preview(top_n=1)
            mismatch = [i for i, row in enumerate(preview) if row[0].id != self.drafts[i]]
            if not mismatch:
                break
            k = mismatch[0]
            edits.append(self.edit_draft(k + 1, preview[k][0].id))
        return edits

    # ------------------------------------------------------------------ verify
    def verify(self) -> VerifyTrace:
        """Phase 3: one parallel target forward over the pending tokens and all drafts."""
        pending = self._require("verify", "verify")
        assert pending is not None
        kv_before = self.kv_state()
        started = time.perf_counter()
        p_rows, verdict, fed = verify_drafts(
            self.target, self.ids, pending.ids, pending.q_rows, self.config.sampling, self.generator
        )
        gamma = len(pending.ids)
        verify_ms = (time.perf_counter() - started) * 1e3
        pending.p_rows, pending.verdict = p_rows, verdict
        statuses = self._statuses(verdict, gamma)
        target_argmax = p_rows.argmax(dim=-1).tolist()
        checks = []
        for i in range(gamma):
            y = pending.ids[i]
            extra = [y] + ([verdict.next_token] if i == verdict.accepted else [])
            p_i, q_i = p_rows[i], pending.q_rows[i]
            checks.append(
                PositionCheck(
                    position=i + 1,
                    token=self.token(y),
                    p=float(p_i[y]),
                    q=float(q_i[y]),
                    accept_prob=verdict.accept_probs[i],
                    u=verdict.u[i] if i < len(verdict.u) else None,
                    status=statuses[i],
                    target_argmax=self.token(target_argmax[i]),
                    edited=(i + 1) in pending.edited,
                    acceptance_total=float(torch.minimum(p_i, q_i).sum()),
                    dist=self._slice(p_i, q_i, extra),
                )
            )
        n = verdict.accepted
        next_dist = (
            checks[n].dist if n < gamma else self._slice(p_rows[gamma], None, [verdict.next_token])
        )
        trace = VerifyTrace(
            round_index=self.round_index,
            greedy=self.config.sampling.greedy,
            checks=tuple(checks),
            accepted=n,
            next_token=self.token(verdict.next_token),
            kind=verdict.kind,
            next_dist=next_dist,
            verify_ms=verify_ms,
            target_forward_tokens=fed,
            kv_before=kv_before,
            kv_after=self.kv_state(statuses),
        )
        pending.verify = trace
        return trace

    @staticmethod
    def _statuses(verdict: Verdict, gamma: int) -> list[str]:
        n = verdict.accepted
        return ["accepted"] * n + (
            ["rejected"] + ["discarded"] * (gamma - n - 1) if n < gamma else []
        )

    # ------------------------------------------------------------------ commit
    def commit(self) -> CommitTrace:
        """Phase 4 (+ reject): append accepted drafts + correction/bonus, stop where EOS,
        a stop string, ``max_new_tokens`` or the context says, and roll both caches back to
        the committed history. The appended token is committed with no KV yet."""
        pending = self._require("commit", "commit")
        assert pending is not None and pending.verdict is not None and pending.verify is not None
        verdict = pending.verdict
        statuses = self._statuses(verdict, len(pending.ids))
        kv_before = self.kv_state(statuses)
        proposal = pending.ids[: verdict.accepted] + [verdict.next_token]
        appended, stop_reason = commit_tokens(self.ids, proposal, self.prompt_len, self._stop)
        kind = "stopped" if len(appended) < len(proposal) else verdict.kind
        self.ids = self.ids + appended
        rolled_target, rolled_draft = rollback(self.target, self.drafter, self.ids)
        discarded = pending.ids[verdict.accepted :]
        self._pending = None
        self.stop_reason = stop_reason
        trace = CommitTrace(
            round_index=self.round_index,
            appended=tuple(self.token(t) for t in appended),
            kind=kind,
            discarded=tuple(self.token(t) for t in discarded),
            stop_reason=stop_reason,
            rolled_back_target=rolled_target,
            rolled_back_draft=rolled_draft,
            kv_before=kv_before,
            kv_after=self.kv_state(),
        )
        assert pending.propose is not None
        self.history.append(
            RoundTrace(
                self.round_index, pending.propose, tuple(pending.edits), pending.verify, trace
            )
        )
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

    def with_config(self, **changes: object) -> SessionConfig:
        return replace(self.config, **changes)

    def _slice(self, p: torch.Tensor | None, q: torch.Tensor | None, extra: list[int]) -> DistSlice:
        return dist_slice(p, q, extra, self.config.top_n, self.token)
