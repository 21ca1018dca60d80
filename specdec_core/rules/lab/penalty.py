"""History-dependent penalties under speculation, exactly: per-prefix rows against the
"broadcast" shortcut, on a tiny hand-made language model.

A penalty makes ``p_i`` and ``q_i`` depend on the candidate prefix of their row: row ``i``
of a round (draft ``q_i``, target ``p_i``) must see the committed ids followed by
``y_1..y_{i−1}`` (:mod:`specdec_core.core.processors`). Three ways of doing it are
enumerated here, every draft and every verdict of every round, to the exact law of the
first ``n`` output tokens:

* ``per_prefix`` (correct): each row processed on its own candidate prefix. Then each
  position of the round is the plain speculative rule on the processed rows, and the output
  law equals the target alone with the same processors (Leviathan et al. 2023, Thm 3.5,
  applied row by row).
* ``broadcast`` (SGLang-style shortcut): one penalty from the committed prefix reused at
  every position of the round, for ``p`` and ``q`` alike. Position ``i ≥ 2`` then misses
  the penalty on the tokens drafted before it, so the output law is not the target alone.
* ``ignored`` (vLLM #18902): the penalties silently skipped under speculation.

For two output tokens the broadcast error has a closed form, since the first position of
every round is processed on its true prefix:
``TV = Σ_x1 min(p1, q1)(x1) · TV(p2_broadcast(·|x1), p2(·|x1))`` (:func:`two_token_tv`).

The hand-made "models" are bigram tables: the logits of the next token given the last
token of the prefix (``[V, V]``, row = last token). Rows go through the app's own
:func:`specdec_core.core.penalties.apply_penalties` (float32 logits), then a float64
softmax at T = 1; the laws are float64 sums of products, so ``per_prefix`` equals the
target alone to ~1e-15. Pure: torch only, no streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Literal

import torch

from specdec_core.core.errors import RuleInputError
from specdec_core.core.penalties import PenaltyConfig, apply_penalties
from specdec_core.rules.acceptance import residual_distribution

__all__ = [
    "HAND_CASE",
    "PENALTY_RULES",
    "PenaltyCase",
    "PenaltyComparison",
    "PenaltyRule",
    "compare_penalty_rules",
    "output_law",
    "processed_row",
    "round_law",
    "target_law",
    "two_token_tv",
]

PenaltyRule = Literal["per_prefix", "broadcast", "ignored"]
PENALTY_RULES: tuple[PenaltyRule, ...] = ("per_prefix", "broadcast", "ignored")
Law = dict[tuple[int, ...], float]
MAX_GAMMA = 3
MAX_OUTPUT = 3


@dataclass(frozen=True)
class PenaltyCase:
    """A tiny language model pair given as bigram logit tables.

    Attributes:
        names: ``[V]`` token names. target, draft: ``[V][V]`` logits, ``target[a][b]`` =
        the target's logit of token ``b`` after a prefix ending in ``a``.
        prompt: the prompt ids (``≥ 1``); penalties count the prompt for the repetition
        penalty, only the generated part for frequency / presence (OpenAI semantics).
    """

    names: tuple[str, ...]
    target: tuple[tuple[float, ...], ...]
    draft: tuple[tuple[float, ...], ...]
    prompt: tuple[int, ...]

    @property
    def vocab(self) -> int:
        return len(self.names)


def _log_weights(rows: Sequence[Sequence[float]]) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(math.log(w) for w in row) for row in rows)


#: Three tokens, prompt "A". The target likes to repeat its last token (B after B, C after
#: C); the draft disagrees after A. Logits are ln of small whole weights, so with a presence
#: penalty of ln 2 (a generated token's weight halved) every number is a fraction: the
#: broadcast shortcut's TV on two tokens is 37/336 (tests/test_rulelab_penalty.py).
HAND_CASE = PenaltyCase(
    names=("A", "B", "C"),
    target=_log_weights(((1, 2, 1), (1, 2, 1), (1, 1, 2))),
    draft=_log_weights(((1, 1, 2), (1, 2, 1), (1, 1, 2))),
    prompt=(0,),
)


def processed_row(
    case: PenaltyCase,
    model: Literal["target", "draft"],
    prefix: Sequence[int],
    penalty_prefix: Sequence[int],
    config: PenaltyConfig,
) -> torch.Tensor:
    """``[V]`` float64: the model's next-token distribution after ``prefix`` (its last
    token picks the table row) with the penalties computed on ``penalty_prefix`` (the
    row's own prefix for ``per_prefix``, the committed prefix for ``broadcast``), T = 1."""
    table = case.target if model == "target" else case.draft
    logits = torch.tensor(table[prefix[-1]], dtype=torch.float64)
    processed = apply_penalties(logits, list(penalty_prefix), len(case.prompt), config)
    return torch.softmax(processed.double(), dim=-1)


def target_law(case: PenaltyCase, config: PenaltyConfig, n: int) -> Law:
    """The target alone: ``P(x_1..x_n) = Π_k p(x_k | prompt + x_<k)``, each row processed
    on its own prefix. Returns ``{(x_1..x_n): probability}`` over all ``V^n`` outcomes."""
    out: Law = {}
    for xs in product(range(case.vocab), repeat=n):
        mass, prefix = 1.0, list(case.prompt)
        for x in xs:
            mass *= float(processed_row(case, "target", prefix, prefix, config)[x])
            prefix.append(x)
        out[xs] = mass
    return out


def _rows(
    case: PenaltyCase,
    config: PenaltyConfig,
    rule: PenaltyRule,
    committed: list[int],
    drafts: list[int],
    model: Literal["target", "draft"],
) -> torch.Tensor:
    prefix = committed + drafts
    if rule == "ignored":
        return processed_row(case, model, prefix, prefix, PenaltyConfig())
    penalty_prefix = prefix if rule == "per_prefix" else committed
    return processed_row(case, model, prefix, penalty_prefix, config)


def round_law(
    case: PenaltyCase,
    config: PenaltyConfig,
    rule: PenaltyRule,
    gamma: int,
    committed: Sequence[int],
) -> Law:
    """The exact law of the tokens one round commits after ``committed``: every draft
    ``y_1..y_γ`` (each ``y_i ~ q_i``), every verdict (accept ``y_i`` with
    ``min(1, p_i/q_i)``, else a correction from ``norm([p_i − q_i]+)`` and the round ends),
    and the bonus from ``p_{γ+1}`` when all are accepted. Returns ``{committed tokens:
    probability}`` (sequences of length 1..γ+1; sums to 1)."""
    committed = list(committed)
    out: Law = {}

    def walk(drafts: list[int], mass: float) -> None:
        p = _rows(case, config, rule, committed, drafts, "target")
        if len(drafts) == gamma:  # every draft accepted: the bonus token
            for x in range(case.vocab):
                _add(out, (*drafts, x), mass * float(p[x]))
            return
        q = _rows(case, config, rule, committed, drafts, "draft")
        for y in range(case.vocab):
            if q[y] > 0 and p[y] > 0:
                walk([*drafts, y], mass * float(torch.minimum(p[y], q[y])))  # q(y)·a(y)
        residual = residual_distribution(p, q)
        if residual is not None:
            beta = float((p - q).clamp_min(0.0).sum())
            for x in range(case.vocab):
                _add(out, (*drafts, x), mass * beta * float(residual[x]))

    walk([], 1.0)
    return out


def _add(law: Law, key: tuple[int, ...], mass: float) -> None:
    if mass > 0:
        law[key] = law.get(key, 0.0) + mass


def output_law(
    case: PenaltyCase, config: PenaltyConfig, rule: PenaltyRule, gamma: int, n: int
) -> Law:
    """The exact law of the first ``n`` output tokens under ``rule``: rounds of
    :func:`round_law` (each after the tokens committed so far) until ``n`` are committed.
    Returns ``{(x_1..x_n): probability}`` (outcomes of probability 0 left out)."""

    def go(committed: list[int], left: int) -> Law:
        out: Law = {}
        for seq, mass in round_law(case, config, rule, gamma, committed).items():
            if len(seq) >= left:
                _add(out, seq[:left], mass)
            else:
                for rest, m2 in go(committed + list(seq), left - len(seq)).items():
                    _add(out, (*seq, *rest), mass * m2)
        return out

    return go(list(case.prompt), n)


def _tv(a: Law, b: Law) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def two_token_tv(case: PenaltyCase, config: PenaltyConfig) -> float:
    """The broadcast shortcut's TV on two output tokens, in closed form:
    ``Σ_x1 min(p1, q1)(x1) · TV(p2_b(·|x1), p2(·|x1))`` — only a first token that was an
    accepted draft is followed by a broadcast row (a correction ends the round, and the
    next round's first row is processed on its true prefix). Any ``γ ≥ 1``."""
    prompt = list(case.prompt)
    p1 = processed_row(case, "target", prompt, prompt, config)
    q1 = processed_row(case, "draft", prompt, prompt, config)
    total = 0.0
    for x1 in range(case.vocab):
        true = processed_row(case, "target", [*prompt, x1], [*prompt, x1], config)
        broad = processed_row(case, "target", [*prompt, x1], prompt, config)
        total += float(torch.minimum(p1[x1], q1[x1])) * 0.5 * float((true - broad).abs().sum())
    return total


@dataclass(frozen=True)
class PenaltyComparison:
    """The exact laws of the first ``n`` tokens, aligned.

    Attributes:
        outcomes: ``[V^n]`` token-id tuples (lexicographic). labels: their names joined.
        target: ``[V^n]`` the target alone. laws: rule → ``[V^n]`` (:data:`PENALTY_RULES`).
        tv: rule → ``TV(law, target)``. two_token_tv: :func:`two_token_tv` (the closed
        form; equals ``tv["broadcast"]`` when ``n = 2``).
    """

    outcomes: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]
    target: tuple[float, ...]
    laws: dict[PenaltyRule, tuple[float, ...]]
    tv: dict[PenaltyRule, float]
    two_token_tv: float


