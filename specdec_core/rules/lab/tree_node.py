"""Several candidates at one node of a token tree: the exact law of the emitted token under
the SpecInfer residual rule (lossless) and the naive "any sibling accepted by
``min(1, p/q)``" rule (biased), for the lab's rows.

The ``k`` siblings are drawn i.i.d. from ``q``; for every ordered tuple of candidates (only
tokens with ``q > 0``: the draft cannot propose the others) the engine's
:func:`specdec_core.rules.acceptance.node_output_distribution` gives the exact output for
those fixed candidates, and the tuple's weight is ``Π q(x_i)``. With ``V ≤ 8`` and ``k ≤ 4`` that is
at most ``8⁴ = 4096`` tuples. The naive rule's output has the closed form
``min(p, q)·(1 + β + … + β^{k−1}) + β^k·r`` (``β = 1 − Σ min(p, q)``, ``r = norm([p − q]+)``):
every sibling is re-tested against the original ``p``, so the draft gets ``k`` chances.

Pure: numpy and torch; float64 rows ``[V]``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from specdec_core.core.errors import RuleInputError
from specdec_core.core.sampling import tv_distance
from specdec_core.rules.acceptance import TreeRule, node_output_distribution, node_steps
from specdec_core.rules.lab.rows import as_tensor, check_weights

__all__ = ["MAX_SIBLINGS", "TREE_RULES", "TreeNodeResult", "node_rules"]

MAX_SIBLINGS = 4
TREE_RULES: tuple[TreeRule, ...] = ("residual", "naive")


@dataclass(frozen=True)
class TreeNodeResult:
    """One rule at one node with ``k`` i.i.d. siblings.

    Attributes:
        final: ``[V]`` float64, the exact law of the emitted token.
        tv_to_p: ``TV(final, p)`` (0 for a lossless rule).
        accept_prob: the probability that some sibling is accepted (no correction draw).
    """

    rule: TreeRule
    k: int
    final: np.ndarray
    tv_to_p: float
    accept_prob: float


def _row(x: object, name: str) -> np.ndarray:
    try:
        row = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RuleInputError(f"{name}: not a row of numbers", "not_a_number", row=name) from exc
    row = check_weights(row, name)
    if abs(row.sum() - 1.0) > 1e-6:
        raise RuleInputError(
            f"{name}: not a probability row (sums to {row.sum()})", "not_probability", row=name
        )
    return row


def node_rules(p: np.ndarray, q: np.ndarray, k: int) -> dict[TreeRule, TreeNodeResult]:
    """Exact output of each rule in :data:`TREE_RULES` at one node with ``k`` siblings.

    Textbook ``p = [.6, .3, .1]``, ``q = [.2, .5, .3]``: residual → ``p`` for every ``k``;
    naive, ``k = 2`` → ``[.44, .42, .14]`` (TV 0.16).

    Args:
        p, q: ``[V]`` probability rows (``V`` in 3..8, each summing to 1).
        k: number of sibling candidates, 1..:data:`MAX_SIBLINGS`.

    Raises:
        RuleInputError: ``k`` not a whole number in range (code ``bad_value``), rows of
            different lengths or not probability rows (``n_tokens``, ``not_a_number``,
            ``negative``, ``not_probability``).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_SIBLINGS:
        raise RuleInputError(
            f"k must be a whole number from 1 to {MAX_SIBLINGS}, got {k!r}",
            "bad_value",
            what="k",
            low=1,
            high=MAX_SIBLINGS,
            value=str(k)[:20],
        )
    k = int(k)
    p_row, q_row = _row(p, "p"), _row(q, "q")
    if p_row.size != q_row.size:
        raise RuleInputError(f"p has {p_row.size} tokens, q {q_row.size}", "n_tokens", n=q_row.size)
    pt, qt = as_tensor(p_row), as_tensor(q_row)
    support = [x for x in range(len(q_row)) if q_row[x] > 0.0]
    out: dict[TreeRule, TreeNodeResult] = {}
    for rule in TREE_RULES:
        final = torch.zeros_like(pt)
        accept = 0.0
        for kids in itertools.product(support, repeat=k):
            weight = float(np.prod(q_row[list(kids)]))
            final += weight * node_output_distribution(pt, qt, kids, rule)
            reject = float(np.prod([1.0 - a for a in node_steps(pt, qt, kids, rule).accept_probs]))
            accept += weight * (1.0 - reject)
        out[rule] = TreeNodeResult(
            rule=rule,
            k=k,
            final=final.numpy(),
            tv_to_p=float(tv_distance(final, pt)),
            accept_prob=accept,
        )
    return out
