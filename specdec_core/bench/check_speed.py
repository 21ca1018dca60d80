"""The measured parts of the device check (``bench/check.py``): a short seeded χ² of
speculative sampling against the target's own distribution, and the speed table (the
target alone and each drafter: tokens/s, speed-up, the cost model's prediction).

χ² (Leviathan et al. 2023, Thm 1): the first token a speculative run emits at T = 1 is
distributed as the target's ``p(· | prompt)``, whatever the drafts were. ``n`` runs with
seeds ``0 … n − 1``; tokens whose expected count is below 5 are pooled into one cell so
Pearson's test holds. Seeded: the same device gives the same p-value every time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specdec_core.bench.report import run_bench
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.rules.lab.montecarlo import ChiSquare, chi_square

CHI_PROMPT = "ROMEO:\nBut soft, what light"
SPEED_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"  # the bench's own
MIN_EXPECTED = 5.0  # Pearson's rule of thumb: every cell expects at least 5 draws
ALPHA_LEVEL = 1e-3  # a p-value below this on a seeded run is reported as a failure


@dataclass(frozen=True)
class SampledCheck:
    """χ² of ``n`` first tokens (T = 1, γ, drafter ``model``) against ``p``: the statistic,
    its degrees of freedom (cells − 1) and p-value; ``ok``: ``p_value ≥ ALPHA_LEVEL``."""

    n: int
    gamma: int
    cells: int
    statistic: float
    dof: int
    p_value: float
    ok: bool
    seconds: float


@dataclass(frozen=True)
class SpeedRow:
    """One drafter against the target alone (the same interleaved runs): tokens/s, the
    measured speed-up and the cost model's, its error in %, α, tokens per round
    (expected / measured) and the timing verdict's reasons (empty: the timings hold)."""

    drafter: str
    tokens_per_s: float
    target_tokens_per_s: float
    speedup: float
    predicted_speedup: float
    error_pct: float
    alpha: float
    expected_tokens_per_round: float
    measured_tokens_per_round: float
    busy: tuple[str, ...]


@dataclass(frozen=True)
class SpeedTable:
    """The speed section: the rows, the target's step ``t(1)`` (ms) and the verify-cost
    curve ``t(k)/t(1)`` of the first drafter's measurement, and the settings."""

    rows: tuple[SpeedRow, ...]
    target_step_ms: float
    verify_ratio: tuple[float, ...]
    max_new_tokens: int
    repeats: int
    gamma: int
    seconds: float


def target_probs(pair: ModelPair, prompt: str) -> np.ndarray:
    """``[V]`` float64: the target's softmax at T = 1 for the token after ``prompt``."""
    with torch.inference_mode():
        logits = ModelCache(pair.target).extend(encode_prompt(pair, prompt))[-1]
    return torch.softmax(logits.float(), dim=-1).double().cpu().numpy()


def pooled(counts: np.ndarray, probs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cells with ``n · p ≥ MIN_EXPECTED`` kept, the rest pooled into one last cell
    (dropped when it expects nothing and holds nothing; a draw where ``p = 0`` stays, and
    fails the test outright). Returns ``(counts, probs)`` over the cells."""
    keep = probs * n >= MIN_EXPECTED
    c = list(counts[keep]) + [counts[~keep].sum()]
    p = list(probs[keep]) + [probs[~keep].sum()]
    if p[-1] <= 0 and c[-1] == 0:
        c, p = c[:-1], p[:-1]
    return np.asarray(c, dtype=np.float64), np.asarray(p, dtype=np.float64)


def first_tokens(pair: ModelPair, n: int, gamma: int = 4) -> np.ndarray:
    """``[V]`` counts of the first token of ``n`` speculative runs at T = 1 (draft model,
    seeds ``0 … n − 1``, one token each)."""
    counts = np.zeros(pair.vocab_size)
    for seed in range(n):
        config = SessionConfig(gamma=gamma, temperature=1.0, seed=seed, max_new_tokens=1)
        run = generate(pair, CHI_PROMPT, config, "speculative", make_named_drafter(pair, "model"))
        counts[run.output_ids[0]] += 1
    return counts


def fit(counts: np.ndarray, probs: np.ndarray) -> tuple[int, ChiSquare]:
    """Pearson's χ² of ``counts`` against ``probs`` over :func:`pooled` cells:
    ``(cells, result)``."""
    c, p = pooled(counts, probs, int(counts.sum()))
    return len(c), chi_square(c, p)


def sampled_check(pair: ModelPair, n: int, gamma: int = 4) -> SampledCheck:
    """:func:`first_tokens` tested against :func:`target_probs` (:func:`fit`)."""
    started = time.perf_counter()
    cells, result = fit(first_tokens(pair, n, gamma), target_probs(pair, CHI_PROMPT))
    return SampledCheck(
        n,
        gamma,
        cells,
        result.statistic,
        result.dof,
        result.p_value,
        result.p_value >= ALPHA_LEVEL,
        time.perf_counter() - started,
    )


def _error(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else math.nan


def speed_table(
    pair: ModelPair,
    max_new_tokens: int,
    repeats: int,
    gamma: int = 4,
    progress: Callable[[str], None] = lambda _: None,
) -> SpeedTable:
    """``bench`` (greedy, no HF lanes) for every drafter the pair has, on the bench's
    prompt: each row's target-alone and speculative runs are interleaved."""
    started = time.perf_counter()
    rows, curve = [], None
    for name in drafters_for(pair):
        progress(f"  speed: {name}")
        rep = run_bench(pair, SPEED_PROMPT, gamma, max_new_tokens, repeats, hf=False, drafter=name)
        s, cm = rep.summary, rep.summary.cost_model
        curve = curve or rep.curve
        rows.append(
            SpeedRow(
                drafter=name,
                tokens_per_s=s.speculative.tokens_per_s,
                target_tokens_per_s=s.autoregressive.tokens_per_s,
                speedup=s.speedup,
                predicted_speedup=cm.predicted_speedup,
                error_pct=_error(cm.predicted_speedup, s.speedup),
                alpha=cm.alpha,
                expected_tokens_per_round=cm.expected_tokens_per_round,
                measured_tokens_per_round=cm.measured_tokens_per_round,
                busy=s.timing.reasons if s.timing is not None else (),
            )
        )
    return SpeedTable(
        rows=tuple(rows),
        target_step_ms=curve.target_ms[0] if curve is not None else 0.0,
        verify_ratio=tuple(curve.ratio()) if curve is not None else (),
        max_new_tokens=max_new_tokens,
        repeats=repeats,
        gamma=gamma,
        seconds=time.perf_counter() - started,
    )
