"""A quantized target measured on a live pair (the lossless page's section 3,
``core/quant.py``): :func:`quant_figures` (TV of first-token distributions and greedy
divergence against the float32 target over held-out prompts, the draft's acceptance against
each target) and :func:`spec_matches_own_greedy` (speculative decoding still equals the
quantized target's own greedy output). Bounded by ``MAX_*``; bad input raises
``InputError`` ``bad_value`` or ``ConfigError`` ``quant_unknown``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec_core.bench.lossless import MAX_PROMPTS, MAX_TOKENS
from specdec_core.core.inputs import prompt_ids, whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import quantized_pair, weight_error
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, tv_distance
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.rules.acceptance import acceptance_total


@dataclass(frozen=True)
class QuantFigures:
    """:func:`quant_figures` for one quantization ``kind`` over ``prompts`` held-out
    prompts.

    Attributes:
        weight_error: relative Frobenius error of the quantized weights (all together).
        tv_first_mean / tv_first_max: TV between the float32 target's and the quantized
            target's next-token distributions after each prompt (exact, at the
            temperature), mean and max over prompts.
        greedy_divergence: share of prompts whose greedy target-alone outputs
            (``tokens`` tokens) differ between the two targets.
        acceptance_float32 / acceptance_quant: the draft's acceptance ``α`` against each
            target: mean ``Σ min(p, q)`` at the temperature over the positions of each
            prompt's float32 greedy continuation (teacher-forced, the same positions for
            both targets).
    """

    kind: str
    prompts: int
    tokens: int
    weight_error: float
    tv_first_mean: float
    tv_first_max: float
    greedy_divergence: float
    acceptance_float32: float
    acceptance_quant: float


def _rows(model: torch.nn.Module, ids: list[int], start: int, sampling: SamplingConfig):
    """``[len(ids) − start, V]`` float64 rows predicting positions ``start..`` (one
    forward)."""
    with torch.inference_mode():
        logits = model(torch.tensor([ids], device=model.device)).logits[0, start - 1 : -1]
    return logits_to_probs(logits, sampling).double().cpu()


def quant_figures(
    pair: ModelPair,
    kind: str,
    prompts: Sequence[str],
    tokens: int = 16,
    temperature: float = 1.0,
) -> QuantFigures:
    """How far the ``kind``-quantized target (``core/quant.quantized_pair``) is from the
    float32 one, and how well the draft fits each (see :class:`QuantFigures`).

    Raises:
        ConfigError: ``quant_unknown``; InputError: ``bad_value`` (prompts or tokens out
        of range), PromptError.
    """
    whole_number(len(prompts), 1, MAX_PROMPTS, "prompts")
    tokens = whole_number(tokens, 1, MAX_TOKENS, "new tokens")
    quant = quantized_pair(pair, kind)
    sampling = SamplingConfig(temperature)
    greedy = SessionConfig(max_new_tokens=tokens)
    tvs, differ, acc_f, acc_q = [], 0, [], []
    for prompt in prompts:
        ids = prompt_ids(pair, prompt)
        base = generate(pair, ids, greedy, "autoregressive").output_ids
        mine = generate(quant, ids, greedy, "autoregressive").output_ids
        differ += base != mine
        seq = ids + base
        p_f = _rows(pair.target, seq, len(ids), sampling)
        p_q = _rows(quant.target, seq, len(ids), sampling)
        q = _rows(pair.draft, seq, len(ids), sampling)
        tvs.append(float(tv_distance(p_f[0], p_q[0])))
        acc_f += acceptance_total(p_f, q).tolist()
        acc_q += acceptance_total(p_q, q).tolist()
    return QuantFigures(
        kind=kind,
        prompts=len(prompts),
        tokens=tokens,
        weight_error=weight_error(pair.target, kind),
        tv_first_mean=statistics.fmean(tvs),
        tv_first_max=max(tvs),
        greedy_divergence=differ / len(prompts),
        acceptance_float32=statistics.fmean(acc_f),
        acceptance_quant=statistics.fmean(acc_q),
    )


def spec_matches_own_greedy(
    pair: ModelPair, kind: str, prompts: Sequence[str], tokens: int = 16, gamma: int = 4
) -> tuple[int, int]:
    """Greedy speculative decoding with the ``kind``-quantized target against that
    target's own greedy output: ``(prompts where equal, prompts)``.

    Raises:
        ConfigError: ``quant_unknown``; InputError: ``bad_value``; PromptError.
    """
    whole_number(len(prompts), 1, MAX_PROMPTS, "prompts")
    tokens = whole_number(tokens, 1, MAX_TOKENS, "new tokens")
    quant = quantized_pair(pair, kind)
    config = SessionConfig(gamma=gamma, max_new_tokens=tokens)
    equal = sum(
        generate(quant, p, config, "speculative").output_ids
        == generate(quant, p, config, "autoregressive").output_ids
        for p in prompts
    )
    return equal, len(prompts)
