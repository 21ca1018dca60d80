"""The step machine both verification shapes run on: :class:`StepMachine` holds everything a
chain round (``engine/chain/session.py``) and a tree round (``engine/tree/session.py``)
share, so each of those files holds only its own ``propose`` / ``verify`` / ``commit`` and
its views.

Shared here: the prompt bookkeeping (settings validated, prompt ids, ``prompt_len``), the
target's :class:`~specdec_core.core.kvcache.ModelCache` and the attached drafter, the round
counter, the stop reason and the finished rounds (``history``), the ``phase`` and the
phase check (:meth:`StepMachine._require`), the atomic step (:meth:`StepMachine._atomic`),
the stop rule (built once from :func:`specdec_core.engine.rounds.stop_rule`), and the
drivers :meth:`~StepMachine.run_round`, :meth:`~StepMachine.run`,
:meth:`~StepMachine.run_until` and :meth:`~StepMachine.run_through`.

A round is ``propose`` → ``verify`` → ``commit``; the phase names the step the machine
accepts next (``finished`` once a stop ended generation). A step out of phase raises
:class:`~specdec_core.core.errors.PhaseError`; a step that raises leaves the machine as it
was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

import torch

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.kvcache import ModelCache, kv_state
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import Processors, make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import KVState, TokenInfo, token_lookup
from specdec_core.core.words import Phase, StopReason
from specdec_core.drafters import Drafter
from specdec_core.engine.rounds import check_grammar_drafter, stop_rule
from specdec_core.engine.schedule import check_gamma_settings

Step = Literal["propose", "verify", "commit"]
#: The steps of one round, in order.
STEPS: tuple[Step, ...] = ("propose", "verify", "commit")


class Pending(Protocol):
    """What the machine reads of a shape's in-flight round: its ``record`` (``None`` until
    verified) and the stop that cuts its commit short. A pending round that also has a
    ``draft_rng`` (the chain's) gets that stream restored by :meth:`StepMachine._atomic`."""

    record: Any
    stop_reason: StopReason | None


class Finished(Protocol):
    """What the machine reads of a finished round's trace: its ``record``."""

    record: Any


P = TypeVar("P", bound=Pending)
T = TypeVar("T", bound=Finished)


class StepMachine(Generic[P, T]):
    """The scaffolding of a step-by-step speculative session over a shared, read-only
    :class:`ModelPair` (subclasses: the chain's
    :class:`~specdec_core.engine.chain.session.SpeculativeSession` and the tree's
    :class:`~specdec_core.engine.tree.session.TreeSession`).

    ``prompt_len`` continues a generation: the first ``prompt_len`` ids of ``prompt`` are
    the prompt and the rest count as already generated (towards ``max_new_tokens``, and in
    :attr:`generated_ids`); default: all of them are the prompt.

    Subclass hooks: :meth:`_check_settings` (after the settings are validated, before the
    prompt), :meth:`_make_drafter`, :meth:`_kv_drafts`, and the three steps.

    Raises:
        ConfigError: bad settings, a bad penalty or grammar (codes of
        :func:`~specdec_core.core.processors.make_processors`), a grammar the text already
        generated breaks (``grammar_prompt``), a grammar with prompt lookup
        (``grammar_ngram``), γ settings the shape or drafter cannot run
        (:func:`~specdec_core.engine.schedule.check_gamma_settings`). PromptError: bad
        prompt (text or ids, :func:`specdec_core.core.inputs.prompt_ids`). InputError:
        ``prompt_len`` outside ``1..len(ids)`` or not a whole number.
    """

    #: What ``propose`` makes, for the hint "verify the … first".
    unit: ClassVar[str] = "drafts"

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[int],
        config: SessionConfig | None = None,
        drafter: Any = None,
        prompt_len: int | None = None,
    ) -> None:
        self.pair = pair
        self.config = (config or SessionConfig()).validate(pair.vocab_size)
        self._check_settings()
        ids = prompt_ids(pair, prompt)
        if prompt_len is None:
            prompt_len = len(ids)
        if isinstance(prompt_len, bool) or not isinstance(prompt_len, int):
            raise InputError(f"prompt length must be a whole number, got {prompt_len!r}")
        if not 1 <= prompt_len <= len(ids):
            raise InputError(f"prompt length must be 1..{len(ids)}, got {prompt_len}")
        self.ids: list[int] = ids
        self.prompt_len = prompt_len
        #: How many ids the session started from (prompt + carried-over tokens): fixed, so
        #: a reader between a commit's two assignments never counts new tokens as carried.
        self.start_len = len(ids)
        check_grammar_drafter(drafter, self.config.grammar)  # before compiling it
        check_gamma_settings(self.config, drafter, tree=self.unit == "tree")
        #: The history-dependent processors (penalties, grammar matcher), standing on the
        #: committed ids between rounds (``core/processors.py``).
        self.processors: Processors = make_processors(
            pair.tokenizer,
            pair.vocab_size,
            self.config.penalties,
            self.config.grammar,
            prompt_len,
            ids,
        )
        self.target = ModelCache(pair.target)
        self.drafter: Drafter = self._make_drafter(drafter)
        self.drafter.attach(self.target)
        self.round_index = 0
        self.stop_reason: StopReason | None = None
        self.history: list[T] = []
        self._pending: P | None = None
        self._stop = stop_rule(pair, self.config)
        self._token = token_lookup(pair.tokenizer)

    # ------------------------------------------------------------------ hooks
    def _check_settings(self) -> None:
        """Refuse settings this shape cannot run (``self.config`` is validated)."""

    def _make_drafter(self, drafter: Any) -> Drafter:
        """The drafter to attach, from the constructor's ``drafter`` argument."""
        raise NotImplementedError

    def _kv_drafts(self) -> list[int]:
        """Drafted ids the KV-state table lists after the committed ones (default none)."""
        return []

    def propose(self) -> Any:
        raise NotImplementedError

    def verify(self) -> Any:
        raise NotImplementedError

    def commit(self) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ phase
    @property
    def phase(self) -> Phase:
        """The step accepted next: ``propose`` between rounds, ``verify`` after propose,
        ``commit`` after verify, ``finished`` once a commit hit a stop."""
        if self._pending is None:
            return "finished" if self.stop_reason else "propose"
        return "commit" if self._pending.record is not None else "verify"

    def _require(self, phase: Phase, action: str) -> P | None:
        """The pending round, if the machine stands at ``phase``.

        Raises:
            PhaseError: it stands elsewhere (the message says what to do first).
        """
        if self.phase != phase:
            hint = {
                "propose": "propose first",
                "verify": f"verify the {self.unit} first",
                "commit": "commit the verified round first",
                "finished": "generation has finished (reset to start again)",
            }[self.phase]
            raise PhaseError(f"cannot {action} in phase {self.phase!r}: {hint}")
        return self._pending

    def _draft_stream(self) -> torch.Generator | None:
        """The pending round's drafting stream, when it keeps one between steps."""
        return getattr(self._pending, "draft_rng", None)

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Run a step so that, if it raises, the machine is as it was: the target's cache
        (rows beyond the committed ids included: a tree's verify forward) is cut back with
        :meth:`ModelCache.truncate`, the drafter's with ``Drafter.rollback``, and the
        pending round's drafting stream gets its state back. A step assigns its new state
        only after all of its work succeeded; a stream it made afresh is simply dropped
        (:func:`specdec_core.engine.rounds.round_stream`: a step run again draws the same).
        """
        rng = self._draft_stream()
        rng_state = rng.get_state() if rng is not None else None
        target_len = self.target.kv_len
        draft_len = len(self.drafter.cached_ids() or [])
        processor_ids = list(self.processors.ids)
        try:
            yield
        except BaseException:
            if rng is not None and rng_state is not None:
                rng.set_state(rng_state)
            self.processors.sync_to(processor_ids)
            self.target.truncate(target_len)
            self.drafter.rollback(min(draft_len, len(self.drafter.cached_ids() or [])))
            raise

    # ------------------------------------------------------------------ drivers
    def run_round(self) -> T:
        """Propose, verify and commit in one call; returns the round's trace.

        Raises:
            PhaseError: not in phase ``propose``.
        """
        self.propose()
        self.verify()
        self.commit()
        return self.history[-1]

    def run(self, max_rounds: int | None = None) -> list[T]:
        """Whole rounds until a stop (or ``max_rounds``); returns their traces. Runs
        nothing unless the machine stands at ``propose``."""
        rounds: list[T] = []
        while self.phase == "propose" and (max_rounds is None or len(rounds) < max_rounds):
            rounds.append(self.run_round())
        return rounds

    def run_until(self, phase: Phase) -> None:
        """Run steps, in round order (propose → verify → commit → propose of the next
        round …), until the machine stands at ``phase`` or has finished. Runs nothing when
        it already stands there; ``run_until("propose")`` from ``verify`` or ``commit``
        finishes the round in flight; ``run_until("finished")`` runs to the stop.

        Raises:
            ValueError: ``phase`` is not a phase. Whatever a step raises (that step is
            undone, the steps before it stay done).
        """
        if phase not in ("propose", "verify", "commit", "finished"):
            raise ValueError(f"unknown phase {phase!r}")
        while self.phase not in (phase, "finished"):
            getattr(self, self.phase)()

    def run_through(self, step: Step) -> None:
        """Run steps from the current phase up to and including ``step`` within the round
        in flight (what a step button does: a click on Verify in phase ``propose`` proposes
        and verifies). Runs nothing when the machine already stands past ``step`` or has
        finished.

        Raises:
            ValueError: ``step`` is not a step. Whatever a step raises.
        """
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}")
        order: dict[str, int] = {s: i for i, s in enumerate(STEPS)}
        while order.get(self.phase, len(STEPS)) <= order[step]:
            done = self.phase
            getattr(self, done)()
            if done == step:
                break

    # ------------------------------------------------------------------ views
    @property
    def generated_ids(self) -> list[int]:
        """Ids generated so far (the ids after the first ``prompt_len``)."""
        return self.ids[self.prompt_len :]

    @property
    def text(self) -> str:
        """The generated text (prompt excluded)."""
        return self.pair.tokenizer.decode(self.generated_ids)

    def token(self, token_id: int) -> TokenInfo:
        """The :class:`TokenInfo` of ``token_id`` (memoised per session)."""
        return self._token(token_id)

    @property
    def records(self) -> tuple[Any, ...]:
        """One record per finished round (the shape's record type)."""
        return tuple(r.record for r in self.history)

    def kv_state(self, tentative_states: list[str] | None = None) -> KVState:
        """The KV-state table now: the committed tokens (both caches), then the drafts
        :meth:`_kv_drafts` names, marked with ``tentative_states`` (default all
        ``tentative``)."""
        tokens = [self.token(t) for t in self.ids + self._kv_drafts()]
        state = kv_state(
            tokens,
            self.prompt_len,
            len(self.ids),
            self.target,
            self.drafter.cached_ids(),
            tentative_states,
        )
        draft_state = self.drafter.state_view()  # a recurrent drafter's checkpoints
        if draft_state is not None:
            state = replace(state, draft_state=draft_state)
        if not self.processors.active:
            return state
        return replace(state, processors=self.processors.view())
