"""Every draft source on two prompts, as results: the target alone on one (prompt,
temperature) (:class:`SourceTarget`), one source measured beside the cost model's
prediction (:class:`SourceRow`, built from its runs by :func:`source_row`) and the whole
comparison (:class:`SourceComparison`, possibly partial: a time budget that ran out).
Measured by ``bench/source_compare.py``; frozen values, JSON derived from them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from specdec_core.bench.bounded import conclusive
from specdec_core.bench.timing import HowMeasured, Spread, Verdict
from specdec_core.engine.chain.generate import GenerationResult, GenerationStats
from specdec_core.engine.chain.records import summarize
from specdec_core.lessons.prompts import prompts_for
from specdec_core.rules.costmodel import expected_tokens_given_drafts, speedup_from_measured

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


def source_prompts(pair_name: str) -> dict[str, str]:
    """The two prompts on the preset ``pair_name``: its own (``lessons/prompts.py``: a
    poem on ``embedded-zh``), else :data:`SOURCE_PROMPTS`."""
    own = prompts_for(pair_name)
    if own.drafters_repetitive is None or own.drafters_novel is None:
        return dict(SOURCE_PROMPTS)
    return {"repetitive": own.drafters_repetitive, "novel": own.drafters_novel}


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
            (:func:`specdec_core.engine.chain.records.summarize` of its records).
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
    gives times that describe its load). ``partial``: the time budget (``budget_s``, s)
    ran out before the ``planned`` (prompt, temperature) timing passes all ran: a setting
    with no pass is left out, ``how.repeats`` is the fewest passes a shown setting got.
    """

    rows: tuple[SourceRow, ...]
    targets: tuple[SourceTarget, ...]
    prompts: tuple[tuple[str, str], ...]
    gamma: int
    max_new_tokens: int
    seed: int
    how: HowMeasured
    verdict: Verdict
    partial: bool = False
    budget_s: float | None = None
    planned: int = 0  # timing passes asked for: repeats × settings
    ran: int = 0  # timing passes that ran

    @property
    def conclusive(self) -> bool:
        """Whether the times support a ranking (:func:`bench.bounded.conclusive`)."""
        return conclusive(self.verdict, self.how.repeats)

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


def steady_step(stats: GenerationStats) -> float:
    """A target-only run's mean target forward after the prompt's (ms)."""
    n = stats.target_forwards - 1
    return (stats.target_forward_ms - stats.prefill_ms) / n if n > 0 else stats.target_forward_ms


def source_row(
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
