"""Benchmark: target-only autoregressive vs speculative decoding (and Hugging Face
assisted generation) on one pair, greedy by default. Median of ``repeats`` runs after a
warm-up; times in ms, throughput in tokens/s. Used by ``python -m specdec_core bench``.
"""

from __future__ import annotations

import statistics
import time

import torch

from .costmodel import predicted_speedup
from .generate import GenerationResult, generate
from .models import ModelPair, load_pair
from .session import SessionConfig, encode_prompt


def _median_run(pair: ModelPair, prompt: str, config: SessionConfig, mode: str, repeats: int):
    runs: list[GenerationResult] = [generate(pair, prompt, config, mode) for _ in range(repeats)]
    runs.sort(key=lambda r: r.stats.total_ms)
    return runs[len(runs) // 2]


def hf_assisted(pair: ModelPair, prompt: str, gamma: int, max_new_tokens: int, repeats: int):
    """Time ``target.generate(assistant_model=draft)`` (greedy, constant γ).

    Returns ``(tokens_per_s, ms_per_token, output_ids)`` of the median run, or raises
    whatever transformers raises when assisted generation is unsupported.
    """
    ids = torch.tensor([encode_prompt(pair, prompt)], device=pair.device)
    kwargs = dict(
        assistant_model=pair.draft,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        num_assistant_tokens=gamma,
        num_assistant_tokens_schedule="constant",
        pad_token_id=pair.eos_token_id,
        eos_token_id=pair.eos_token_id,
        attention_mask=torch.ones_like(ids),
    )
    pair.target.generate(ids, **kwargs)  # warm-up
    times, out = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        out = pair.target.generate(ids, **kwargs)
        if pair.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    assert out is not None
    new = out[0, ids.shape[1] :].tolist()
    seconds = statistics.median(times)
    return len(new) / seconds, 1e3 * seconds / max(len(new), 1), new


def run_bench(
    pair_spec: str | tuple[str, str] | ModelPair,
    prompt: str,
    gamma: int = 4,
    max_new_tokens: int = 128,
    repeats: int = 3,
    temperature: float = 0.0,
    hf: bool = True,
) -> dict:
    """Benchmark one pair; returns the DESIGN.md ``bench`` JSON object plus details.

    Keys: ``autoregressive`` {tokens_per_s, ms_per_token, ttft_ms}, ``speculative``
    {tokens_per_s, ms_per_token, ttft_ms, mean_accepted, acceptance_rate, draft_ms_per_round,
    verify_ms_per_round, rounds}, ``speedup`` (speculative / autoregressive tokens/s),
    ``cost_model`` {alpha, c, target_step_ms, draft_step_ms, verify_ms, overhead_ms,
    predicted_speedup}, ``greedy_equal`` (greedy only), ``device``, ``pair`` and
    ``hf_assisted`` {tokens_per_s, ms_per_token, speedup, equal_to_target} where it runs.
    """
    pair = pair_spec if isinstance(pair_spec, ModelPair) else load_pair(pair_spec)
    repeats = max(1, repeats)
    config = SessionConfig(gamma=gamma, temperature=temperature, max_new_tokens=max_new_tokens)
    generate(pair, prompt, config, "speculative")  # warm-up both paths
    generate(pair, prompt, config, "autoregressive")
    ar = _median_run(pair, prompt, config, "autoregressive", repeats)
    sp = _median_run(pair, prompt, config, "speculative", repeats)
    s = sp.stats
    rounds = max(s.rounds, 1)
    target_step = ar.stats.ms_per_token
    draft_step = s.draft_ms / max(s.draft_forwards, 1)
    verify_ms = s.verify_ms / rounds
    overhead = max(0.0, (s.total_ms - s.draft_ms - s.verify_ms) / rounds)
    alpha = min(s.acceptance_rate, 1.0)
    result = {
        "pair": pair.name,
        "device": pair.device_label(),
        "gamma": gamma,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "autoregressive": {
            "tokens_per_s": ar.stats.tokens_per_s,
            "ms_per_token": ar.stats.ms_per_token,
            "ttft_ms": ar.stats.ttft_ms,
            "new_tokens": ar.stats.new_tokens,
        },
        "speculative": {
            "tokens_per_s": s.tokens_per_s,
            "ms_per_token": s.ms_per_token,
            "ttft_ms": s.ttft_ms,
            "new_tokens": s.new_tokens,
            "mean_accepted": s.mean_accepted,
            "acceptance_rate": s.acceptance_rate,
            "rounds": s.rounds,
            "target_forwards": s.target_forwards,
            "draft_forwards": s.draft_forwards,
            "draft_ms_per_round": s.draft_ms / rounds,
            "verify_ms_per_round": verify_ms,
            "overhead_ms_per_round": overhead,
            "accepted_histogram": s.accepted_histogram,
        },
        "speedup": s.tokens_per_s / ar.stats.tokens_per_s if ar.stats.tokens_per_s else 0.0,
        "cost_model": {
            "alpha": alpha,
            "c": draft_step / target_step if target_step else 0.0,
            "target_step_ms": target_step,
            "draft_step_ms": draft_step,
            "verify_ms": verify_ms,
            "overhead_ms": overhead,
            "predicted_speedup": predicted_speedup(
                alpha, gamma, target_step, draft_step, verify_ms, overhead
            ),
        },
    }
    if temperature == 0.0:
        result["greedy_equal"] = sp.output_ids == ar.output_ids
    if hf:
        try:
            tps, mspt, ids = hf_assisted(pair, prompt, gamma, max_new_tokens, repeats)
            result["hf_assisted"] = {
                "tokens_per_s": tps,
                "ms_per_token": mspt,
                "speedup": tps / ar.stats.tokens_per_s if ar.stats.tokens_per_s else 0.0,
                "equal_to_target": ids[: len(ar.output_ids)] == ar.output_ids[: len(ids)],
            }
        except Exception as exc:  # noqa: BLE001 - report, never fail the benchmark
            result["hf_assisted_error"] = f"{type(exc).__name__}: {exc}"
    return result
