"""The verification rules of speculative decoding (Leviathan et al. 2023, "Fast Inference
from Transformers via Speculative Decoding"; Chen et al. 2023, "Accelerating LLM Decoding
with Speculative Sampling").

``p`` is the target's row (``target_probs``), ``q`` the draft's (``draft_probs``), both
``[V]`` after temperature/top-k/top-p; ``p_i``, ``q_i``, ``y_i`` at drafted position ``i``
(1-based), γ drafts. Acceptance probability ``a_i = min(1, p_i(y_i) / q_i(y_i))``; residual
``r_i = norm([p_i − q_i]+)`` (``None`` when it has no mass: ``p == q``, no rejection can
happen). A round emits the accepted prefix plus one token: the *correction* from ``r_k``
at the first rejection ``k``, or the *bonus* from ``p_{γ+1}``; either way the emitted
tokens follow ``p`` exactly (Leviathan Thm 3.5). A one-hot ``q`` (greedy draft, prompt
lookup, an edit) is valid: ``a = p(y)``, ``r = p`` without ``y``, still exact.

At one tree node (Miao et al. 2024, "SpecInfer", multi-step speculative sampling: Chen et
al.'s recursion over siblings instead of depths) the draft proposes ``k`` children
``x_1..x_k`` drawn i.i.d. from one ``q``; in order, ``x_i`` is accepted with
``min(1, p_i(x_i) / q(x_i))`` where ``p_1 = p`` and ``p_{i+1} = norm([p_i − q]+)`` after a
rejection; when all are rejected the correction comes from ``p_{k+1}``. Each step is the
chain's with ``p`` replaced by the current residual, so the emitted token follows ``p``:
``min(p_i, q) + β_i · p_{i+1} = p_i``, ``β_i = 1 − Σ min(p_i, q)``, by induction.

Beyond the papers, for teaching: ``resample_from="target"`` is the *wrong* rule (resample
from ``p``), biased; the tree node's ``rule="naive"`` tests every sibling against the
*original* ``p`` and draws the correction from ``norm([p − q]+)``, biased towards the draft
when ``k ≥ 2`` and ``β > 0`` (output ``min(p, q)·(1 + β + … + β^{k−1}) + β^k · r``,
:func:`node_output_distribution`). The lab page shows both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import torch

ResampleFrom = Literal["residual", "target"]
TreeRule = Literal["residual", "naive"]


@dataclass(frozen=True)
class Verdict:
    """What one verification decided: ``accepted`` ``n`` (0..γ, drafts ``y_1..y_n`` kept),
    ``next_token`` (the correction at ``n + 1``, or the bonus), ``kind``, ``accept_probs``
    ``a_i`` for positions 1..γ (greedy: 1.0 on a match, else 0.0), ``u`` the uniform draws
    used, one per checked position (empty when greedy)."""

    accepted: int
    next_token: int
    kind: Literal["correction", "bonus"]
    accept_probs: tuple[float, ...]
    u: tuple[float, ...]


@dataclass(frozen=True)
class BlockDecision:
    """What block verification (``rules/block.py``, an alternative rule) computed and
    decided, for the round's record and the CLI JSON: ``weights`` ``p'_1..p'_γ``,
    ``stop_probs`` ``h_1..h_γ``, ``u`` ``η_1..η_γ``, ``kept`` τ, ``token_wise`` (what
    token-wise verification keeps with the same draws), ``resample_position`` τ + 1 (γ + 1:
    the bonus row), ``residual_mass`` ``S_τ``, ``residual_ids`` / ``residual_probs`` (the
    largest of ``r_τ``, zeros left out)."""

    weights: tuple[float, ...]
    stop_probs: tuple[float, ...]
    u: tuple[float, ...]
    kept: int
    token_wise: int
    resample_position: int
    residual_mass: float
    residual_ids: tuple[int, ...]
    residual_probs: tuple[float, ...]

    def to_json(self) -> dict:
        """The CLI's per-round ``block``."""
        out = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def acceptance_total(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``A = Σ min(p, q) = 1 − TV(p, q)``, the chance a draft from ``q`` is accepted
    (Leviathan et al. 2023, Def. 3.1 / Lemma 3.3). ``[..., V]`` → ``[...]``."""
    return torch.minimum(p, q).sum(dim=-1)


def acceptance_probability(p_y: float, q_y: float) -> float:
    """``a = min(1, p(y) / q(y))`` for a drafted token ``y``. Raises ValueError when
    ``q(y) <= 0`` (the draft could never have proposed ``y``)."""
    if q_y <= 0.0:
        raise ValueError(f"q(y) must be > 0 for a proposed token, got {q_y}")
    return min(1.0, p_y / q_y)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor | None:
    """``r = norm([p − q]+)`` for ``[V]`` rows (same dtype), ``None`` when it has no mass
    (``p == q``: a rejection is impossible, the 0/0 is never evaluated)."""
    positive = (p - q).clamp_min(0.0)
    mass = positive.sum()
    if mass.item() <= 0.0:
        return None
    return positive / mass


def final_distribution(
    p: torch.Tensor, q: torch.Tensor, resample_from: ResampleFrom = "residual"
) -> torch.Tensor:
    """The exact law of the token one verification step emits, ``[V] → [V]``:
    ``P(x) = min(p(x), q(x)) + β·s(x)``, ``β = 1 − Σ min(p, q)``, ``s = r`` (the rule: gives
    ``p``) or ``s = p`` (the wrong "resample from the target" rule)."""
    accept_path = torch.minimum(p, q)
    beta = 1.0 - accept_path.sum()
    if resample_from == "target":
        return accept_path + beta * p
    residual = residual_distribution(p, q)
    if residual is None:
        return accept_path
    return accept_path + beta * residual


def accepted_token_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The drafted token's distribution *given that it was accepted*, ``min(p, q) / A``
    (not ``p``: only with the corrections do they give ``p``). ``[V] → [V]``."""
    accept_path = torch.minimum(p, q)
    return accept_path / accept_path.sum()


def greedy_accepted_length(draft_ids: Sequence[int], target_argmax: Sequence[int]) -> int:
    """The greedy rule: how many leading drafts ``[γ]`` equal the target's argmax
    ``[≥ γ]`` (``γ`` when all do)."""
    for i, (y, a) in enumerate(zip(draft_ids, target_argmax, strict=False)):
        if y != a:
            return i
    return len(draft_ids)


def greedy_overlaps(draft_ids: Sequence[int], target_argmax: Sequence[int]) -> list[float]:
    """``Σ min(p_i, q_i)`` of one-hot rows (temperature 0): 1.0 where ``y_i`` is the
    argmax, else 0.0, without building the rows."""
    return [1.0 if y == a else 0.0 for y, a in zip(draft_ids, target_argmax, strict=False)]


def verify_greedy(draft_ids: torch.Tensor, target_probs: torch.Tensor) -> Verdict:
    """Greedy verification: accept while ``y_i == argmax p_i``; the correction is the
    argmax at the first mismatch, the bonus ``argmax p_{γ+1}``. ``draft_ids`` ``[γ]``
    int64 (γ may be 0), ``target_probs`` ``[γ + 1, V]`` (logits work too)."""
    gamma = draft_ids.shape[0]
    target_argmax = target_probs.argmax(dim=-1).tolist()
    drafts = draft_ids.tolist()
    n = greedy_accepted_length(drafts, target_argmax)
    return Verdict(
        accepted=n,
        next_token=target_argmax[n],
        kind="bonus" if n == gamma else "correction",
        accept_probs=tuple(greedy_overlaps(drafts, target_argmax)),
        u=(),
    )


def verify_sampling(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
    resample_from: ResampleFrom = "residual",
) -> Verdict:
    """Speculative sampling (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2).

    For ``i = 1..γ``: draw ``u_i ~ U[0, 1)`` and accept ``y_i`` while ``u_i < a_i``. At the
    first rejection ``k`` draw the correction from ``r_k`` and discard ``y_{k+1}..y_γ``
    unchecked; if all are accepted draw the bonus from ``p_{γ+1}``.

    Args:
        draft_ids: ``[γ]`` int64 CPU. draft_probs: ``[γ, V]`` float32 ``q_1..q_γ`` (one-hot
            rows for deterministic proposals). target_probs: ``[γ + 1, V]`` float32.
        generator: CPU ``torch.Generator``; every draw comes from it, in order
            ``u_1, u_2, …`` then the correction/bonus draw, so a round replays exactly.
        resample_from: ``"residual"`` (the rule) or ``"target"`` (biased, teaching only).
    """
    gamma = draft_ids.shape[0]
    # p_i(y_i), q_i(y_i) read through numpy views of the CPU rows (no torch op per read)
    p_rows, q_rows = target_probs.numpy(), draft_probs.numpy()
    pairs = [(float(p_rows[i, y]), float(q_rows[i, y])) for i, y in enumerate(draft_ids.tolist())]
    accept_probs = tuple(acceptance_probability(p, q) for p, q in pairs)
    draws: list[float] = []
    for i in range(gamma):
        u = torch.rand((), generator=generator).item()
        draws.append(u)
        if not u < accept_probs[i]:
            source = target_probs[i]
            if resample_from == "residual":
                residual = residual_distribution(target_probs[i], draft_probs[i])
                # ``None`` only when p == q up to rounding: a probability-0 event, use p.
                source = target_probs[i] if residual is None else residual
            token = int(torch.multinomial(source, 1, generator=generator).item())
            return Verdict(i, token, "correction", accept_probs, tuple(draws))
    token = int(torch.multinomial(target_probs[gamma], 1, generator=generator).item())
    return Verdict(gamma, token, "bonus", accept_probs, tuple(draws))


@dataclass(frozen=True)
class NodeSteps:
    """The deterministic part of one node's verdict: ``accept_probs[i]`` for sibling ``i``
    (siblings ``< i`` rejected) and ``targets[i]``, the row it is tested against
    (``targets[k]``: where the correction is drawn)."""

    accept_probs: tuple[float, ...]
    targets: tuple[torch.Tensor, ...]


def node_steps(
    p: torch.Tensor, q: torch.Tensor, candidates: Sequence[int], rule: TreeRule = "residual"
) -> NodeSteps:
    """Accept probabilities and the residual chain at one tree node (module doc); ``p, q``
    ``[V]``, ``k`` candidate ids. Raises ValueError for a candidate with ``q(x) = 0``."""
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
    """The exact law of the token a node emits for fixed ``candidates``:
    ``Σ_i (Π_{j<i}(1 − a_j)) a_i δ(x_i) + Π_j (1 − a_j) · targets[k]``; averaged over
    candidates drawn i.i.d. from ``q`` it is the node's output law. ``[V]``."""
    steps = node_steps(p, q, candidates, rule)
    out = torch.zeros_like(p)
    reach = 1.0
    for x, a in zip(candidates, steps.accept_probs, strict=True):
        out[x] += reach * a
        reach *= 1.0 - a
    return out + reach * steps.targets[-1]


@dataclass(frozen=True)
class NodeVerdict:
    """``accepted``: the accepted sibling's index, or ``None`` (``token`` is then the
    correction from the last residual); ``u``: the uniform draws used, in order."""

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
    """One tree node's verdict by sampling: ``u_i ~ U[0, 1)`` per sibling in order (from
    ``generator``, so a round replays), then the correction draw if all are rejected. With
    no candidates the token is drawn from ``p`` (a bonus at a leaf)."""
    steps = node_steps(p, q, candidates, rule)
    draws: list[float] = []
    for i, (x, a) in enumerate(zip(candidates, steps.accept_probs, strict=True)):
        u = torch.rand((), generator=generator).item()
        draws.append(u)
        if u < a:
            return NodeVerdict(i, int(x), steps.accept_probs, tuple(draws))
    token = int(torch.multinomial(steps.targets[-1], 1, generator=generator).item())
    return NodeVerdict(None, token, steps.accept_probs, tuple(draws))
