"""The acceptance-rule lab: why ``min(1, p/q)`` plus the residual gives exactly ``p``.

Small hand-edited distributions over 3–8 named tokens (or real model rows taken from a
step-through round), the exact decomposition

    p(x) = min(p(x), q(x))  +  β · r(x),   β = 1 − A = Σ [p − q]+,  r = norm([p − q]+)
           (accept path)      (reject path)

with ``A = Σ min(p, q) = 1 − TV(p, q)`` (Leviathan et al. 2023, Thm 3.5 and Lemma 3.3;
Chen et al. 2023, Thm 1), three rules compared exactly (correct; the wrong "resample from
p after a rejection"; a one-hot draft), and a vectorised Monte Carlo of one verification
step that implements the same rule as :func:`acceptance.verify_sampling`.

Pure: numpy, torch and scipy; no streamlit, no plotly. All probabilities are float64
numpy arrays ``[V]`` (``V`` = number of tokens, 3..8 for hand-made rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.stats import chisquare

from .acceptance import (
    ResampleFrom,
    acceptance_total,
    accepted_token_distribution,
    final_distribution,
    residual_distribution,
)
from .errors import RuleInputError  # noqa: F401 - re-exported
from .sampling import SamplingConfig, logits_to_probs, tv_distance
from .trace import DistSlice, TokenInfo

MIN_TOKENS = 3
MAX_TOKENS = 8
DEFAULT_N = 20_000  # Monte Carlo draws per rule; the tests prove χ² separates the rules here
MAX_N = 200_000
SIGNIFICANCE = 0.01  # a χ² p-value above this: "consistent with the law under test"
CHUNK = 20_000  # draws per chunk (one progress-bar step); part of the seeded result
PAD_WEIGHT = 0.1  # weight of a row added when the student asks for more tokens
TEMPERATURE_GRID = np.round(np.linspace(0.0, 3.0, 61), 2)  # 0 = greedy, step 0.05

RuleName = Literal["correct", "resample_p", "one_hot"]
RULES: tuple[RuleName, ...] = ("correct", "resample_p", "one_hot")


@dataclass(frozen=True)
class RulePreset:
    """A named pair of rows: ``names`` ``[V]``, unnormalised weights ``p``/``q`` ``[V]``,
    and ``one_hot_token`` (0-based) — the token the one-hot draft rule proposes."""

    names: tuple[str, ...]
    p: tuple[float, ...]
    q: tuple[float, ...]
    one_hot_token: int


# The textbook rows are ``TEXTBOOK["distribution_cases"]`` in tests/data/textbook.json.
PRESETS: dict[str, RulePreset] = {
    "textbook": RulePreset(("t1", "t2", "t3"), (0.6, 0.3, 0.1), (0.2, 0.5, 0.3), 1),
    "identical": RulePreset(("t1", "t2", "t3"), (0.25, 0.25, 0.5), (0.25, 0.25, 0.5), 2),
    "forbidden": RulePreset(("t1", "t2", "t3"), (0.0, 0.7, 0.3), (0.5, 0.4, 0.1), 0),
    "one_hot": RulePreset(("t1", "t2", "t3"), (0.6, 0.3, 0.1), (0.0, 1.0, 0.0), 1),
}


def default_name(index: int) -> str:
    """Name of the ``index``-th (0-based) token of a hand-made row: ``t1``, ``t2``, …"""
    return f"t{index + 1}"


def resize(
    names: Sequence[str], p: Sequence[float], q: Sequence[float], n: int
) -> tuple[list[str], list[float], list[float]]:
    """Truncate, or pad with ``PAD_WEIGHT`` rows named ``t{i}``, to ``n`` tokens.

    Raises:
        RuleInputError: ``n`` outside ``MIN_TOKENS..MAX_TOKENS``.
    """
    if not MIN_TOKENS <= n <= MAX_TOKENS:
        raise RuleInputError(f"need {MIN_TOKENS}..{MAX_TOKENS} tokens, got {n}", "n_tokens", n=n)
    names, p, q = list(names)[:n], list(p)[:n], list(q)[:n]
    while len(names) < n:
        names.append(default_name(len(names)))
        p.append(PAD_WEIGHT)
        q.append(PAD_WEIGHT)
    return names, p, q


def normalise(weights: Sequence[float], row: str = "p") -> np.ndarray:
    """Non-negative weights ``[V]`` → a probability row ``[V]`` float64 (``w / Σ w``).

    Raises:
        RuleInputError: ``V`` outside 3..8, a missing/NaN/infinite or negative weight, or
            a row with no mass (codes ``n_tokens``, ``not_a_number``, ``negative``,
            ``no_mass``; ``params`` has ``row``).
    """
    w = np.asarray([np.nan if x is None else x for x in weights], dtype=np.float64)
    if not MIN_TOKENS <= w.size <= MAX_TOKENS:
        raise RuleInputError(
            f"need {MIN_TOKENS}..{MAX_TOKENS} tokens, got {w.size}", "n_tokens", n=w.size
        )
    if not np.isfinite(w).all():
        raise RuleInputError(f"{row}: every weight must be a number", "not_a_number", row=row)
    if (w < 0).any():
        raise RuleInputError(f"{row}: weights must be ≥ 0", "negative", row=row)
    total = w.sum()
    if total <= 0:
        raise RuleInputError(f"{row}: weights sum to 0", "no_mass", row=row)
    return w / total


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


# ---------------------------------------------------------------- the exact picture


@dataclass(frozen=True)
class Decomposition:
    """``p = min(p, q) + β·r`` for one pair of rows (all arrays ``[V]`` float64).

    Attributes:
        min_pq: the accept path ``min(p, q)`` (= ``q(x)·a(x)``).
        excess: the reject path ``β·r = [p − q]+``.
        residual: ``r = norm([p − q]+)``, ``None`` when ``β = 0`` (never evaluated).
        acceptance: ``A = Σ min(p, q)``; ``beta = 1 − A``; ``excess_total = Σ [p − q]+``;
        tv: ``TV(p, q) = ½ Σ |p − q|``; ``one_minus_tv = 1 − TV`` (equals ``A``).
        reconstructed: ``min(p, q) + [p − q]+``, which is ``p`` token by token.
        accepted_only: ``min(p, q) / A``, the law of accepted drafts; ``None`` if ``A = 0``.
    """

    p: np.ndarray
    q: np.ndarray
    min_pq: np.ndarray
    excess: np.ndarray
    residual: np.ndarray | None
    acceptance: float
    beta: float
    excess_total: float
    tv: float
    one_minus_tv: float
    reconstructed: np.ndarray
    accepted_only: np.ndarray | None


def decompose(p: np.ndarray, q: np.ndarray) -> Decomposition:
    """The exact decomposition of one verification step (Leviathan et al. 2023, §3.1).

    Args:
        p, q: ``[V]`` probability rows (float64; each sums to 1).
    """
    pt, qt = _t(p), _t(q)
    acceptance = float(acceptance_total(pt, qt))
    residual = residual_distribution(pt, qt)
    excess = (pt - qt).clamp_min(0.0)
    min_pq = torch.minimum(pt, qt)
    tv = float(tv_distance(pt, qt))
    return Decomposition(
        p=pt.numpy(),
        q=qt.numpy(),
        min_pq=min_pq.numpy(),
        excess=excess.numpy(),
        residual=None if residual is None else residual.numpy(),
        acceptance=acceptance,
        beta=1.0 - acceptance,
        excess_total=float(excess.sum()),
        tv=tv,
        one_minus_tv=1.0 - tv,
        reconstructed=(min_pq + excess).numpy(),
        accepted_only=accepted_token_distribution(pt, qt).numpy() if acceptance > 0 else None,
    )


@dataclass(frozen=True)
class RuleSetup:
    """One rule: the draft row it proposes from and where a rejection resamples from."""

    rule: RuleName
    q: np.ndarray
    resample_from: ResampleFrom


def rule_setups(q: np.ndarray, one_hot_token: int) -> dict[RuleName, RuleSetup]:
    """The three rules of the lab, in order :data:`RULES`.

    * ``correct``: propose from ``q``, accept with ``min(1, p/q)``, else draw from ``r``.
    * ``resample_p``: the same, but draw from ``p`` after a rejection (biased).
    * ``one_hot``: a deterministic draft of ``one_hot_token`` (``q = e_y``): accepted with
      ``p(y)``, residual ``p`` without ``y`` — still exactly ``p``.

    Raises:
        RuleInputError: ``one_hot_token`` out of range (code ``token``).
    """
    if not 0 <= one_hot_token < len(q):
        raise RuleInputError(f"token {one_hot_token} out of range", "token", k=one_hot_token)
    e_y = np.zeros(len(q), dtype=np.float64)
    e_y[one_hot_token] = 1.0
    return {
        "correct": RuleSetup("correct", np.asarray(q, dtype=np.float64), "residual"),
        "resample_p": RuleSetup("resample_p", np.asarray(q, dtype=np.float64), "target"),
        "one_hot": RuleSetup("one_hot", e_y, "residual"),
    }


@dataclass(frozen=True)
class RuleResult:
    """A rule's exact output: ``final`` ``[V]`` (the law of the emitted token),
    ``tv_to_p = TV(final, p)`` (0 for a lossless rule) and its acceptance ``A``."""

    rule: RuleName
    final: np.ndarray
    tv_to_p: float
    acceptance: float


def compare_rules(p: np.ndarray, q: np.ndarray, one_hot_token: int) -> dict[RuleName, RuleResult]:
    """Exact final distribution of every rule via :func:`acceptance.final_distribution`.

    Textbook ``p = [.6, .3, .1]``, ``q = [.2, .5, .3]``: correct → ``p``; resample from p →
    ``[.44, .42, .14]`` (TV 0.16); one-hot on token 2 → ``p`` with ``A = 0.3``.
    """
    pt = _t(p)
    out: dict[RuleName, RuleResult] = {}
    for name, setup in rule_setups(q, one_hot_token).items():
        qt = _t(setup.q)
        final = final_distribution(pt, qt, resample_from=setup.resample_from)
        out[name] = RuleResult(
            rule=name,
            final=final.numpy(),
            tv_to_p=float(tv_distance(final, pt)),
            acceptance=float(acceptance_total(pt, qt)),
        )
    return out


# ---------------------------------------------------------------- Monte Carlo


def sample_position(
    p: torch.Tensor,
    q: torch.Tensor,
    n: int,
    generator: torch.Generator,
    resample_from: ResampleFrom = "residual",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` independent single-position verifications, vectorised.

    The rule of :func:`acceptance.verify_sampling` with γ = 1, for ``n`` draws at once:
    ``y ~ q``, ``u ~ U[0, 1)``, accept ``y`` iff ``u < min(1, p(y)/q(y))``; otherwise emit
    a draw from ``r = norm([p − q]+)`` (``resample_from="residual"``; ``p`` if ``r`` is
    undefined, exactly as ``verify_sampling`` does) or from ``p`` (``"target"``).

    Args:
        p, q: ``[V]`` float64 (or float32) CPU probability rows.
        n: number of draws ≥ 0.
        generator: CPU ``torch.Generator``; draws in order: all ``y``, all ``u``, then the
            resampled tokens for the rejected draws.

    Returns:
        ``(tokens, accepted)``: ``[n]`` int64 emitted tokens and ``[n]`` bool acceptance.
    """
    if n == 0:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.bool)
    y = torch.multinomial(q, n, replacement=True, generator=generator)  # [n]
    u = torch.rand(n, generator=generator, dtype=torch.float64)  # [n]
    accepted = accept_mask(p, q, y, u)
    tokens = y.clone()
    n_rejected = int((~accepted).sum())
    if n_rejected:
        source = p
        if resample_from == "residual":
            residual = residual_distribution(p, q)
            source = p if residual is None else residual
        tokens[~accepted] = torch.multinomial(source, n_rejected, replacement=True,
                                              generator=generator)  # fmt: skip
    return tokens, accepted


