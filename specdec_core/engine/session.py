"""The one step-by-step session of both verification shapes. :class:`Session` owns what
every shape shares and holds a *shape* object (``steps``) that owns the round in flight,
its ``propose`` / ``verify`` / ``commit`` over the round's functions, and everything only
that shape has (the chain's edits and previews, the tree's views): the chain's
:class:`~specdec_core.engine.chain.session.ChainSteps`, the tree's
:class:`~specdec_core.engine.tree.session.TreeSteps`. Composition, no class hierarchy;
pages build one with the factories ``SpeculativeSession`` and ``TreeSession`` and call a
shape's own members on ``session.steps`` (``session.steps.edit_draft(2, 7)``,
``session.steps.tree_view()``).

Shared here: prompt bookkeeping, the target's :class:`ModelCache` and the attached
drafter, the processors, the round counter, stop reason and ``history``, the ``phase`` and
its check, the atomic step (:meth:`Session._atomic`), the stop rule, the drivers
(``run_round``, ``run``, ``run_until``, ``run_through``) and ``kv_state``. A round is
``propose`` → ``verify`` → ``commit``; a step out of phase raises
:class:`~specdec_core.core.errors.PhaseError`; a step that raises leaves the session as
it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Generic, Literal, Protocol, TypeVar

import torch

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.kvcache import ModelCache, kv_state
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import Processors, make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import KVState, TokenInfo, token_lookup
from specdec_core.core.words import Phase, StopReason
from specdec_core.drafters.base import Drafter
from specdec_core.engine.rounds import check_grammar_drafter, stop_rule
from specdec_core.engine.schedule import check_gamma_settings

Step = Literal["propose", "verify", "commit"]
#: The steps of one round, in order.
STEPS: tuple[Step, ...] = ("propose", "verify", "commit")


class Shape(Protocol):
    """What the session asks of a shape, built over its session (``steps(session)``).
    ``unit``: ``drafts`` | ``tree``; ``pending``: the round in flight (``None`` between
    rounds; ``record`` set once verified); ``drafts``: the pending drafted ids listed after
    the committed ids in the KV-state table (a tree lists none)."""

    unit: str
    pending: Any

    @property
    def drafts(self) -> list[int]: ...
    def check_settings(self, config: SessionConfig) -> None: ...
    def make_drafter(self, pair: ModelPair, drafter: Any) -> Drafter: ...
    def draft_stream(self) -> torch.Generator | None: ...
    def propose(self) -> Any: ...
    def verify(self) -> Any: ...
    def commit(self) -> Any: ...


S = TypeVar("S", bound=Shape)


class Session(Generic[S]):
    """A step-by-step speculative session over a shared, read-only :class:`ModelPair`.
    ``prompt_len``: the first ``prompt_len`` ids of ``prompt`` are the prompt, the rest
    count as already generated (default: all are the prompt). ``steps`` builds the shape
    object over this session (``ChainSteps``, or a ``TreeSteps`` with its tree shape).

    Raises:
        ConfigError: bad settings, penalty or grammar (``make_processors``' codes), a
        grammar the generated text breaks (``grammar_prompt``) or with prompt lookup
        (``grammar_ngram``), settings the shape or drafter cannot run
        (``check_gamma_settings``). PromptError: bad prompt. InputError: ``prompt_len``
        outside ``1..len(ids)`` or not a whole number.
    """

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[int],
        config: SessionConfig | None,
        drafter: Any,
        prompt_len: int | None,
        steps: Callable[[Session[S]], S],
    ) -> None:
        self.pair = pair
        self.config = (config or SessionConfig()).validate(pair.vocab_size)
        self.steps: S = steps(self)
        self.steps.check_settings(self.config)
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
        c = self.config
        self.processors: Processors = make_processors(
            pair.tokenizer, pair.vocab_size, c.penalties, c.grammar, prompt_len, ids
        )
        self.target = ModelCache(pair.target)
        self.drafter: Drafter = self.steps.make_drafter(pair, drafter)
        self.drafter.attach(self.target)
        self.round_index = 0
        self.stop_reason: StopReason | None = None
        self.history: list[Any] = []
        self.stop = stop_rule(pair, self.config)
        self._token = token_lookup(pair.tokenizer)

    # ------------------------------------------------------------------ steps
    @property
    def unit(self) -> str:
        return self.steps.unit

    # Each returns the shape's step record (``engine/chain/trace.py``, ``engine/tree/trace.py``)
    def propose(self) -> Any:
        return self.steps.propose()

    def verify(self) -> Any:
        return self.steps.verify()

    def commit(self) -> Any:
        return self.steps.commit()

    # ------------------------------------------------------------------ phase
    @property
    def phase(self) -> Phase:
        """The step accepted next (``finished`` once a commit hit a stop)."""
        if self.steps.pending is None:
            return "finished" if self.stop_reason else "propose"
        return "commit" if self.steps.pending.record is not None else "verify"

    def _require(self, phase: Phase, action: str) -> Any:
        """The pending round, if the session stands at ``phase``; else PhaseError (the
        message says what to do first)."""
        if self.phase != phase:
            hint = {
                "propose": "propose first",
                "verify": f"verify the {self.unit} first",
                "commit": "commit the verified round first",
                "finished": "generation has finished (reset to start again)",
            }[self.phase]
            raise PhaseError(f"cannot {action} in phase {self.phase!r}: {hint}")
        return self.steps.pending

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Run a step so that, if it raises, the session is as it was: both caches cut
        back (a tree's verify rows too), the processors synced back, the pending drafting
        stream restored. A step assigns its state only after all its work succeeded; a
        stream made afresh is dropped (``round_stream``: run again, it draws the same)."""
        rng = self.steps.draft_stream()
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
    def run_round(self) -> Any:
        """Propose, verify and commit; the round's trace. PhaseError: not at ``propose``."""
        self.propose()
        self.verify()
        self.commit()
        return self.history[-1]

    def run(self, max_rounds: int | None = None) -> list[Any]:
        """Whole rounds from phase ``propose`` until a stop (or ``max_rounds``); traces."""
        rounds: list[Any] = []
        while self.phase == "propose" and (max_rounds is None or len(rounds) < max_rounds):
            rounds.append(self.run_round())
        return rounds

    def run_until(self, phase: Phase) -> None:
        """Run steps in round order until the session stands at ``phase`` or has finished
        (``"finished"`` runs to the stop). Raises ValueError for an unknown phase, and
        whatever a step raises (that step undone, the steps before it done)."""
        if phase not in ("propose", "verify", "commit", "finished"):
            raise ValueError(f"unknown phase {phase!r}")
        while self.phase not in (phase, "finished"):
            getattr(self, self.phase)()

    def run_through(self, step: Step) -> None:
        """Run steps from the current phase up to and including ``step`` within the round
        in flight (Verify in phase ``propose`` proposes and verifies); nothing when the
        session stands past ``step``. Raises ValueError for an unknown step."""
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

    @property
    def current_record(self) -> Any:
        """The pending round's record once verified (phase ``commit``), else ``None``."""
        return self.steps.pending.record if self.steps.pending else None

    @property
    def current_stop_reason(self) -> StopReason | None:
        """The stop that cuts the pending round's commit short (phase ``commit``)."""
        return self.steps.pending.stop_reason if self.steps.pending else None

    def kv_state(self, tentative_states: list[str] | None = None) -> KVState:
        """The KV-state table: the committed tokens (both caches), then the shape's
        ``drafts`` marked with ``tentative_states`` (default all ``tentative``); the
        processors' state and a recurrent drafter's checkpoints when there are any."""
        tokens = [self.token(t) for t in self.ids + self.steps.drafts]
        cached, n = self.drafter.cached_ids(), len(self.ids)
        state = kv_state(tokens, self.prompt_len, n, self.target, cached, tentative_states)
        views = self.processors.view() if self.processors.active else None
        return replace(state, processors=views, draft_state=self.drafter.state_view())
