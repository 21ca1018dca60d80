"""Where drafts come from: run one prompt through several draft sources and compare.

For each drafter (draft model, prompt lookup / n-gram, early exit, EAGLE head) the same
prompt and settings go through the fast path
:func:`specdec_core.engine.chain.generate.generate` once per timing pass; its per-round
records (``core/records.py``) give the acceptance numbers and the token strip (which
drafts were accepted, rejected, discarded or cut), so the strip and the numbers describe
the same generation. The target alone, run in the same timing passes, is the baseline
that speed-ups are measured against.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.timing import HowMeasured, Spread, Verdict, judge
from specdec_core.core.inputs import SessionConfig, prompt_ids
from specdec_core.core.models import ModelPair
from specdec_core.core.records import RoundRecord, strip_states, summarize
from specdec_core.core.trace import TokenInfo, token_lookup
from specdec_core.drafters import default_knob, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, GenerationStats, generate
from specdec_core.rules.costmodel import expected_tokens_given_drafts, speedup_from_measured

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class StripMark:
    """One token of the strip: ``state`` is one of :data:`STRIP_STATES`; ``round_index``
    counts from 0. ``rejected``/``discarded`` tokens were drafted but are not part of the
    output."""

    token: TokenInfo
    state: str
    round_index: int


@dataclass(frozen=True)
class BaselineResult:
    """The target alone (one forward per token). Times in ms, throughput in tokens/s."""

    output_ids: tuple[int, ...]
    text: str
    stop_reason: str
    new_tokens: int
    total_ms: float
    tokens_per_s: float
    ms_per_token: float


@dataclass(frozen=True)
class DrafterResult:
    """One drafter on the prompt.

    Attributes:
        name: ``model``, ``ngram``, ``early-exit`` or ``eagle``; knob: n / layers
            (``None``: model, eagle).
        output_ids, text, stop_reason, new_tokens: the generation (prompt excluded).
        rounds: verification rounds (= target forwards). empty_rounds: rounds whose
            drafter was asked for γ > 0 drafts and proposed none (prompt lookup without a
            match; the target still commits one token). A last round shortened to γ = 0 by
            ``max_new_tokens`` is not counted.
        drafted, accepted: drafted tokens verified / accepted, summed over rounds.
        acceptance_rate: α, mean over verified drafted positions of ``Σ min(p_i, q_i)``
            (Leviathan et al. 2023, Def. 3.1); for a one-hot ``q`` that is ``p_i(y_i)``.
        mean_accepted: accepted drafts per round (0..γ); tokens per round = that + 1.
        draft_ms_per_round, verify_ms_per_round: wall ms per round spent drafting and in
            the target's verification forward (fast path).
        overhead_ms_per_round: the rest of a round (acceptance rule, commit, rollback).
        total_ms, tokens_per_s: the fast path's wall time and throughput.
        speedup: ``tokens_per_s / baseline.tokens_per_s`` (> 1: faster than the target).
        same_as_target: output ids equal the target-only output (always true in greedy
            mode — speculative decoding is lossless; sampled outputs differ by design).
        strip: the session's per-token marks in output order (:class:`StripMark`).
        accepted_per_round, drafted_per_round: the session's counts, one per round.
        baseline: the target-only run these numbers are compared with.
        gamma: the γ this drafter ran with: the session's, capped at its
            :attr:`Drafter.max_gamma` (the MTP heads: K; the block drafter: its block).
    """

    name: str
    knob: int | None
    output_ids: tuple[int, ...]
    text: str
    stop_reason: str
    new_tokens: int
    rounds: int
    empty_rounds: int
    drafted: int
    accepted: int
    acceptance_rate: float
    mean_accepted: float
    draft_ms_per_round: float
    verify_ms_per_round: float
    overhead_ms_per_round: float
    total_ms: float
    tokens_per_s: float
    speedup: float
    same_as_target: bool
    strip: tuple[StripMark, ...]
    accepted_per_round: tuple[int, ...]
    drafted_per_round: tuple[int, ...]
    baseline: BaselineResult
    gamma: int = 0

    @property
    def tokens_per_round(self) -> float:
        """Committed tokens per round (mean accepted + the correction/bonus token)."""
        return self.new_tokens / self.rounds if self.rounds else 0.0

    def _per_token(self, ms_per_round: float) -> float:
        return ms_per_round * self.rounds / self.new_tokens if self.new_tokens else 0.0

    @property
    def draft_ms_per_token(self) -> float:
        """Drafting time per generated token (ms)."""
        return self._per_token(self.draft_ms_per_round)

    @property
    def verify_ms_per_token(self) -> float:
        """Verification time per generated token (ms)."""
        return self._per_token(self.verify_ms_per_round)

    @property
    def overhead_ms_per_token(self) -> float:
        """The rest of the time per generated token (ms)."""
        return self._per_token(self.overhead_ms_per_round)


def strip_marks(
    records: Sequence[RoundRecord], token: Callable[[int], TokenInfo]
) -> list[StripMark]:
    """Per-token marks of a run's rounds, in output order
    (:func:`specdec_core.core.records.strip_states`); ``token`` turns an id into its
    :class:`TokenInfo`."""
    return [
        StripMark(token(t), state, i)
        for i, record in enumerate(records)
        for t, state in strip_states(record)
    ]


def token_info(pair: ModelPair) -> Callable[[int], TokenInfo]:
    """A memoised id → :class:`TokenInfo` for ``pair``'s tokenizer."""
    return token_lookup(pair.tokenizer)


