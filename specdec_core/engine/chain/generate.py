"""``generate()``: the fast path — target-only autoregressive baseline and speculative
decoding, with counters and timings but no trace building.

The speculative loop runs the round's functions (``engine/chain/round.py``) as the step
machine does, without the teaching extras: propose → verify → decide → apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

from specdec_core.core.device import sync
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.core.timeline import Timeline, build_timeline
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import make_model_drafter
from specdec_core.engine.chain.records import RoundRecord, summarize
from specdec_core.engine.chain.round import (
    ChainContext,
    apply_round,
    decide_round,
    propose,
    propose_argmax,
    verify,
    verify_argmax,
)
from specdec_core.engine.rounds import check_grammar_drafter, round_stream, stop_rule
from specdec_core.engine.schedule import check_gamma_settings, confidence_for, round_gamma
from specdec_core.rules.lossy import lossy_rule
from specdec_core.rules.verification import sampled_rule

Mode = Literal["speculative", "autoregressive"]


@dataclass
class GenerationStats:
    """Counters of one generation. Times in milliseconds.

    The acceptance fields are :func:`~specdec_core.engine.chain.records.summarize` of the
    run's records (one definition everywhere): ``acceptance_rate`` α is the mean
    ``Σ min(p_i, q_i)`` over *checked* positions (accepted or the first rejected;
    Leviathan et al. 2023 Def. 3.1);
    ``mean_accepted`` committed drafts per round (0..γ); ``per_position_acceptance[i]``
    share of rounds that committed draft ``i + 1`` among rounds that drafted it and did
    not cut it at a stop; ``accepted_histogram[n]`` rounds that committed exactly ``n``
    drafts.

    Times: ``draft_ms`` (propose phases), ``verify_ms`` (verify phases; the whole loop in
    autoregressive mode), ``total_ms`` (start to last token), ``ttft_ms`` (to the first
    committed token: the first forward, or the end of the first round), and the time inside
    model forwards alone, ``target_forward_ms`` / ``draft_forward_ms`` (CUDA-synchronised);
    ``prefill_ms`` the first target forward alone (it runs over the whole prompt: in
    speculative mode the first verification, prompt + drafts).
    ``overhead_ms`` = total − both forward times: everything that is not a model forward.
    """

    new_tokens: int = 0
    rounds: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    acceptance_rate: float = 0.0
    mean_accepted: float = 0.0
    per_position_acceptance: list[float] = field(default_factory=list)
    accepted_histogram: list[int] = field(default_factory=list)
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    total_ms: float = 0.0
    ttft_ms: float = 0.0
    target_forward_ms: float = 0.0
    draft_forward_ms: float = 0.0
    prefill_ms: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return 1e3 * self.new_tokens / self.total_ms if self.total_ms > 0 else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.new_tokens if self.new_tokens else 0.0

    @property
    def overhead_ms(self) -> float:
        return max(0.0, self.total_ms - self.target_forward_ms - self.draft_forward_ms)

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "ms_per_token": self.ms_per_token,
            "overhead_ms": self.overhead_ms,
        }

    def set_acceptance(self, records: Sequence[RoundRecord]) -> None:
        """Fill the acceptance fields from the run's records (:func:`summarize`)."""
        summary = summarize(records)
        self.rounds = summary.rounds
        self.acceptance_rate = summary.acceptance_rate
        self.mean_accepted = summary.mean_accepted
        self.accepted_histogram = list(summary.accepted_histogram)
        self.per_position_acceptance = list(summary.per_position_acceptance)


@dataclass
class GenerationResult:
    """``output_ids`` exclude the prompt; ``records`` one :class:`RoundRecord` per round
    (empty in autoregressive mode); ``timeline`` the forwards and rounds on one time axis
    when asked for (``trace_timeline``)."""

    output_ids: list[int]
    text: str
    stop_reason: str
    stats: GenerationStats
    records: tuple[RoundRecord, ...] = ()
    timeline: Timeline | None = None


