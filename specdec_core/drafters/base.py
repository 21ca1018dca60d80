"""The drafter interface: ``propose(context, gamma, ...) -> Draft`` and what else every
draft source provides, plus the one draw a model drafter makes per position.

Modelled on transformers' ``CandidateGenerator``: a drafter proposes up to γ candidate
tokens after the committed context, with the distributions ``q_1..q_γ`` they were drawn
from. A drafter without a distribution returns one-hot rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from specdec_core.core.checkpoints import StateView
from specdec_core.core.device import sync
from specdec_core.core.kvcache import ModelCache, common_prefix_len
from specdec_core.core.processors import Processors
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, one_hot
from specdec_core.core.settings import DraftMethod
from specdec_core.core.timeline import ForwardClock
from specdec_core.drafters.draft_vocab import DraftVocab


@dataclass(frozen=True)
class Draft:
    """Candidates from one proposal.

    Attributes:
        ids: ``[γ']`` int64 on CPU, ``γ' ≤ γ`` (a drafter may propose fewer).
        probs: ``[γ', V]`` float32 on CPU, the rows ``q_i`` each ``ids[i]`` was drawn from
            (one-hot for deterministic proposals).
        forwards: draft-model forwards run.
        ms: wall time in milliseconds.
    """

    ids: torch.Tensor
    probs: torch.Tensor
    forwards: int
    ms: float


class Drafter:
    """What every draft source provides, with the shared parts written once.

    ``propose`` is the general proposal with the rows ``q_i`` (the step machine and the
    sampled fast path); ``propose_argmax`` is the same proposal at temperature 0 without
    building one-hot rows (the greedy fast path; it returns exactly the ids ``propose``
    returns at temperature 0). Both run the subclass's :meth:`_serial` loop, so a drafter
    writes its drafting once. A drafter without a distribution (prompt lookup) picks its
    ids without calling ``pick`` and gets one-hot rows.

    ``forward_ms`` is the time spent inside draft model forwards so far (0.0 for a
    drafter without a model). ``forwards`` counts the draft forwards that really ran since
    the drafter was made (one call may run several, or none: the EAGLE head catching up on
    features); ``Draft.forwards`` and ``engine.tree.round.draft_tree`` report differences
    of it. ``attach`` is called by every engine path once, right after it creates the
    target's cache (a feature-level drafter keeps a reference to read the target's hidden
    states; others ignore it). ``tree_logits`` serves tree drafting
    (``engine/tree/round.py``): the drafter's next-token logits after any context, or
    ``None`` for a drafter without a distribution; :attr:`can_draft_tree` says which,
    without running anything (the lesson links and the tree page read it).

    Attributes:
        name: the drafter's name (:data:`drafters.registry.DRAFTER_NAMES`).
        can_draft_tree: ``True`` exactly when :meth:`tree_logits` returns logits.
        follows_grammar: ``True`` when every draft is picked from a processed row (so
            a grammar keeps the drafts inside it); ``False`` for a drafter that picks
            without ``pick`` (prompt lookup: a grammar is refused with it,
            :func:`specdec_core.engine.rounds.grammar_refusal`).
        vocab_size: ``V``, the width of every ``q`` row.
        device: where the drafter's forwards run (synchronised before a proposal's clock
            is read).
        max_gamma: the most drafts one proposal can make (``None``: no limit of its own
            beyond the session's γ bound; trained multi-token heads or a block drafter
            can propose only as many positions as they were trained for).
        draft_cost: what a drafting round runs, for the cost model
            (:data:`specdec_core.rules.costmodel.DraftCost`): ``serial`` (one step per
            draft), ``one_forward``, ``heads`` or ``none``.
        vocab: the reduced vocabulary its head computes (``drafters/draft_vocab.py``;
            ``None``: the full head). ``_serial`` then hands ``pick`` ``[N]`` subset logits,
            which :meth:`propose` widens to ``[V]`` (``−inf`` outside) before the processors
            and :meth:`propose_argmax` maps back to ids; :meth:`head_vocab` is ``None``
            while a proposal runs the full head (:meth:`full_head_for`).
        int8_by_default: whether it runs weight-only int8 weights where the device has
            the kernel (:func:`specdec_core.core.int8_linear.draft_int8`); ``False`` for a
            drafter whose shown ``q`` would then move with the thread count.
        clock: where its model calls are timed (its ``ModelCache``, or a
            :class:`ForwardClock`; ``None``: it runs none), read by a run's timeline.
    """

    name: str = ""
    can_draft_tree: bool = False
    follows_grammar: bool = True
    vocab_size: int
    device: torch.device = torch.device("cpu")
    forward_ms: float = 0.0
    forwards: int = 0
    max_gamma: int | None = None
    draft_cost: str = "serial"
    vocab: DraftVocab | None = None
    int8_by_default: bool = False
    clock: ForwardClock | ModelCache | None = None
    _full_head: bool = False  # the proposal running now uses the full head (a grammar)
    _sampled: bool = False  # the proposal running now samples (T > 0; :meth:`_sampling`)
    _threshold: float | None = None  # the confidence stop of the proposal running now
    _top_prob: float = 1.0  # the last pick's top probability (read by _keep_drafting)

    def propose(
        self,
        context: list[int],
        gamma: int,
        sampling: SamplingConfig,
        method: DraftMethod,
        generator: torch.Generator,
        processors: Processors | None = None,
        confidence: float | None = None,
    ) -> Draft:
        """Up to ``gamma`` drafts after ``context`` (``L ≥ 1`` ids), each drawn by
        :func:`draw_proposal` from the drafter's row at its position (``generator``: the
        round's drafting stream). ``processors`` (active ones): each row is processed for
        its own prefix, ``context + y_1..y_{i−1}`` (:meth:`Processors.row`), before
        temperature/top-k/top-p, so ``q_i`` is what ``y_i`` was really drawn from and the
        drafts stay inside the grammar; the processors then stand on
        ``context + y_1..y_{γ'−1}``. ``confidence``: the confidence stop's threshold
        (:meth:`_keep_drafting`; ``None``: no stop, γ' = γ for a model drafter)."""
        started = time.perf_counter()
        forwards = self.forwards
        rows: list[torch.Tensor] = []
        picked: list[int] = []
        process = processors is not None and processors.active

        def pick(logits: torch.Tensor) -> int:  # [N] on a reduced head, else [V]
            vocab = self.head_vocab()
            if process:
                assert processors is not None
                logits, vocab = processors.row(self.widen(logits), context + picked), None
            if confidence is not None:
                self._top_prob = top_probability(logits)
            token, q = draw_proposal(logits, sampling, method, generator, vocab)
            if q is not None:
                rows.append(q)
            picked.append(token)
            return token

        with (
            self._confidence_stop(confidence),
            self._sampling(sampling),
            self.full_head_for(processors, context, gamma),
        ):
            ids = torch.tensor(self._serial(context, gamma, pick, False), dtype=torch.long)
            sync(self.device)
            ms = (time.perf_counter() - started) * 1e3
            q = self._q_rows(ids, rows)  # widened by the head this proposal ran
        return Draft(ids, q, self.forwards - forwards, ms)

    def _q_rows(self, ids: torch.Tensor, rows: list[torch.Tensor]) -> torch.Tensor:
        """The proposal's ``[γ', V]`` float32 ``q`` rows from :func:`draw_proposal`'s:
        one-hot on ``ids`` when it drew none (greedy, T = 0, or a drafter without a
        distribution), else the rows stacked and, from a reduced head, widened to ``V``
        once (zeros outside the subset; one pass per proposal instead of one per draft)."""
        if not rows:
            return one_hot(ids, self.vocab_size)
        probs = torch.stack(rows)  # [γ', N] from a reduced head, else [γ', V]
        if probs.shape[-1] == self.vocab_size:
            return probs
        vocab = self.head_vocab()
        assert vocab is not None
        return vocab.expand(probs, 0.0)

    def propose_argmax(
        self, context: list[int], gamma: int, confidence: float | None = None
    ) -> tuple[list[int], int]:
        """``([γ'] drafted ids, forwards run)`` at temperature 0, ``γ' ≤ gamma``: the ids
        :meth:`propose` gives at temperature 0 (with the same ``confidence``), without
        ``q`` rows (the LM head on the last position only)."""
        forwards = self.forwards
        vocab = self.head_vocab()

        def pick(logits: torch.Tensor) -> int:  # [N] on a reduced head, else [V]
            if confidence is not None:
                self._top_prob = top_probability(logits)
            index = int(logits.argmax())
            return index if vocab is None else vocab.id_list[index]

        with self._confidence_stop(confidence):
            ids = self._serial(context, gamma, pick, True)
        return ids, self.forwards - forwards

    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """The drafting loop: up to ``gamma`` ids, each ``pick(logits)`` of the drafter's
        ``[V]`` row after ``context`` + the ids so far. ``last``: the greedy fast path
        (a model may run its LM head on the last position only)."""
        raise NotImplementedError

    def head_vocab(self) -> DraftVocab | None:
        """The vocabulary the head computes now: :attr:`vocab`, or ``None`` (all ``V``
        rows) while :meth:`full_head_for` says so."""
        return None if self._full_head else self.vocab

    def widen(self, logits: torch.Tensor) -> torch.Tensor:
        """The head's ``[..., N]`` logits as ``[..., V]`` rows, ``−inf`` outside the
        subset (:meth:`DraftVocab.expand`); full-width logits unchanged."""
        vocab = self.head_vocab()
        return logits if vocab is None else vocab.expand(logits)

    @contextmanager
    def full_head_for(
        self, processors: Processors | None, context: list[int], depth: int
    ) -> Iterator[None]:
        """Run the full head inside this block when ``processors`` could mask every id of
        the reduced vocabulary, which would leave ``q`` no token to draw: a grammar (its
        mask may allow only tokens outside it), or a no-repeat n-gram ban when the subset
        is no larger than the ids the prefixes of a proposal ``depth`` drafts deep after
        ``context`` can hold (a ban holds only ids of its prefix). Other penalties are per
        id and apply to the subset's ids as they are. Restored after the block even if
        drafting raises."""
        saved, vocab = self._full_head, self.head_vocab()
        masks = processors is not None and (
            processors.grammar is not None
            or (
                processors.penalties.no_repeat_ngram_size > 0
                and vocab is not None
                and vocab.size <= len(set(context)) + depth
            )
        )
        self._full_head = saved or masks
        try:
            yield
        finally:
            self._full_head = saved

    def _keep_drafting(self) -> bool:
        """Whether the ``_serial`` loop may draft another position after the pick it just
        made. Every ``_serial`` loop calls it right after each ``pick`` and stops when it is
        false: the adaptive-γ confidence stop (transformers' ``ConfidenceCriteria``), false
        when a threshold was given to :meth:`propose` / :meth:`propose_argmax` and the
        last pick's top probability (:func:`top_probability`) is below it. The pick itself
        is kept: a proposal stopped after ``y_i`` has ``i`` drafts. Without a threshold
        (every schedule but ``confidence``): always true."""
        threshold = self._threshold
        return threshold is None or self._top_prob >= threshold

    @contextmanager
    def _sampling(self, sampling: SamplingConfig) -> Iterator[None]:
        """Flag one proposal as sampled (T > 0; :meth:`head_vocab`), cleared even on raise."""
        self._sampled = sampling.temperature > 0
        try:
            yield
        finally:
            self._sampled = False

    @contextmanager
    def _confidence_stop(self, confidence: float | None) -> Iterator[None]:
        """Arm the confidence stop for one proposal (``None``: off), disarmed after it
        even if drafting raises."""
        self._threshold, self._top_prob = confidence, 1.0
        try:
            yield
        finally:
            self._threshold = None

    def cached_ids(self) -> list[int] | None:
        """Ids covered by the drafter's KV cache (``None`` if it keeps none)."""
        return None

    def rollback(self, length: int) -> int:
        """Crop the drafter's cache to ``length`` positions; returns positions removed."""
        return 0

    def rollback_to(self, committed: list[int]) -> int:
        """:meth:`rollback` to the part of ``committed`` the drafter holds, the last
        committed token left to read (the next round's first input); returns positions
        removed."""
        held = common_prefix_len(self.cached_ids() or [], committed)
        return self.rollback(min(held, len(committed) - 1))

    def state_view(self) -> StateView | None:
        """The checkpoints of a recurrent state (``core/checkpoints.py``), ``None`` for a
        drafter whose only state is a KV cache (or none)."""
        return None

    def attach(self, target: ModelCache) -> None:
        """Called once with the target's cache before the first proposal."""

    def tree_logits(self, context: list[int]) -> torch.Tensor | None:
        """``[V]`` float32 logits for the token after ``context`` (committed ids followed by
        a tree path), from and extending the drafter's own cache (one forward over the ids
        it lacks); ``None`` when the drafter has no distribution (tree drafting refused)."""
        return None

    def tree_level_logits(self, context: list[int], paths: list[list[int]]) -> torch.Tensor | None:
        """``[n, V]`` float32 logits after ``context + paths[i]`` for ``n`` tree paths of
        one depth (the nodes of a tree level, in order); ``None`` as :meth:`tree_logits`.
        Here one :meth:`tree_logits` call per path; a drafter with a batched forward runs
        the whole level in one (the same rows within float error, tested)."""
        rows = [self.tree_logits(context + path) for path in paths]
        if any(row is None for row in rows):
            return None
        return torch.stack(rows)  # type: ignore[arg-type]


def top_probability(logits: torch.Tensor) -> float:
    """The draft's confidence at one position: ``max_x softmax(logits)(x)`` of a ``[V]``
    row of *processed* logits (after the history processors: penalties, a grammar) at
    temperature 1, without top-k / top-p, so the stop is the same at every temperature.
    At T = 0 the row ``q`` is one-hot (its top probability is always 1 and would never
    stop), which is why the stop reads the logits and not ``q``. transformers'
    ``ConfidenceCriteria`` reads the probability of the token picked, which is this top
    probability for its greedy assistant; reading the maximum keeps the stop independent
    of the draw, so :meth:`Drafter.propose_argmax` and :meth:`Drafter.propose` stop at the
    same position at T = 0. Returns a float in (0, 1]: ``exp(max − logsumexp)``."""
    row = logits.float()
    return float(torch.exp(row.max() - torch.logsumexp(row, dim=-1)))


def draw_proposal(
    logits: torch.Tensor,
    sampling: SamplingConfig,
    method: DraftMethod,
    generator: torch.Generator,
    vocab: DraftVocab | None = None,
) -> tuple[int, torch.Tensor | None]:
    """One drafted token from one row of draft logits.

    Args:
        logits: ``[V]`` draft logits (any device), or ``[N]`` over ``vocab``'s ids (a
            reduced head: the distribution and the draw run over those ``N``).

    Returns:
        ``(token_id, q)``: ``q`` the float32 CPU row the token was drawn from, the
        processed distribution over the head's ids (``[N]`` on a reduced head, which
        :meth:`Drafter.propose` widens to ``[V]`` once per proposal; else ``[V]``), or
        ``None`` for a deterministic pick, the argmax (``greedy``, and always at
        temperature 0), whose ``q`` is one-hot on ``token_id``.
    """
    if sampling.greedy:  # q is one-hot on the argmax: no row to build
        index, q = int(logits.argmax()), None
    else:
        probs = logits_to_probs(logits, sampling).cpu()  # [N] or [V]
        if method == "greedy":  # the argmax of the processed row, q one-hot
            index, q = int(probs.argmax().item()), None
        else:
            index, q = int(torch.multinomial(probs, 1, generator=generator).item()), probs
    return (index if vocab is None else vocab.id_list[index]), q