def _median(runs: list[GenerationResult]) -> GenerationResult:
    """The run with the median wall time (the upper one of an even count)."""
    return sorted(runs, key=lambda r: r.stats.total_ms)[len(runs) // 2]


def baseline_result(run: GenerationResult) -> BaselineResult:
    """A target-only fast-path run as a :class:`BaselineResult`."""
    s = run.stats
    return BaselineResult(
        tuple(run.output_ids),
        run.text,
        run.stop_reason,
        s.new_tokens,
        s.total_ms,
        s.tokens_per_s,
        s.ms_per_token,
    )


def drafter_result(
    name: str,
    knob: int | None,
    run: GenerationResult,
    baseline: BaselineResult,
    token: Callable[[int], TokenInfo],
) -> DrafterResult:
    """One drafter's timed fast-path ``run`` (its records give the acceptance numbers and
    the strip) compared with the target-only ``baseline``."""
    s = run.stats
    summary = summarize(run.records)
    rounds = max(s.rounds, 1)
    overhead = max(0.0, s.total_ms - s.draft_ms - s.verify_ms)
    return DrafterResult(
        name=name,
        knob=knob,
        output_ids=tuple(run.output_ids),
        text=run.text,
        stop_reason=run.stop_reason,
        new_tokens=s.new_tokens,
        rounds=summary.rounds,
        empty_rounds=summary.empty_rounds,
        drafted=summary.drafted,
        accepted=summary.accepted,
        acceptance_rate=summary.acceptance_rate,
        mean_accepted=summary.mean_accepted,
        draft_ms_per_round=s.draft_ms / rounds,
        verify_ms_per_round=s.verify_ms / rounds,
        overhead_ms_per_round=overhead / rounds,
        total_ms=s.total_ms,
        tokens_per_s=s.tokens_per_s,
        speedup=s.tokens_per_s / baseline.tokens_per_s if baseline.tokens_per_s else 0.0,
        same_as_target=tuple(run.output_ids) == baseline.output_ids,
        strip=tuple(strip_marks(run.records, token)),
        accepted_per_round=tuple(r.accepted for r in run.records),
        drafted_per_round=tuple(len(r.drafted) for r in run.records),
        baseline=baseline,
        gamma=max((r.gamma for r in run.records), default=0),
    )


def compare_drafters(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    drafters: Sequence[tuple[str, int | None]],
    repeats: int = 1,
    progress: Progress | None = None,
) -> list[DrafterResult]:
    """Run ``prompt`` through each ``(name, knob)`` drafter and the target alone.

    Order: a 2-token warm-up of the target and of each drafter; then ``repeats`` timing
    passes, each running the target alone and every drafter once on the fast path, so a
    burst of load on a shared machine hits one pass of all of them rather than all runs
    of one. Each reports the run with the median wall time (the runs of one drafter are
    identical but for timing: same seed, same draws).

    Args:
        pair: the loaded pair (read-only; every run gets fresh caches).
        prompt: text or ids. config: γ, sampling settings, seed, ``max_new_tokens`` (the
            same for every run).
        drafters: ``("model", None)``, ``("ngram", n)``, ``("early-exit", k)``; a knob of
            ``None`` takes the default (n = 3, k = half the layers).
        repeats: timing passes (≥ 1).
        progress: called as ``progress(done, total, what)`` before each of the ``total``
            steps, ``what`` being ``"target"`` or a drafter name, and once more as
            ``(total, total, "done")``.

    Returns:
        One :class:`DrafterResult` per entry of ``drafters``, in order; each holds the
        shared ``baseline``.

    Raises:
        ValueError: no drafters, an unknown name or a knob out of range (checked before
            anything runs). PromptError, ConfigError: bad prompt or settings.
    """
    if not drafters:
        raise ValueError("choose at least one drafter to compare")
    config = config.validate(pair.vocab_size)
    ids = prompt_ids(pair, prompt)
    chosen = [(name, default_knob(pair, name) if knob is None else knob) for name, knob in drafters]
    capped = {}
    for name, knob in chosen:
        cap = make_named_drafter(pair, name, knob).max_gamma  # validates name and knob
        capped[name] = replace(config, gamma=min(config.gamma, cap)) if cap else config
    repeats = max(1, int(repeats))
    total = len(chosen) + repeats * (len(chosen) + 1)
    done = 0

    def step(what: str) -> None:
        nonlocal done
        if progress is not None:
            progress(done, total, what)
        done += 1

    warm = replace(config, max_new_tokens=2)
    generate(pair, ids, warm, "autoregressive")
    for name, knob in chosen:
        step(name)
        warm_gamma = replace(warm, gamma=capped[name].gamma)
        generate(pair, ids, warm_gamma, drafter=make_named_drafter(pair, name, knob))
    target_runs: list[GenerationResult] = []
    drafter_runs: list[list[GenerationResult]] = [[] for _ in chosen]
    for _ in range(repeats):
        step("target")
        target_runs.append(generate(pair, ids, config, "autoregressive"))
        for runs, (name, knob) in zip(drafter_runs, chosen, strict=True):
            step(name)
            drafter = make_named_drafter(pair, name, knob)
            runs.append(generate(pair, ids, capped[name], drafter=drafter))
    if progress is not None:
        progress(total, total, "done")
    baseline = baseline_result(_median(target_runs))
    token = token_info(pair)
    return [
        drafter_result(name, knob, _median(runs), baseline, token)
        for (name, knob), runs in zip(chosen, drafter_runs, strict=True)
    ]


# ------------------------------------------------------------------ every source, two prompts
#: The two prompts every source is compared on (the drafters page's presets, English in
#: both languages so the figures do not depend on the language on screen): a repetitive
#: one (prompt lookup's best case) and a novel one (nothing to look up).
SOURCE_PROMPTS: dict[str, str] = {
    "repetitive": (
        "MACBETH:\nTo-morrow, and to-morrow, and to-morrow,\n"
        "To-morrow, and to-morrow, and to-morrow,\nTo-morrow, and"
    ),
    "novel": "ROMEO:\nBut soft, what light through yonder window breaks?",
}
#: Greedy and T = 1: the two settings every source is compared at.
SOURCE_TEMPERATURES: tuple[float, ...] = (0.0, 1.0)


@dataclass(frozen=True)
class SourceTarget:
    """The target alone on one (prompt, temperature): ``ms_per_token`` (:class:`Spread`
    over the repeats, ms per generated token, end to end) and ``step_ms``, the median
    steady target step (mean target forward after the prompt's, ms) that every cost ratio
    ``c`` divides by."""

    prompt: str
    temperature: float
    new_tokens: int
    ms_per_token: Spread
    step_ms: float


@dataclass(frozen=True)
class SourceRow:
    """One draft source on one (prompt, temperature), measured and predicted.

    Attributes:
        prompt: a key of the comparison's prompts (``repetitive``, ``novel``);
            temperature: 0.0 (greedy) or the sampling temperature.
        name, knob: the drafter (:func:`drafters.make_named_drafter`); ``gamma``: the γ it
            ran with: the session's γ, capped at :attr:`Drafter.max_gamma` (MTP heads: K).
        new_tokens, rounds, drafted, accepted: the run's totals
            (:func:`specdec_core.core.records.summarize` of its records).
        accepted_per_round: committed drafts per round (``summarize().mean_accepted``).
        acceptance_rate: α (``summarize().acceptance_rate``), in [0, 1].
        tokens_per_round: committed tokens per round (accepted + correction/bonus).
        draft_forwards_per_round: drafter forwards per drafting round (``Draft.forwards``
            summed over the run, as each drafter counts them, / the rounds that asked for
            γ > 0 drafts: a last round left one token by ``max_new_tokens`` drafts
            nothing and is not counted, so this is the CLI JSON's ``draft_forwards`` ÷
            the rounds that drafted, not ÷ ``rounds``; the page's column says "per drafting
            round"): about γ for a draft model and early exit, 1 for the block drafter, 0
            for prompt lookup and the MTP heads (they run no model forward); the EAGLE
            head's forwards (one per draft, plus its catch-up on the round's new features).
        head_evaluations_per_round: the MTP heads' head evaluations (one residual block +
            the LM head row per drafted position, not a model forward) per drafting round;
            ``None`` for every other source.
        target_forwards_per_round: target forwards per round (1: the verification;
            :attr:`extra_target_forwards_per_round` is what a source adds to it).
        ms_per_token: :class:`Spread` of ms per generated token over the repeats.
        speedup: :class:`Spread` of ``target ms/token ÷ this source's ms/token``, each
            repeat against the target-alone run of the same pass.
        draft_ms_per_round: median wall ms of a round's drafting (the propose phase: the
            draft forwards, or the heads, or the lookup).
        cost_ratio: ``c = draft_ms_per_round / target step``: a round's drafting in target
            steps (Leviathan et al. 2023 §3.3 write it ``γ·c`` for γ draft-model steps;
            here the measured total, so one block forward, the MTP heads alone or a lookup
            are priced as what they are).
        predicted_tokens_per_round: ``E = mean_r (1 − α^{g_r+1}) / (1 − α)`` from the
            measured α and each round's draft count ``g_r``
            (:func:`rules.costmodel.expected_tokens_given_drafts`).
        predicted_speedup: ``E / (c + 1)`` (Leviathan et al. 2023 Thm 3.8 with the
            measured drafting cost per round, a verification priced as one target step,
            no loop overhead; :func:`rules.costmodel.speedup_from_measured`).
        same_as_target: the output equals the target alone's (always at T = 0).
    """

    prompt: str
    temperature: float
    name: str
    knob: int | None
    gamma: int
    new_tokens: int
    rounds: int
    drafted: int
    accepted: int
    accepted_per_round: float
    acceptance_rate: float
    tokens_per_round: float
    draft_forwards_per_round: float
    target_forwards_per_round: float
    ms_per_token: Spread
    speedup: Spread
    draft_ms_per_round: float
    cost_ratio: float
    predicted_tokens_per_round: float
    predicted_speedup: float
    same_as_target: bool
    head_evaluations_per_round: float | None = None

    @property
    def extra_target_forwards_per_round(self) -> float:
        """Target forwards per round beyond the one verification (0 for the MTP heads:
        they read the hidden states the verification made; the EAGLE head's first-round
        prefill shows as ``1 / rounds``)."""
        return max(0.0, self.target_forwards_per_round - 1.0)


@dataclass(frozen=True)
class SourceComparison:
    """Every source on every (prompt, temperature) of one interleaved measurement.

    ``rows`` in (prompt, temperature, source) order; ``targets`` one per (prompt,
    temperature); ``prompts`` the ``(key, text)`` pairs; ``gamma``, ``max_new_tokens``,
    ``seed`` the session's settings; ``how`` how it was measured; ``verdict`` whether the
    repeats agree (:func:`bench.timing.judge` over every ms/token spread: a busy machine
    gives times that describe its load).
    """

    rows: tuple[SourceRow, ...]
    targets: tuple[SourceTarget, ...]
    prompts: tuple[tuple[str, str], ...]
    gamma: int
    max_new_tokens: int
    seed: int
    how: HowMeasured
    verdict: Verdict

    @property
    def sources(self) -> tuple[str, ...]:
        """The source names, in the order they were compared."""
        return tuple(dict.fromkeys(r.name for r in self.rows))

    @property
    def settings(self) -> tuple[tuple[str, float], ...]:
        """The ``(prompt, temperature)`` pairs, in the order they were compared."""
        return tuple(dict.fromkeys((r.prompt, r.temperature) for r in self.rows))

    def rows_for(self, prompt: str, temperature: float) -> tuple[SourceRow, ...]:
        """The sources' rows on one (prompt, temperature), in source order."""
        return tuple(r for r in self.rows if (r.prompt, r.temperature) == (prompt, temperature))

    def target(self, prompt: str, temperature: float) -> SourceTarget:
        """The target alone on one (prompt, temperature).

        Raises:
            KeyError: a setting not measured.
        """
        for t in self.targets:
            if (t.prompt, t.temperature) == (prompt, temperature):
                return t
        raise KeyError((prompt, temperature))

    def most_tokens_per_round(self, prompt: str, temperature: float) -> SourceRow:
        """The source that committed the most tokens per round on one setting (the first
        in source order on a tie)."""
        rows = self.rows_for(prompt, temperature)
        if not rows:
            raise KeyError((prompt, temperature))
        return max(rows, key=lambda r: r.tokens_per_round)

    def to_json(self) -> dict:
        """Plain JSON (derived from the dataclasses, never read back)."""
        return asdict(self)


def _steady_step(stats: GenerationStats) -> float:
    """A target-only run's mean target forward after the prompt's (ms)."""
    n = stats.target_forwards - 1
    return (stats.target_forward_ms - stats.prefill_ms) / n if n > 0 else stats.target_forward_ms


def _source_row(
    prompt: str,
    temperature: float,
    name: str,
    knob: int | None,
    gamma: int,
    runs: Sequence[GenerationResult],
    target_runs: Sequence[GenerationResult],
    target_step_ms: float,
    head_evaluations: int | None = None,
) -> SourceRow:
    """One source's repeats (identical but for timing: same seed, same draws) against
    the target-alone repeats of the same passes. ``head_evaluations``: the first run's
    MTP head evaluations (``MtpDrafter.head_evaluations``; ``None``: not an MTP drafter)."""
    first = runs[0]
    summary = summarize(first.records)
    s = first.stats
    rounds = max(1, summary.rounds)
    drafting = sum(1 for r in first.records if r.gamma > 0)  # rounds that asked for drafts
    ms = [r.stats.total_ms / max(1, r.stats.new_tokens) for r in runs]
    base = [r.stats.total_ms / max(1, r.stats.new_tokens) for r in target_runs]
    draft_ms = statistics.median(r.stats.draft_ms / max(1, r.stats.rounds) for r in runs)
    c = draft_ms / target_step_ms if target_step_ms > 0 else 0.0
    alpha = min(1.0, max(0.0, summary.acceptance_rate))
    predicted_tokens = expected_tokens_given_drafts(alpha, [len(r.drafted) for r in first.records])
    predicted = (
        speedup_from_measured(predicted_tokens, target_step_ms, draft_ms, target_step_ms, 0.0)
        if target_step_ms > 0 and predicted_tokens > 0
        else 0.0
    )
    return SourceRow(
        prompt=prompt,
        temperature=temperature,
        name=name,
        knob=knob,
        gamma=gamma,
        new_tokens=s.new_tokens,
        rounds=summary.rounds,
        drafted=summary.drafted,
        accepted=summary.accepted,
        accepted_per_round=summary.mean_accepted,
        acceptance_rate=summary.acceptance_rate,
        tokens_per_round=summary.tokens_per_round,
        draft_forwards_per_round=s.draft_forwards / max(1, drafting),
        target_forwards_per_round=s.target_forwards / rounds,
        ms_per_token=Spread.of(ms),
        speedup=Spread.of([b / m if m > 0 else 0.0 for b, m in zip(base, ms, strict=True)]),
        draft_ms_per_round=draft_ms,
        cost_ratio=c,
        predicted_tokens_per_round=predicted_tokens,
        predicted_speedup=predicted,
        same_as_target=tuple(first.output_ids) == tuple(target_runs[0].output_ids),
        head_evaluations_per_round=None
        if head_evaluations is None
        else head_evaluations / max(1, drafting),
    )


def compare_sources(
    pair: ModelPair,
    config: SessionConfig,
    drafters: Sequence[str] | None = None,
    prompts: Mapping[str, str] | None = None,
    temperatures: Sequence[float] = SOURCE_TEMPERATURES,
    repeats: int = 3,
    progress: Progress | None = None,
) -> SourceComparison:
    """Every draft source on every prompt, greedy and sampled, with the cost model's
    prediction beside each measurement.

    Order: one untimed 2-token warm-up of the target and of each source; then ``repeats``
    timing passes, each running, for every (prompt, temperature), the target alone and
    then every source once (interleaved, so a burst of load on a shared machine hits one
    pass of all of them). End-of-text is ignored (every run makes exactly
    ``max_new_tokens`` tokens, :func:`bench.runs.ignoring_eos`).

    Args:
        pair: the loaded pair (read-only; every run gets a fresh drafter and caches).
        config: γ, seed, ``max_new_tokens``, top-k/top-p (its temperature is replaced by
            each of ``temperatures``).
        drafters: source names (default :func:`drafters.drafters_for`: every source the
            pair can run), each with its default knob; γ is capped at a source's
            :attr:`Drafter.max_gamma`.
        prompts: ``{key: text}`` (default :data:`SOURCE_PROMPTS`).
        temperatures: default greedy and T = 1.
        repeats: timing passes (≥ 1).
        progress: ``progress(done, total, what)`` before each run (``what``: ``"target"``
            or a source name), then ``(total, total, "done")``.

    Returns:
        :class:`SourceComparison`.

    Raises:
        ValueError: no source, an unknown source, no prompt or no temperature (checked
            before anything runs). PromptError, ConfigError: bad prompt or settings.
    """
    names = tuple(drafters_for(pair) if drafters is None else drafters)
    prompts = dict(SOURCE_PROMPTS if prompts is None else prompts)
    if not names:
        raise ValueError("choose at least one draft source to compare")
    if not prompts or not temperatures:
        raise ValueError("choose at least one prompt and one temperature")
    configs = {
        temp: replace(config, temperature=float(temp)).validate(pair.vocab_size)
        for temp in temperatures
    }
    knobs = {name: default_knob(pair, name) for name in names}
    gammas = {}
    for name in names:  # validates every name before anything runs
        cap = make_named_drafter(pair, name, knobs[name]).max_gamma
        gammas[name] = min(config.gamma, cap) if cap else config.gamma
    ids = {key: prompt_ids(pair, text) for key, text in prompts.items()}
    timed = ignoring_eos(pair)
    repeats = max(1, int(repeats))
    settings = [(key, temp) for key in prompts for temp in temperatures]
    total = 1 + len(names) + repeats * len(settings) * (1 + len(names))
    done = 0

    def step(what: str) -> None:
        nonlocal done
        if progress is not None:
            progress(done, total, what)
        done += 1

    def once(key: str, temp: float, name: str | None, tokens: int | None = None):
        cfg = configs[temp]
        if name is not None:
            cfg = replace(cfg, gamma=gammas[name])
        if tokens is not None:
            cfg = replace(cfg, max_new_tokens=tokens)
        if name is None:
            return generate(timed, ids[key], cfg, "autoregressive")
        drafter = make_named_drafter(pair, name, knobs[name])
        result = generate(timed, ids[key], cfg, drafter=drafter)
        heads.setdefault((key, temp, name), getattr(drafter, "head_evaluations", None))
        return result

    heads: dict[tuple[str, float, str], int | None] = {}  # the first timed run's, per source
    first_key, first_temp = settings[0]
    step("target")
    once(first_key, first_temp, None, 2)
    for name in names:
        step(name)
        once(first_key, first_temp, name, 2)
    heads.clear()  # the warm-up runs are shorter: count the timed runs' only
    target_runs: dict[tuple[str, float], list[GenerationResult]] = {s: [] for s in settings}
    runs: dict[tuple[str, float, str], list[GenerationResult]] = {
        (*s, n): [] for s in settings for n in names
    }
    for _ in range(repeats):
        for key, temp in settings:
            step("target")
            target_runs[(key, temp)].append(once(key, temp, None))
            for name in names:
                step(name)
                runs[(key, temp, name)].append(once(key, temp, name))
    if progress is not None:
        progress(total, total, "done")
    targets, rows = [], []
    for key, temp in settings:
        base = target_runs[(key, temp)]
        step_ms = statistics.median(_steady_step(r.stats) for r in base)
        targets.append(
            SourceTarget(
                key,
                temp,
                base[0].stats.new_tokens,
                Spread.of([r.stats.total_ms / max(1, r.stats.new_tokens) for r in base]),
                step_ms,
            )
        )
        for name in names:
            measured = runs[(key, temp, name)]
            rows.append(
                _source_row(
                    key,
                    temp,
                    name,
                    knobs[name],
                    gammas[name],
                    measured,
                    base,
                    step_ms,
                    heads[(key, temp, name)],
                )
            )
    verdict = judge([t.ms_per_token for t in targets] + [r.ms_per_token for r in rows])
    return SourceComparison(
        rows=tuple(rows),
        targets=tuple(targets),
        prompts=tuple(prompts.items()),
        gamma=config.gamma,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        how=HowMeasured.now(repeats, 1, config.max_new_tokens),
        verdict=verdict,
    )