def generate(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig | None = None,
    mode: Mode = "speculative",
    drafter: Drafter | None = None,
    trace_timeline: bool = False,
    until: Callable[[RoundRecord], bool] | None = None,
) -> GenerationResult:
    """Generate up to ``config.max_new_tokens`` tokens after ``prompt``.

    Args:
        pair: loaded models (read-only). prompt: text or ids.
        config: γ, sampling settings, seed. Speculative mode: each round draws from its
            own drafting and verification streams, as the step machine does
            (:func:`specdec_core.engine.rounds.round_stream`), so records match it round
            for round; autoregressive mode: one CPU ``torch.Generator`` seeded with ``seed``.
        mode: ``speculative`` or ``autoregressive`` (target only, one forward per token).
        drafter: draft source (default: the pair's draft model).
        trace_timeline: also keep the start/end of every forward and round (the timers
            already running; a list append each) as ``GenerationResult.timeline``.
        until: speculative mode, for searches (``lessons/scenarios.py``): called with each round's
            record; ``True`` ends the run after that round (``stop_reason`` ``"until"``
            unless a stop came first). The rounds before are those of the full run.

    Returns:
        :class:`GenerationResult` (ids exclude the prompt).

    Raises:
        PromptError, ConfigError: bad prompt (text or ids,
            :func:`specdec_core.core.inputs.prompt_ids`) or settings.

    Greedy decoding takes a lean path (argmax straight from the logits, no one-hot rows,
    the LM head on the last position only where one row is needed) that decides exactly
    what the general path decides; sampling always takes the general path, drawing from
    the round's streams in the order of ``engine/chain/session.py``. With an active
    history-dependent processor (``config``'s penalties or grammar, ``core/processors.py``)
    both modes take the general path at every temperature, each row processed on its own
    prefix (the grammar is refused with prompt lookup: ConfigError ``grammar_ngram``).
    γ per round follows ``config.gamma_schedule`` (``engine/schedule.py``; its refusals too).
    """
    config = (config or SessionConfig()).validate(pair.vocab_size)
    ids = prompt_ids(pair, prompt)
    prompt_len = len(ids)
    if mode != "autoregressive":
        check_grammar_drafter(drafter, config.grammar)
        check_gamma_settings(config, drafter, tree=False)
    processors = make_processors(
        pair.tokenizer, pair.vocab_size, config.penalties, config.grammar, prompt_len, ids
    )
    target = ModelCache(pair.target)
    stats = GenerationStats()
    records: tuple[RoundRecord, ...] = ()
    if mode != "autoregressive":
        drafter = drafter or make_model_drafter(pair)
        drafter.attach(target)
    speculative = mode != "autoregressive" and drafter is not None
    clock = drafter.clock if speculative else None  # where the drafter's steps are timed
    run = _Run(stats, [] if trace_timeline else None, until)
    if trace_timeline:
        target.spans = []
        if clock is not None:
            clock.spans = []
    active = processors if processors.active else None
    lossy = lossy_rule(config) if mode != "autoregressive" else None  # the baseline: exact draws
    ctx = ChainContext(
        target,
        drafter,
        config.sampling,
        active,
        config.draft_method,
        confidence_for(config),
        sampled_rule(config.verification, lossy),
        stop_rule(pair, config),
        prompt_len,
    )
    with torch.inference_mode():
        run.started = started = time.perf_counter()
        if mode == "autoregressive":
            ids, reason = _autoregressive(pair, ctx, ids, config.seed, run)
        else:
            assert drafter is not None
            ids, reason, records = _speculative(pair, ctx, ids, config, run)
            stats.draft_forward_ms = drafter.forward_ms
        sync(pair.device)
        stats.total_ms = (time.perf_counter() - started) * 1e3
    stats.target_forward_ms = target.forward_ms
    output = ids[prompt_len:]
    stats.new_tokens = len(output)
    timeline = None
    if run.marks is not None:
        drafted = clock.spans if clock is not None and clock.spans else []
        spans, name = target.spans or [], drafter.name if speculative else ""
        timeline = build_timeline(
            mode, started, stats.total_ms, spans, drafted, run.marks, name, stats.draft_forwards
        )
        if clock is not None:
            clock.spans = None
    return GenerationResult(output, pair.tokenizer.decode(output), reason, stats, records, timeline)


