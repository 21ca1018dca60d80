"""The **broadcast penalty**, done wrong on purpose on the live pair — as a lesson, never as
the app's behaviour (the engine processes each row on its own prefix: ``core/processors.py``).

:func:`penalty_monte_carlo` measures the broadcast penalty (SGLang-style: one penalty from the
committed prefix reused at every position of a round, for ``p`` and ``q``) against the
correct per-prefix rows and the target alone, by seeded sampling of the first ``n`` output
tokens at T = 1. The output law lives on ``V^n`` sequences (V = 4096 on the embedded pair),
far too many to estimate by counting, so the measured TV is the TV of a statistic the
penalty acts on: the number of repeated tokens among the first ``n`` (``n − #distinct``).
A statistic's TV is at most the output's TV (data processing), so a measured gap is a lower
bound on the shortcut's error; the correct rule's TV is the noise level.
:func:`pair_two_token_tv` gives the exact two-token TV in closed form
(:func:`specdec_core.rules.lab.penalty.two_token_tv`, on the pair: one batched forward).

It runs its own small loops (batched forwards without a cache). Pure: no streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from specdec_core.core.models import ModelPair
from specdec_core.core.penalties import PenaltyConfig, apply_penalties

MCRule = Literal["target", "per_prefix", "broadcast"]
MC_RULES: tuple[MCRule, ...] = ("target", "per_prefix", "broadcast")
#: The live measurement's defaults: a prompt of the scenarios, a strong presence penalty
#: (OpenAI's range ends at 2), γ = 4 and one full round of output (n = γ + 1 = 5).
MC_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"
MC_PENALTY = PenaltyConfig(presence_penalty=2.0)
MC_GAMMA = 4
MC_TOKENS = 5
MAX_MC_N = 2000
_CHUNK = 256


@torch.inference_mode()
def _rows_at(model, seqs: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]):
    """``[Σ len(positions[i]), V]`` float64 logits of ``model`` at the given positions of
    each sequence (right-padded batch: causal attention makes padding harmless)."""
    out = []
    for s in range(0, len(seqs), _CHUNK):
        batch = seqs[s : s + _CHUNK]
        x = torch.zeros(len(batch), max(map(len, batch)), dtype=torch.long)
        for i, b in enumerate(batch):
            x[i, : len(b)] = torch.tensor(list(b))
        hidden = model.transformer(x.to(model.device)).last_hidden_state
        bi = [i for i, ps in enumerate(positions[s : s + _CHUNK]) for _ in ps]
        pi = [p for ps in positions[s : s + _CHUNK] for p in ps]
        out.append(model.lm_head(hidden[bi, pi]).double().cpu())
    return torch.cat(out)


def _processed(rows, prefixes, prompt_len: int, config: PenaltyConfig) -> torch.Tensor:
    """``[N, V]`` logits → ``[N, V]`` float64 probabilities at T = 1, row ``i`` through
    :func:`apply_penalties` on ``prefixes[i]``."""
    done = [
        apply_penalties(r, pf, prompt_len, config) for r, pf in zip(rows, prefixes, strict=True)
    ]
    return torch.softmax(torch.stack(done).double(), dim=-1)


def _target_alone(pair, prompt, config, n, count, gen, tick) -> list[list[int]]:
    seqs = [list(prompt) for _ in range(count)]
    for k in range(n):
        rows = _rows_at(pair.target, seqs, [[len(s) - 1] for s in seqs])
        probs = _processed(rows, seqs, len(prompt), config)
        drawn = torch.multinomial(probs, 1, generator=gen)[:, 0].tolist()
        for s, t in zip(seqs, drawn, strict=True):
            s.append(t)
        tick((k + 1) / n)
    return [s[len(prompt) :] for s in seqs]


def _speculative(pair, prompt, config, n, count, gen, gamma, rule, tick) -> list[list[int]]:
    """Rounds of ``gamma`` drafts (the speculative rule, vectorised over samples) until every
    sample has ``n`` tokens; rows processed per prefix or broadcast from the committed ids."""
    seqs = [list(prompt) for _ in range(count)]
    L = len(prompt)
    while True:
        act = [i for i, s in enumerate(seqs) if len(s) - L < n]
        if not act:
            return [s[L : L + n] for s in seqs]
        com = [seqs[i] for i in act]
        drafts: list[list[int]] = [[] for _ in act]
        qs = []
        for _ in range(gamma):
            cur = [c + d for c, d in zip(com, drafts, strict=True)]
            rows = _rows_at(pair.draft, cur, [[len(c) - 1] for c in cur])
            q = _processed(rows, cur if rule == "per_prefix" else com, L, config)
            qs.append(q)
            drawn = torch.multinomial(q, 1, generator=gen)[:, 0].tolist()
            for d, t in zip(drafts, drawn, strict=True):
                d.append(t)
        full = [c + d for c, d in zip(com, drafts, strict=True)]
        spans = [list(range(len(c) - 1, len(c) + gamma)) for c in com]
        rows = _rows_at(pair.target, full, spans).view(len(act), gamma + 1, -1)
        ps = []
        for j in range(gamma + 1):
            pref = [c + d[:j] for c, d in zip(com, drafts, strict=True)]
            ps.append(_processed(rows[:, j], pref if rule == "per_prefix" else com, L, config))
        alive = torch.ones(len(act), dtype=torch.bool)
        new: list[list[int]] = [[] for _ in act]
        idx = torch.arange(len(act))
        for j in range(gamma):
            y = torch.tensor([d[j] for d in drafts])
            u = torch.rand(len(act), generator=gen, dtype=torch.float64)
            p, q = ps[j], qs[j]
            accept = u < (p[idx, y] / q[idx, y]).clamp(max=1.0)  # Leviathan et al. Alg. 1
            excess = (p - q).clamp_min(0.0)
            mass = excess.sum(-1, keepdim=True)
            residual = torch.where(mass > 0, excess / mass.clamp_min(1e-300), p)
            correction = torch.multinomial(residual, 1, generator=gen)[:, 0]
            for i in range(len(act)):
                if alive[i]:
                    new[i].append(int(y[i] if accept[i] else correction[i]))
                    alive[i] = bool(accept[i])
        bonus = torch.multinomial(ps[gamma], 1, generator=gen)[:, 0]
        for i, a in enumerate(act):
            seqs[a] = seqs[a] + new[i] + ([int(bonus[i])] if alive[i] else [])
        tick(1 - len(act) / count / 2)


def repeat_counts(outputs: Sequence[Sequence[int]], n: int) -> tuple[float, ...]:
    """``[n]`` the law of ``n − #distinct(x_1..x_n)`` (repeated tokens among the first
    ``n``) over the samples."""
    counts = [0] * n
    for out in outputs:
        counts[len(out) - len(set(out))] += 1
    return tuple(c / len(outputs) for c in counts)


@dataclass(frozen=True)
class PenaltyMonteCarlo:
    """The measured laws of the repeat count and their TVs.

    Attributes:
        laws: rule → ``[n]`` probabilities of 0..n−1 repeated tokens (``target``: the
        target alone; the two speculative rules). tv: ``per_prefix`` / ``broadcast`` →
        TV of its law to the target alone's. n_samples: samples per rule.
        first_token_same: the per-prefix and broadcast runs' first tokens agree sample by
        sample (they share the seed; position 1 is processed on its true prefix by both).
    """

    laws: dict[MCRule, tuple[float, ...]]
    tv: dict[MCRule, float]
    n_samples: int
    n_tokens: int
    gamma: int
    first_token_same: bool


def penalty_monte_carlo(
    pair: ModelPair,
    prompt: str = MC_PROMPT,
    config: PenaltyConfig = MC_PENALTY,
    gamma: int = MC_GAMMA,
    n: int = MC_TOKENS,
    samples: int = 300,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
) -> PenaltyMonteCarlo:
    """Seeded samples of the first ``n`` output tokens at T = 1 for the target alone, the
    per-prefix rule and the broadcast shortcut (``samples`` each, at most
    :data:`MAX_MC_N`; the speculative runs share one seed so they differ only through the
    rows). ``progress(fraction)`` while it runs.

    Raises:
        ValueError: ``samples`` outside ``1..MAX_MC_N``, ``gamma`` < 1 or ``n`` < 2.
    """
    if not 1 <= samples <= MAX_MC_N or gamma < 1 or n < 2:
        raise ValueError(f"samples 1..{MAX_MC_N}, γ ≥ 1, n ≥ 2: {samples}, {gamma}, {n}")
    config.validate()
    ids = list(pair.tokenizer.encode(prompt))
    outs: dict[MCRule, list[list[int]]] = {}
    for k, rule in enumerate(MC_RULES):

        def tick(done: float, k: int = k) -> None:
            if progress is not None:
                progress(min(1.0, (k + done) / len(MC_RULES)))

        gen = torch.Generator().manual_seed(seed + (0 if rule == "target" else 1))
        if rule == "target":
            outs[rule] = _target_alone(pair, ids, config, n, samples, gen, tick)
        else:
            outs[rule] = _speculative(pair, ids, config, n, samples, gen, gamma, rule, tick)
    laws = {rule: repeat_counts(outs[rule], n) for rule in MC_RULES}
    tv = {
        rule: 0.5 * sum(abs(a - b) for a, b in zip(laws[rule], laws["target"], strict=True))
        for rule in ("per_prefix", "broadcast")
    }
    same = [o[0] for o in outs["per_prefix"]] == [o[0] for o in outs["broadcast"]]
    return PenaltyMonteCarlo(laws, tv, samples, n, gamma, same)  # type: ignore[arg-type]


def pair_two_token_tv(pair: ModelPair, prompt: str, config: PenaltyConfig) -> float:
    """The broadcast shortcut's exact TV on the first two output tokens on the pair
    (T = 1, any γ ≥ 1): ``Σ_x1 min(p1, q1)(x1) · TV(p2_b(·|x1), p2(·|x1))`` over all
    ``V`` first tokens (one batched target forward over ``prompt + x1``)."""
    ids = list(pair.tokenizer.encode(prompt))
    L = len(ids)
    p1 = _processed(_rows_at(pair.target, [ids], [[L - 1]]), [ids], L, config)[0]
    q1 = _processed(_rows_at(pair.draft, [ids], [[L - 1]]), [ids], L, config)[0]
    weight = torch.minimum(p1, q1)
    seqs = [ids + [x] for x in range(pair.vocab_size)]
    rows = _rows_at(pair.target, seqs, [[L]] * len(seqs))
    true = _processed(rows, seqs, L, config)
    broad = _processed(rows, [ids] * len(seqs), L, config)
    return float((weight * 0.5 * (true - broad).abs().sum(-1)).sum())
