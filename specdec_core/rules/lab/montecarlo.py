"""Monte Carlo of one verification step per rule (the vectorised rule of
:mod:`specdec_core.rules.batch`), checked against the exact laws with Pearson's χ²."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import chisquare

from specdec_core.core.errors import RuleInputError
from specdec_core.rules.batch import sample_position
from specdec_core.rules.lab.exact import RuleName, decompose, rule_setups
from specdec_core.rules.lab.rows import as_tensor

__all__ = [
    "CHUNK",
    "DEFAULT_N",
    "MAX_N",
    "SIGNIFICANCE",
    "ChiSquare",
    "MonteCarlo",
    "chi_square",
    "monte_carlo",
]

DEFAULT_N = 20_000  # Monte Carlo draws per rule; the tests prove χ² separates the rules here
MAX_N = 200_000
SIGNIFICANCE = 0.01  # a χ² p-value above this: "consistent with the law under test"
CHUNK = 20_000  # draws per chunk (one progress-bar step); part of the seeded result


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
    pt, qt = as_tensor(p), as_tensor(setup.q)
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