def accept_mask(p: torch.Tensor, q: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``u < min(1, p(y)/q(y))`` elementwise: ``y`` ``[n]`` int64 drafted tokens (each with
    ``q(y) > 0``), ``u`` ``[n]`` uniforms → ``[n]`` bool (Leviathan et al. 2023, Alg. 1)."""
    ratio = (p[y] / q[y]).clamp(max=1.0)
    return u < ratio


@dataclass(frozen=True)
class ChiSquare:
    """Pearson χ² goodness of fit of ``counts`` to ``probs``.

    ``impossible`` counts draws that landed where the law has probability 0: any such draw
    is an outright failure (``p_value = 0``). ``dof`` = categories with mass − 1.
    """

    statistic: float
    p_value: float
    dof: int
    impossible: int

    @property
    def consistent(self) -> bool:
        """``p_value > SIGNIFICANCE``: the draws are consistent with the law."""
        return self.p_value > SIGNIFICANCE


def chi_square(counts: np.ndarray, probs: np.ndarray) -> ChiSquare:
    """χ² test (``scipy.stats.chisquare``) over the categories with ``probs > 0``.

    Args:
        counts: ``[V]`` int observed counts (total ``N``).
        probs: ``[V]`` the law under test (sums to 1).
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    support = probs > 0
    impossible = int(counts[~support].sum())
    n = counts.sum()
    dof = int(support.sum()) - 1
    if impossible:
        return ChiSquare(math.inf, 0.0, dof, impossible)
    if dof < 1 or n == 0:  # one possible outcome: nothing to test
        return ChiSquare(0.0, 1.0, max(dof, 0), 0)
    expected = probs[support] / probs[support].sum() * n
    result = chisquare(counts[support], expected)
    return ChiSquare(float(result.statistic), float(result.pvalue), dof, 0)


@dataclass(frozen=True)
class MonteCarlo:
    """``n`` simulated verifications of one rule (arrays ``[V]``).

    Attributes:
        counts: emitted-token counts; ``freq = counts / n``; ``stderr`` the binomial
            standard error ``sqrt(f (1 − f) / n)`` of each frequency.
        accepted_counts: counts of the *accepted* drafts only (``n_accepted`` in all);
            ``accepted_freq``/``accepted_stderr`` likewise (over ``n_accepted``).
        acceptance_rate: ``n_accepted / n`` (estimates ``A``).
        fit: χ² of ``counts`` against ``p``.
        accepted_fit: χ² of ``accepted_counts`` against ``min(p, q)/A`` (``None`` if
            ``A = 0``), and ``accepted_vs_p`` against ``p``.
    """

    rule: RuleName
    n: int
    seed: int
    counts: np.ndarray
    freq: np.ndarray
    stderr: np.ndarray
    accepted_counts: np.ndarray
    n_accepted: int
    accepted_freq: np.ndarray
    accepted_stderr: np.ndarray
    acceptance_rate: float
    fit: ChiSquare
    accepted_fit: ChiSquare | None
    accepted_vs_p: ChiSquare


def _freq(counts: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    if total == 0:
        zeros = np.zeros(len(counts))
        return zeros, zeros
    f = counts / total
    return f, np.sqrt(f * (1.0 - f) / total)


def monte_carlo(
    p: np.ndarray,
    q: np.ndarray,
    rule: RuleName,
    n: int = DEFAULT_N,
    seed: int = 0,
    one_hot_token: int = 0,
    progress: Callable[[float], None] | None = None,
) -> MonteCarlo:
    """Simulate ``n`` verifications of ``rule`` with :func:`sample_position`.

    Seeded: a fresh ``torch.Generator().manual_seed(seed)`` per call, draws in chunks of
    :data:`CHUNK` (``progress(fraction_done)`` after each), so the same inputs give the same
    counts on every machine and for every student in a class.

    Raises:
        RuleInputError: ``n`` outside ``1..MAX_N`` (code ``n_draws``).
    """
    if not 1 <= n <= MAX_N:
        raise RuleInputError(f"draws must be 1..{MAX_N}, got {n}", "n_draws", n=n)
    setup = rule_setups(q, one_hot_token)[rule]
    pt, qt = _t(p), _t(setup.q)
    generator = torch.Generator().manual_seed(int(seed))
    v = len(p)
    counts = np.zeros(v, dtype=np.int64)
    acc_counts = np.zeros(v, dtype=np.int64)
    done = 0
    while done < n:
        size = min(CHUNK, n - done)
        tokens, accepted = sample_position(pt, qt, size, generator, setup.resample_from)
        counts += np.bincount(tokens.numpy(), minlength=v)
        acc_counts += np.bincount(tokens[accepted].numpy(), minlength=v)
        done += size
        if progress is not None:
            progress(done / n)
    n_acc = int(acc_counts.sum())
    freq, stderr = _freq(counts, n)
    acc_freq, acc_stderr = _freq(acc_counts, n_acc)
    exact = decompose(pt.numpy(), qt.numpy())
    return MonteCarlo(
        rule=rule,
        n=n,
        seed=int(seed),
        counts=counts,
        freq=freq,
        stderr=stderr,
        accepted_counts=acc_counts,
        n_accepted=n_acc,
        accepted_freq=acc_freq,
        accepted_stderr=acc_stderr,
        acceptance_rate=n_acc / n,
        fit=chi_square(counts, pt.numpy()),
        accepted_fit=(
            None if exact.accepted_only is None else chi_square(acc_counts, exact.accepted_only)
        ),
        accepted_vs_p=chi_square(acc_counts, pt.numpy()),
    )


# ---------------------------------------------------------------- temperature


def temper(p: np.ndarray, temperature: float) -> np.ndarray:
    """Apply ``temperature`` to a row's logits ``log p`` with the engine's own sampler
    (:func:`sampling.logits_to_probs`): ``softmax(log p / T)``; zero-probability tokens
    have logit ``−∞`` and stay at 0; ``T = 0`` is greedy (one-hot on the argmax, lowest
    index on ties). ``[V]`` → ``[V]`` float64 (computed in float32, like the models)."""
    with np.errstate(divide="ignore"):
        logits = torch.as_tensor(np.log(np.asarray(p, dtype=np.float64)))
    probs = logits_to_probs(logits, SamplingConfig(temperature=float(temperature)))
    out = probs.double()
    return (out / out.sum()).numpy()


def acceptance_at(p: np.ndarray, q: np.ndarray, temperature: float) -> float:
    """``A(T) = Σ min(p_T, q_T)`` with both rows tempered by :func:`temper`."""
    return float(acceptance_total(_t(temper(p, temperature)), _t(temper(q, temperature))))


def acceptance_curve(
    p: np.ndarray, q: np.ndarray, temperatures: Sequence[float] = tuple(TEMPERATURE_GRID)
) -> np.ndarray:
    """``A(T)`` over a grid of temperatures: ``[len(temperatures)]`` float64."""
    return np.array([acceptance_at(p, q, t) for t in temperatures], dtype=np.float64)


# ---------------------------------------------------------------- real model rows


@dataclass(frozen=True)
class SliceRows:
    """Hand-lab rows built from a model position: ``tokens`` (the named ones, ``[K]``),
    ``p``/``q`` ``[K + 1]`` float64 with the last entry the "other" bucket (the rest of
    each row's mass), and ``true_acceptance`` = ``Σ min(p, q)`` over the full vocabulary
    (lumping tokens into "other" can only raise ``A``)."""

    tokens: tuple[TokenInfo, ...]
    p: np.ndarray
    q: np.ndarray
    true_acceptance: float


def rows_from_slice(
    dist: DistSlice, keep: Sequence[int] = (), max_named: int = MAX_TOKENS - 1
) -> SliceRows:
    """Top tokens of a verified position's :class:`DistSlice` (in the slice's order, i.e.
    by ``p``) plus one "other" bucket, renormalised (float32 rows sum to 1 only up to
    rounding). Token ids in ``keep`` (the drafted token) are always named if in the slice.

    Raises:
        RuleInputError: the slice has no ``p`` or ``q`` (an unverified or bonus position;
            code ``no_rows``).
    """
    if dist.p is None or dist.q is None or dist.min_pq is None:
        raise RuleInputError("this position has no verified p and q", "no_rows")
    ids = dist.token_ids.tolist()
    forced = [ids.index(i) for i in dict.fromkeys(keep) if i in ids][:max_named]
    rest = [j for j in range(len(ids)) if j not in forced]
    chosen = sorted(forced + rest[: max(max_named - len(forced), 0)])
    p_named = dist.p[chosen].astype(np.float64)
    q_named = dist.q[chosen].astype(np.float64)
    p = np.append(p_named, max(1.0 - p_named.sum(), 0.0))
    q = np.append(q_named, max(1.0 - q_named.sum(), 0.0))
    true_a = float(dist.min_pq.astype(np.float64).sum() + dist.min_other)
    tokens = tuple(dist.tokens[j] for j in chosen)
    return SliceRows(tokens, p / p.sum(), q / q.sum(), true_a)
