"""The acceptance rule at one node of a token tree: several candidate children, one
verdict (Miao et al. 2024, "SpecInfer", multi-step speculative sampling; the same
recursion as Chen et al. 2023 applied to siblings instead of depths).

At a node the draft proposes ``k`` children ``x_1..x_k`` drawn **i.i.d. from the same
q** (``q`` is the draft's distribution at that node, after temperature/top-k/top-p). The
target's distribution there is ``p``. In order, for ``i = 1..k``:

* accept ``x_i`` with probability ``min(1, p_i(x_i) / q(x_i))``, where ``p_1 = p``;
* on a rejection the target's distribution becomes the residual
  ``p_{i+1} = norm([p_i − q]+)`` and the next sibling is tried against it;
* if every sibling is rejected, the correction is drawn from ``p_{k+1}``.

Each step is the chain rule's step with ``p`` replaced by the current residual, so by the
chain rule's argument (Leviathan et al. 2023, Thm 3.5) the emitted token follows ``p``
exactly: ``min(p_i, q) + β_i · p_{i+1} = p_i`` with ``β_i = 1 − Σ min(p_i, q)``, and
induction over the siblings gives ``p``. A one-hot ``q`` (greedy drafts) is allowed.

Beyond the paper, for teaching: ``rule="naive"`` tests every sibling against the
*original* ``p`` ("any sibling accepted by min(1, p/q)") and draws the correction from
``norm([p − q]+)``; its output is ``min(p, q)·(1 + β + … + β^{k−1}) + β^k · r``, biased
towards the draft whenever ``k ≥ 2`` and ``β > 0`` (:func:`node_output_distribution`).

Shapes: ``p, q`` are ``[V]`` float rows; candidates are ``k`` token ids. Pure module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from specdec_core.rules.acceptance import residual_distribution

TreeRule = Literal["residual", "naive"]


@dataclass(frozen=True)
class NodeSteps:
    """The deterministic part of one node's verdict: ``accept_probs[i]`` for sibling
    ``i`` (given siblings ``< i`` were rejected) and ``targets[i]``, the distribution
    sibling ``i`` is tested against (``targets[k]``: where the correction is drawn)."""

    accept_probs: tuple[float, ...]
    targets: tuple[torch.Tensor, ...]


def node_steps(
    p: torch.Tensor, q: torch.Tensor, candidates: Sequence[int], rule: TreeRule = "residual"
) -> NodeSteps:
    """Accept probabilities and the residual chain at one node (see the module doc).

    Raises:
        ValueError: a candidate with ``q(x) = 0`` (the draft could not have proposed it).
    """
    current = p
    probs: list[float] = []
    targets = [p]
    for x in candidates:
        q_x = float(q[x])
        if q_x <= 0.0:
            raise ValueError(f"q(x) must be > 0 for a proposed child, got {q_x}")
        probs.append(min(1.0, float(current[x]) / q_x))
        residual = residual_distribution(current, q)
        if rule == "residual":  # None only if current == q: the next sibling is accepted surely
            current = current if residual is None else residual
        else:
            base = residual_distribution(p, q)
            current = p if len(probs) < len(candidates) else (p if base is None else base)
        targets.append(current)
    return NodeSteps(tuple(probs), tuple(targets))


def node_output_distribution(
    p: torch.Tensor, q: torch.Tensor, candidates: Sequence[int], rule: TreeRule = "residual"
) -> torch.Tensor:
    """The exact distribution of the token a node emits for fixed ``candidates``:
    ``Σ_i (Π_{j<i}(1 − a_j)) a_i δ(x_i) + Π_j (1 − a_j) · targets[k]``. Average it over
    candidates drawn i.i.d. from ``q`` to get the node's output distribution."""
    steps = node_steps(p, q, candidates, rule)
    out = torch.zeros_like(p)
    reach = 1.0
    for x, a in zip(candidates, steps.accept_probs, strict=True):
        out[x] += reach * a
        reach *= 1.0 - a
    return out + reach * steps.targets[-1]


@dataclass(frozen=True)
class NodeVerdict:
    """``accepted``: index of the accepted sibling, or ``None`` (then ``token`` is the
    correction drawn from the last residual). ``u``: the uniform draws used, in order."""

    accepted: int | None
    token: int
    accept_probs: tuple[float, ...]
    u: tuple[float, ...]


def verify_node(
    p: torch.Tensor,
    q: torch.Tensor,
    candidates: Sequence[int],
    generator: torch.Generator,
    rule: TreeRule = "residual",
) -> NodeVerdict:
    """One node's verdict by sampling: ``u_i ~ U[0, 1)`` per sibling in order (from
    ``generator``, so a round replays), then the correction draw if all are rejected.
    With no candidates the token is drawn from ``p`` (a bonus at a leaf)."""
    steps = node_steps(p, q, candidates, rule)
    draws: list[float] = []
    for i, (x, a) in enumerate(zip(candidates, steps.accept_probs, strict=True)):
        u = torch.rand((), generator=generator).item()
        draws.append(u)
        if u < a:
            return NodeVerdict(i, int(x), steps.accept_probs, tuple(draws))
    source = steps.targets[-1]
    token = int(torch.multinomial(source, 1, generator=generator).item())
    return NodeVerdict(None, token, steps.accept_probs, tuple(draws))
