"""Acceptance against temperature: both rows tempered by the engine's own sampler,
``A(T) = Σ min(p_T, q_T)``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.rules.acceptance import acceptance_total
from specdec_core.rules.lab.rows import as_tensor

__all__ = ["TEMPERATURE_GRID", "acceptance_at", "acceptance_curve", "temper"]

TEMPERATURE_GRID = np.round(np.linspace(0.0, 3.0, 61), 2)  # 0 = greedy, step 0.05


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
    return float(
        acceptance_total(as_tensor(temper(p, temperature)), as_tensor(temper(q, temperature)))
    )


def acceptance_curve(
    p: np.ndarray, q: np.ndarray, temperatures: Sequence[float] = tuple(TEMPERATURE_GRID)
) -> np.ndarray:
    """``A(T)`` over a grid of temperatures: ``[len(temperatures)]`` float64."""
    return np.array([acceptance_at(p, q, t) for t in temperatures], dtype=np.float64)
