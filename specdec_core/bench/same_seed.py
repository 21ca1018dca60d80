"""Same distribution, different text, measured on a live pair (the lossless page's
section 1): :func:`same_seed_texts` (target alone and speculative decoding at T = 1, same
seed: the texts differ) and :func:`first_tokens_test` (over N seeds the first-k-token
distributions agree: χ² and TV, against a simulated null of two target-alone samples of the
same N, the exact law enumerated on the pair's real rows by :func:`exact_first_tokens`).
Bounded by ``MAX_*``, seeded; bad input raises ``InputError`` ``bad_value``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.stats import chi2_contingency

from specdec_core.bench.lossless import MAX_TOKENS
from specdec_core.core.errors import InputError
from specdec_core.core.inputs import prompt_ids, whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate

MAX_SEEDS = 2000
MAX_K = 2
NULL_REPS = 200
#: First tokens kept for the exact joint law of two tokens (the rest is one "other" cell).
JOINT_TOP = 64


@dataclass(frozen=True)
class SameSeedTexts:
    """:func:`same_seed_texts`: both texts and ids (prompt excluded), and whether equal."""

    alone: str
    speculative: str
    alone_ids: tuple[int, ...]
    speculative_ids: tuple[int, ...]

    @property
    def same(self) -> bool:
        return self.alone_ids == self.speculative_ids


def same_seed_texts(
    pair: ModelPair,
    prompt: str,
    seed: int = 0,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    gamma: int = 4,
) -> SameSeedTexts:
    """The target alone and speculative decoding with the same seed and settings (fast
    path). Each uses the seed in its own way (one stream vs two streams per round,
    ``engine/rounds.round_stream``), so at T > 0 the texts generally differ though both
    follow the target's distribution.

    Raises:
        PromptError, ConfigError, InputError (``bad_value``: tokens out of 1..64).
    """
    max_new_tokens = whole_number(max_new_tokens, 1, MAX_TOKENS, "new tokens")
    config = SessionConfig(
        gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens
    )
    alone = generate(pair, prompt, config, "autoregressive")
    spec = generate(pair, prompt, config, "speculative")
    return SameSeedTexts(alone.text, spec.text, tuple(alone.output_ids), tuple(spec.output_ids))


@dataclass(frozen=True)
class DistributionTest:
    """:func:`first_tokens_test`: the first-``k``-token samples of the target alone and of
    speculative decoding over seeds ``0..n − 1``, compared.

    Attributes:
        n, k: seeds per side and tokens per sample.
        counts: ``{tuple of k ids: (alone count, speculative count, exact probability)}``
            for every tuple seen (exact: the target's own law, ``nan`` for a tuple outside
            the enumerated cells, see :data:`JOINT_TOP`).
        tv: TV between the two empirical distributions (on the exact law's cells, as the
            null).
        tv_alone_exact / tv_spec_exact: each empirical distribution's TV to the exact law
            (over the enumerated cells plus one "other" cell).
        chi2, dof, p_value: χ² test of homogeneity on the 2 × C table (cells expected
            < 5 merged into one; Pearson, no continuity correction).
        null_tv: sorted ``[NULL_REPS]`` TVs between two samples of ``n`` drawn from the exact
            law (what TV two target-alone samples show by chance).
        null_quantiles: ``(5 %, 50 %, 95 %)`` of ``null_tv``.
        null_share_above: share of ``null_tv`` ≥ ``tv`` (a Monte Carlo p-value).
    """

    n: int
    k: int
    counts: dict[tuple[int, ...], tuple[int, int, float]]
    tv: float
    tv_alone_exact: float
    tv_spec_exact: float
    chi2: float
    dof: int
    p_value: float
    null_tv: tuple[float, ...]
    null_quantiles: tuple[float, float, float]
    null_share_above: float


def exact_first_tokens(
    pair: ModelPair, ids: list[int], k: int, sampling: SamplingConfig
) -> dict[tuple[int, ...], float]:
    """The target's exact law of its first ``k`` (1 or 2) tokens after ``ids``:
    ``{(x,): p(x)}`` for every ``x`` with ``p(x) > 0``; for ``k = 2``
    ``{(x1, x2): p(x1)·p(x2 | x1)}`` over the :data:`JOINT_TOP` most likely ``x1`` (one
    batched forward), the rest of the mass under ``("other",)``. An EOS first token ends
    the sample: ``(eos,)`` holds ``p(eos)``. Probabilities are float64 numbers."""
    with torch.inference_mode():
        logits = pair.target(torch.tensor([ids], device=pair.device)).logits[0, -1]
        p1 = logits_to_probs(logits, sampling).double().cpu()
        p1 /= p1.sum()  # float32 softmax: renormalised in float64
    law: dict[tuple, float] = {}
    probs = p1.tolist()
    if k == 1:
        return {(x,): v for x, v in enumerate(probs) if v > 0}
    top = [x for x in torch.topk(p1, JOINT_TOP).indices.tolist() if p1[x] > 0]
    grow = [x for x in top if x != pair.eos_token_id]
    covered = 0.0
    if pair.eos_token_id in top:
        law[(pair.eos_token_id,)] = float(p1[pair.eos_token_id])
        covered += float(p1[pair.eos_token_id])
    if grow:
        batch = torch.tensor([ids + [x] for x in grow], device=pair.device)
        with torch.inference_mode():
            rows = logits_to_probs(pair.target(batch).logits[:, -1], sampling).double().cpu()
            rows /= rows.sum(dim=-1, keepdim=True)
        for x1, row in zip(grow, rows, strict=True):
            joint = (probs[x1] * row).tolist()
            law.update({(x1, x2): v for x2, v in enumerate(joint) if v > 0})
            covered += probs[x1]
    law[("other",)] = max(0.0, 1.0 - covered)
    return law


def _cells(sample: Counter, law: dict) -> Counter:
    """``sample`` counted on the cells of ``law`` (a tuple outside them → ``("other",)``)."""
    out: Counter = Counter()
    for x, c in sample.items():
        out[x if x in law else ("other",)] += c
    return out


def _tv_counts(a: Counter, b: Counter, n_a: int, n_b: int) -> float:
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a[x] / n_a - b[x] / n_b) for x in keys)


def _tv_draws(draws: torch.Tensor, n: int) -> float:
    """TV between the empirical laws of ``draws[:n]`` and ``draws[n:]`` (cell indices)."""
    _, cell = torch.unique(draws, return_inverse=True)
    size = int(cell.max()) + 1
    a = torch.bincount(cell[:n], minlength=size)
    b = torch.bincount(cell[n:], minlength=size)
    return 0.5 * float((a - b).abs().sum()) / n


def _chi2(a: Counter, b: Counter) -> tuple[float, int, float]:
    """Pearson χ² of homogeneity on the 2 × C table, cells with an expected count < 5
    (under pooling) merged into one."""
    n_a, n_b = sum(a.values()), sum(b.values())
    keys = sorted(set(a) | set(b), key=str)
    big, small_a, small_b = [], 0, 0
    for x in keys:
        tot = a[x] + b[x]
        if min(tot * n_a, tot * n_b) / (n_a + n_b) >= 5:
            big.append((a[x], b[x]))
        else:
            small_a, small_b = small_a + a[x], small_b + b[x]
    if small_a + small_b:
        big.append((small_a, small_b))
    if len(big) < 2:
        return 0.0, 0, 1.0
    stat, p, dof, _ = chi2_contingency(np.array(big).T, correction=False)
    return float(stat), int(dof), float(p)


def first_tokens_test(
    pair: ModelPair,
    prompt: str,
    n: int = 500,
    k: int = 1,
    gamma: int = 4,
    temperature: float = 1.0,
    null_seed: int = 0,
    acceptance: dict | None = None,
) -> DistributionTest:
    """Over seeds ``0..n − 1``: the first ``k`` tokens of the target alone and of
    speculative decoding (fast path, engine streams; the speculative run makes
    ``max(k, γ + 1)`` tokens so its first round really drafts, and keeps the first ``k``),
    compared by χ² and TV, with the TV of two exact-law samples of the same ``n`` as the
    null (``NULL_REPS`` draws, ``torch.Generator`` seeded with ``null_seed``).

    Args:
        n: seeds per side, 1..:data:`MAX_SEEDS`. k: 1 or 2. temperature: > 0.
        acceptance: ``SessionConfig`` keywords of a lossy rule for the speculative side
            (``{"acceptance": "typical", "acceptance_delta": 0.05}``): the same test then
            measures what the rule costs (the target-alone side and the null are the
            target's own).

    Raises:
        InputError: ``bad_value`` (n, k or γ out of range), ``needs_temperature``
            (temperature 0: a greedy run has one outcome); ConfigError; PromptError.
    """
    n = whole_number(n, 1, MAX_SEEDS, "seeds")
    k = whole_number(k, 1, MAX_K, "tokens (k)")
    gamma = whole_number(gamma, 1, 16, "γ")
    base = SessionConfig(gamma=gamma, temperature=temperature).validate(pair.vocab_size)
    if base.sampling.greedy:
        raise InputError("the distribution test needs a temperature above 0", "needs_temperature")
    spec_base = replace(base, **(acceptance or {})).validate(pair.vocab_size)
    ids = prompt_ids(pair, prompt)
    law = exact_first_tokens(pair, ids, k, base.sampling)
    alone, spec = Counter(), Counter()
    for seed in range(n):
        ar = generate(pair, ids, replace(base, seed=seed, max_new_tokens=k), "autoregressive")
        sp_cfg = replace(spec_base, seed=seed, max_new_tokens=max(k, gamma + 1))
        sp = generate(pair, ids, sp_cfg, "speculative")
        alone[_first(ar.output_ids, k, pair.eos_token_id)] += 1
        spec[_first(sp.output_ids, k, pair.eos_token_id)] += 1
    cells_alone, cells_spec = _cells(alone, law), _cells(spec, law)
    tv = _tv_counts(cells_alone, cells_spec, n, n)  # on the null's cells
    chi2, dof, p_value = _chi2(alone, spec)
    cells = list(law)
    probs = torch.tensor([law[c] for c in cells], dtype=torch.float64)
    gen = torch.Generator().manual_seed(null_seed)
    draws = torch.multinomial(probs, 2 * NULL_REPS * n, replacement=True, generator=gen)
    null = [_tv_draws(pair_of_samples, n) for pair_of_samples in draws.view(NULL_REPS, 2 * n)]
    null.sort()

    def to_exact(merged: Counter) -> float:  # cells not seen add their whole mass
        seen = sum(abs(c / n - law.get(x, 0.0)) for x, c in merged.items())
        return 0.5 * (seen + 1.0 - sum(law.get(x, 0.0) for x in merged))

    counts = {
        x: (alone[x], spec[x], law.get(x, math.nan))
        for x in sorted(set(alone) | set(spec), key=lambda x: -(alone[x] + spec[x]))
    }
    q = np.quantile(null, [0.05, 0.5, 0.95])
    return DistributionTest(
        n=n,
        k=k,
        counts=counts,
        tv=tv,
        tv_alone_exact=to_exact(cells_alone),
        tv_spec_exact=to_exact(cells_spec),
        chi2=chi2,
        dof=dof,
        p_value=p_value,
        null_tv=tuple(null),
        null_quantiles=(float(q[0]), float(q[1]), float(q[2])),
        null_share_above=sum(v >= tv for v in null) / len(null),
    )


def _first(ids: Sequence[int], k: int, eos: int | None) -> tuple[int, ...]:
    """The first ``k`` ids; a sample that starts with EOS is ``(eos,)`` (it ended)."""
    out = tuple(ids[:k])
    return out[:1] if eos is not None and out and out[0] == eos else out