@dataclass
class _Run:
    """What a generation loop writes as it goes: the counters, the round marks of the
    timeline (``None``: not asked for), the ``until`` test, the start time."""

    stats: GenerationStats
    marks: list[tuple[float, float, int, int]] | None
    until: Callable[[RoundRecord], bool] | None
    started: float = 0.0


def _autoregressive(
    pair: ModelPair, ctx: ChainContext, ids: list[int], seed: int, run: _Run
) -> tuple[list[int], str]:
    """Target only, one forward per token. Returns the ids and the stop reason. One CPU
    generator seeded with ``seed`` (no rounds). Active processors process each row for
    ``ids`` (any temperature): :func:`verify` with no drafts."""
    stats, marks, target, stop = run.stats, run.marks, ctx.target, ctx.stop
    assert stop is not None
    generator = torch.Generator().manual_seed(seed)
    reason: str | None = None
    no_drafts = torch.zeros(0, pair.vocab_size)
    lean = ctx.sampling.greedy and ctx.active is None
    while reason is None:
        t_token = time.perf_counter() if marks is not None else 0.0
        if lean:
            token = int(target.extend_last(target.sync_to(ids)).argmax())
        else:
            token = verify(ctx, ids, [], no_drafts, generator).verdict.next_token
        stats.target_forwards += 1
        ids.append(token)
        reason = stop(ids[ctx.prompt_len :], len(ids))
        if marks is not None:
            marks.append((t_token, time.perf_counter(), 0, 1))
        if stats.target_forwards == 1:
            stats.prefill_ms = target.forward_ms
            sync(pair.device)
            stats.ttft_ms = (time.perf_counter() - run.started) * 1e3
    stats.verify_ms = (time.perf_counter() - run.started) * 1e3
    return ids, reason


def _speculative(
    pair: ModelPair, ctx: ChainContext, ids: list[int], config: SessionConfig, run: _Run
) -> tuple[list[int], str, tuple[RoundRecord, ...]]:
    """Rounds of propose → verify → decide → apply (``engine/chain/round.py``) until a
    stop. Returns the ids, the stop reason and one record per round. Sampling draws come
    from each round's drafting and verification streams
    (:func:`specdec_core.engine.rounds.round_stream`); greedy rounds without processors
    take the lean pair ``propose_argmax`` / ``verify_argmax``."""
    stats, drafter = run.stats, ctx.drafter
    assert drafter is not None
    lean = ctx.sampling.greedy and ctx.active is None  # argmax only: no rows, no draws
    records: list[RoundRecord] = []
    reason: str | None = None
    while reason is None:
        now = (len(ids) - ctx.prompt_len, len(ids), pair.context_length)
        gamma = round_gamma(config, drafter, (r.accepted for r in records), now=now)
        r, t_draft = len(records), time.perf_counter()
        if lean:
            draft_ids, forwards = propose_argmax(ctx, ids, gamma)
            sync(pair.device)
            t_verify = time.perf_counter()
            stats.draft_ms += (t_verify - t_draft) * 1e3
            checked = verify_argmax(ctx, ids, draft_ids)
        else:
            draft = propose(ctx, ids, gamma, round_stream(config.seed, r, "draft"))
            t_verify = time.perf_counter()
            stats.draft_ms, forwards = stats.draft_ms + draft.ms, draft.forwards
            draft_ids = draft.ids.tolist()
            rng = round_stream(config.seed, r, "verify")
            checked = verify(ctx, ids, draft_ids, draft.probs, rng)
        sync(pair.device)
        stats.verify_ms += (time.perf_counter() - t_verify) * 1e3
        stats.draft_forwards += forwards
        stats.target_forwards += 1
        record, reason = decide_round(ctx, ids, gamma, draft_ids, checked)
        records.append(record)
        ids, _ = apply_round(ctx, ids, record)
        if run.marks is not None:
            run.marks.append((t_draft, time.perf_counter(), len(draft_ids), len(record.appended)))
        if len(records) == 1:
            stats.prefill_ms = ctx.target.forward_ms
            stats.ttft_ms = (time.perf_counter() - run.started) * 1e3
        if run.until is not None and run.until(record) and reason is None:
            reason = "until"
    stats.target_forwards = ctx.target.forwards  # + a drafter's own prefill (eagle's 1st round)
    stats.set_acceptance(records)
    return ids, reason, tuple(records)
