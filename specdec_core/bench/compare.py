"""Where drafts come from: run one prompt through several draft sources and compare.

For each drafter (draft model, n-gram, early exit, EAGLE, MTP heads, block) the same
prompt and settings go through the fast path
:func:`specdec_core.engine.chain.generate.generate` once per timing pass; its per-round
records (``engine/chain/records.py``) give the acceptance numbers and the token strip (which
drafts were accepted, rejected, discarded or cut), so the strip and the numbers describe
the same generation. The target alone, run in the same timing passes, is the baseline
that speed-ups are measured against.

Every source on two prompts, greedy and T = 1, is the other experiment:
``bench/source_compare.py`` (results in ``bench/source_results.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specdec_core.core.inputs import prompt_ids
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import TokenInfo, token_lookup
from specdec_core.drafters.registry import default_knob, make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, generate
from specdec_core.engine.chain.records import RoundRecord, strip_states, summarize

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
    (:func:`specdec_core.engine.chain.records.strip_states`); ``token`` turns an id into its
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