def compare_penalty_rules(
    case: PenaltyCase, config: PenaltyConfig, gamma: int, n: int
) -> PenaltyComparison:
    """Every rule's exact output law next to the target alone.

    Raises:
        RuleInputError: ``gamma`` outside ``1..MAX_GAMMA`` or ``n`` outside
        ``2..MAX_OUTPUT`` (code ``penalty_case``); ConfigError from a bad penalty.
    """
    if not 1 <= gamma <= MAX_GAMMA or not 2 <= n <= MAX_OUTPUT:
        raise RuleInputError(f"γ must be 1..{MAX_GAMMA}, n 2..{MAX_OUTPUT}", "penalty_case")
    config.validate()
    reference = target_law(case, config, n)
    outcomes = tuple(sorted(reference))
    laws: dict[PenaltyRule, tuple[float, ...]] = {}
    tv: dict[PenaltyRule, float] = {}
    for rule in PENALTY_RULES:
        law = output_law(case, config, rule, gamma, n)
        laws[rule] = tuple(law.get(o, 0.0) for o in outcomes)
        tv[rule] = _tv(law, reference)
    return PenaltyComparison(
        outcomes=outcomes,
        labels=tuple(" ".join(case.names[i] for i in o) for o in outcomes),
        target=tuple(reference[o] for o in outcomes),
        laws=laws,
        tv=tv,
        two_token_tv=two_token_tv(case, config),
    )
