"""The rows the lab works on: presets, hand-edited weights normalised (3–8 named tokens),
and rows taken from a real model position (the top tokens plus an "other" bucket).

All probabilities are float64 numpy arrays ``[V]``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specdec_core.core.errors import RuleInputError
from specdec_core.core.trace import DistSlice, TokenInfo

__all__ = [
    "MIN_TOKENS",
    "MAX_TOKENS",
    "PAD_WEIGHT",
    "PRESETS",
    "RulePreset",
    "SliceRows",
    "default_name",
    "normalise",
    "resize",
    "rows_from_slice",
]

MIN_TOKENS = 3
MAX_TOKENS = 8
PAD_WEIGHT = 0.1  # weight of a row added when the student asks for more tokens


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


def check_weights(w: np.ndarray, row: str) -> np.ndarray:
    """``w`` as a float64 row ``[V]`` of finite, non-negative weights, ``V`` in 3..8.

    Raises:
        RuleInputError: codes ``n_tokens`` (not one row of 3..8), ``not_a_number``,
            ``negative``; ``params`` has ``row`` (or ``n``).
    """
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 1 or not MIN_TOKENS <= w.size <= MAX_TOKENS:
        got = w.size if w.ndim == 1 else f"shape {w.shape}"
        raise RuleInputError(
            f"need {MIN_TOKENS}..{MAX_TOKENS} tokens, got {got}", "n_tokens", n=w.size
        )
    if not np.isfinite(w).all():
        raise RuleInputError(f"{row}: every weight must be a number", "not_a_number", row=row)
    if (w < 0).any():
        raise RuleInputError(f"{row}: weights must be ≥ 0", "negative", row=row)
    return w


def normalise(weights: Sequence[float], row: str = "p") -> np.ndarray:
    """Non-negative weights ``[V]`` → a probability row ``[V]`` float64 (``w / Σ w``).

    Raises:
        RuleInputError: ``V`` outside 3..8, a missing/NaN/infinite or negative weight, or
            a row with no mass (codes ``n_tokens``, ``not_a_number``, ``negative``,
            ``no_mass``; ``params`` has ``row``).
    """
    w = check_weights(np.asarray([np.nan if x is None else x for x in weights]), row)
    total = w.sum()
    if total <= 0:
        raise RuleInputError(f"{row}: weights sum to 0", "no_mass", row=row)
    return w / total


def as_tensor(x: np.ndarray) -> torch.Tensor:
    """A row ``[V]`` as a float64 tensor, for the engine's rules in
    :mod:`specdec_core.rules.acceptance`."""
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


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
            code ``no_rows``), or names fewer than ``MIN_TOKENS − 1`` tokens (at temperature
            0 a position where the draft agreed with the target: ``p`` and ``q`` are one-hot
            on the same token, code ``one_token``, param ``token``).
    """
    if dist.p is None or dist.q is None or dist.min_pq is None:
        raise RuleInputError("this position has no verified p and q", "no_rows")
    ids = dist.token_ids.tolist()
    if len(ids) < MIN_TOKENS - 1:
        token = dist.tokens[0].text if dist.tokens else ""
        raise RuleInputError(
            f"p and q put all their mass on {token!r}: nothing for the rule to weigh",
            "one_token",
            token=token,
        )
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
