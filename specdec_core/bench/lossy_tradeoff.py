"""Lossy rules, priced on a live pair (the lossless page's section 4, ``rules/lossy.py``):
:func:`lossy_tradeoff`, acceptance, tokens per round and ms per token against the exact
rule, with the exact TV of the first token's law to ``p`` (enumerated on the pair's real
rows). Bounded by ``MAX_*``; bad input raises ``InputError`` ``bad_value`` or
``ConfigError`` ``acceptance_*``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from specdec_core.bench.lossless import MAX_PROMPTS, MAX_TOKENS
from specdec_core.core.errors import InputError
from specdec_core.core.inputs import prompt_ids, whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, tv_distance
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.rules.lossy import lossy_final_distribution, lossy_rule

MAX_DELTAS = 12


@dataclass(frozen=True)
class TradeoffPoint:
    """One rule at one δ (``delta`` ``None`` for the exact rule) in :func:`lossy_tradeoff`.

    Attributes:
        acceptance_rate: accepted drafts / checked drafts (accepted, or the first
            rejected; positions cut by a stop left out), over all runs.
        tokens_per_round: committed tokens per round (accepted + correction/bonus).
        ms_per_token: median over runs of wall ms per generated token (fast path).
        speedup: the exact rule's ``ms_per_token`` / this one's.
        tv_first_mean / tv_first_max: TV to ``p`` of the exact law of the token emitted at a
            round's first drafted position after each prompt,
            ``P = q·[S] + (1 − Σ_S q)·p`` (``rules/lossy.lossy_final_distribution``) on the
            pair's real rows ``p_1`` and ``q_1``; 0 for the exact rule.
    """

    rule: str
    delta: float | None
    acceptance_rate: float
    tokens_per_round: float
    ms_per_token: float
    speedup: float
    tv_first_mean: float
    tv_first_max: float


def lossy_tradeoff(
    pair: ModelPair,
    rule: str,
    deltas: Sequence[float],
    prompts: Sequence[str],
    seeds: int = 2,
    tokens: int = 32,
    gamma: int = 4,
    temperature: float = 1.0,
    epsilon: float = 0.09,
    top_k: int = 1,
) -> list[TradeoffPoint]:
    """The speed/TV trade-off of a lossy rule over ``deltas`` on the pair, the exact rule
    first (``delta = None``): each point runs every prompt with seeds ``0..seeds − 1`` at
    ``temperature`` (fast path, ``tokens`` new tokens, EOS ignored so every run has the
    same length) and enumerates the first position's law exactly (:class:`TradeoffPoint`).
    Timings are wall-clock on a possibly shared machine: compare them within one call.

    Raises:
        ConfigError: ``acceptance_rule`` / ``acceptance_delta`` / ``acceptance_epsilon`` /
            ``acceptance_top_k`` (via ``SessionConfig.validate``); InputError
            ``acceptance_not_lossy`` (``rule`` is ``exact``), ``needs_temperature``
            (temperature 0: both lossy rules are then exact), ``bad_value`` (more than
            :data:`MAX_DELTAS` δ, prompts, seeds or tokens out of range); PromptError.
    """
    whole_number(len(deltas), 1, MAX_DELTAS, "δ values")
    whole_number(len(prompts), 1, MAX_PROMPTS, "prompts")
    seeds = whole_number(seeds, 1, 20, "seeds")
    tokens = whole_number(tokens, 1, MAX_TOKENS, "new tokens")
    base = SessionConfig(gamma=gamma, temperature=temperature, max_new_tokens=tokens)
    settings = [base.validate(pair.vocab_size)]
    for d in deltas:
        lossy = replace(
            base,
            acceptance=rule,  # type: ignore[arg-type]
            acceptance_delta=d,
            acceptance_epsilon=epsilon,
            acceptance_top_k=top_k,
        )
        settings.append(lossy.validate(pair.vocab_size))
    if rule == "exact":
        raise InputError(
            "the trade-off is of a lossy rule: typical or threshold", "acceptance_not_lossy"
        )
    if base.sampling.greedy:
        raise InputError(
            "lossy rules differ from the exact one only above T = 0", "needs_temperature"
        )
    timed = replace(pair, eos_token_id=None)
    rows = [_first_rows(pair, prompt_ids(pair, p), base.sampling) for p in prompts]
    points: list[TradeoffPoint] = []
    for config in settings:
        accepted = checked = appended = rounds = 0
        ms: list[float] = []
        for prompt in prompts:
            for seed in range(seeds):
                run = generate(timed, prompt, replace(config, seed=seed), "speculative")
                ms.append(run.stats.ms_per_token)
                for rec in run.records:
                    accepted += rec.accepted
                    checked += rec.statuses.count("accepted") + rec.statuses.count("rejected")
                    appended += len(rec.appended)
                    rounds += 1
        rule_now = lossy_rule(config)
        tvs = [
            0.0
            if rule_now is None
            else float(tv_distance(lossy_final_distribution(p, q, rule_now), p))
            for p, q in rows
        ]
        points.append(
            TradeoffPoint(
                rule=config.acceptance,
                delta=None if rule_now is None else config.acceptance_delta,
                acceptance_rate=accepted / checked if checked else 0.0,
                tokens_per_round=appended / rounds if rounds else 0.0,
                ms_per_token=statistics.median(ms),
                speedup=0.0,
                tv_first_mean=statistics.fmean(tvs),
                tv_first_max=max(tvs),
            )
        )
    exact_ms = points[0].ms_per_token
    return [
        replace(p, speedup=exact_ms / p.ms_per_token if p.ms_per_token else 0.0) for p in points
    ]


def _first_rows(
    pair: ModelPair, ids: list[int], sampling: SamplingConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p_1, q_1)``: the target's and the draft's ``[V]`` float64 rows after ``ids``."""
    with torch.inference_mode():
        x = torch.tensor([ids], device=pair.device)
        p = logits_to_probs(pair.target(x).logits[0, -1], sampling).double().cpu()
        q = logits_to_probs(pair.draft(x).logits[0, -1], sampling).double().cpu()
    return p, q
