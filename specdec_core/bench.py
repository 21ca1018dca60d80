"""Benchmark: target-only autoregressive vs speculative decoding (and Hugging Face
assisted generation) on one pair, greedy by default. Median of ``repeats`` runs after a
warm-up; times in ms, throughput in tokens/s. Used by ``python -m specdec_core bench``,
``benchmarks/bench_pairs.py`` and the speed page (which calls the pieces one at a time so
it can show progress and stop between them).

The cost model is fed from the same runs (Leviathan et al. 2023, §3.3–3.4):
``target_step_ms`` is a target forward of the autoregressive run, ``draft_step_ms`` a draft
forward, ``verify_ms`` a verification forward over ``γ + 1`` positions (all measured inside
the model calls), α the measured mean ``Σ min(p, q)``, ``c = draft step / target step``.
"""

from __future__ import annotations

import copy
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import torch

from .batching import generate_batch
from .costmodel import (
    expected_tokens_per_round,
    forward_time_speedup,
    per_token_cost_ms,
    predicted_speedup,
    walltime_improvement,
)
from .drafters import make_named_drafter
from .generate import GenerationResult, generate
from .models import ModelPair, load_pair, quiet_transformers
from .session import SessionConfig, encode_prompt

# Prompts for the batch-size sweep (Tiny Shakespeare openings; content, not UI text).
BENCH_PROMPTS: tuple[str, ...] = (
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?",
    "KING RICHARD III:\nNow is the winter of our discontent",
    "MENENIUS:\nI tell you, friends, most charitable care",
    "DUKE VINCENTIO:\nOf government the properties to unfold,",
    "GLOUCESTER:\nWhat, will the aspiring blood of Lancaster",
    "HAMLET:\nTo be, or not to be, that is the question:",
)


def ignoring_eos(pair: ModelPair) -> ModelPair:
    """A view of ``pair`` whose generation does not stop at EOS (same models, shared and
    unchanged), so every timed run produces exactly ``max_new_tokens`` tokens."""
    return replace(pair, eos_token_id=None)


def _sync(pair: ModelPair) -> None:
    if pair.device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_generation(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    mode: str,
    repeats: int = 3,
    drafter: str = "model",
    warmup: bool = True,
) -> GenerationResult:
    """Run :func:`generate` ``repeats`` times (after one warm-up run unless ``warmup`` is
    false) and return the run with the median ``total_ms``. A fresh drafter (and cache) is
    made for every run.

    Raises:
        PromptError, ConfigError: from :func:`generate`.
    """

    def once() -> GenerationResult:
        made = make_named_drafter(pair, drafter) if mode == "speculative" else None
        return generate(pair, prompt, config, mode, made)  # type: ignore[arg-type]

    if warmup:
        once()
    runs = sorted((once() for _ in range(max(1, repeats))), key=lambda r: r.stats.total_ms)
    return runs[len(runs) // 2]


def measure_pair(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    repeats: int = 3,
    drafter: str = "model",
    warmup: bool = True,
) -> tuple[GenerationResult, GenerationResult]:
    """Target-only and speculative runs of the same prompt and settings, *interleaved*
    (AR, speculative, AR, …) so a burst of load on a shared machine hits both alike; each
    the run with the median ``total_ms`` of ``repeats``, after one warm-up run of each.

    Returns:
        ``(autoregressive, speculative)`` :class:`GenerationResult` s.

    Raises:
        PromptError, ConfigError: from :func:`generate`.
    """

    def once(mode: str) -> GenerationResult:
        made = make_named_drafter(pair, drafter) if mode == "speculative" else None
        return generate(pair, prompt, config, mode, made)  # type: ignore[arg-type]

    if warmup:
        once("autoregressive")
        once("speculative")
    runs: dict[str, list[GenerationResult]] = {"autoregressive": [], "speculative": []}
    for _ in range(max(1, repeats)):
        for mode, done in runs.items():
            done.append(once(mode))
    ar, sp = (sorted(r, key=lambda g: g.stats.total_ms) for r in runs.values())
    return ar[len(ar) // 2], sp[len(sp) // 2]


@contextmanager
def cpu_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)`` (``None``: unchanged), then
    restore. Process-wide: other work running meanwhile sees the same setting."""
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def hf_generate(
    pair: ModelPair,
    prompt: str,
    gamma: int,
    max_new_tokens: int,
    repeats: int = 3,
    assisted: bool = True,
    stop_at_eos: bool = True,
) -> dict:
    """Time Hugging Face ``target.generate`` (greedy), with ``assistant_model=draft`` at a
    constant γ (``num_assistant_tokens_schedule="constant"``, no confidence early-stop) or
    without (``assisted=False``: HF's own target-only baseline).

    The shared models are not changed: generation runs on shallow copies that carry their
    own ``generation_config`` (HF reads γ from the *assistant's* config and would otherwise
    adapt it in place) and count the target forwards (``rounds``).

    Returns:
        ``{tokens_per_s, ms_per_token, new_tokens, output_ids, target_forwards,
        mean_accepted}`` of the median run (``mean_accepted`` estimated as
        ``(new_tokens − rounds) / rounds``; 0 when not assisted).

    Raises:
        whatever transformers raises where assisted generation is unsupported.
    """
    ids = torch.tensor([encode_prompt(pair, prompt)], device=pair.device)
    target = copy.copy(pair.target)
    calls = [0]
    base_forward = pair.target.forward

    @functools.wraps(base_forward)  # HF inspects the forward's signature
    def counted_forward(*args, **kwargs):
        calls[0] += 1
        return base_forward(*args, **kwargs)

    target.forward = counted_forward  # the copy's own attribute; the shared model is intact
    kwargs: dict = dict(
        do_sample=False,
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        pad_token_id=pair.eos_token_id if pair.eos_token_id is not None else 0,
        eos_token_id=pair.eos_token_id if stop_at_eos else None,
        attention_mask=torch.ones_like(ids),
    )
    target.generation_config = copy.deepcopy(pair.target.generation_config)
    if not stop_at_eos:
        target.generation_config.eos_token_id = None
    if assisted:
        assistant = copy.copy(pair.draft)
        assistant.generation_config = copy.deepcopy(pair.draft.generation_config)
        assistant.generation_config.num_assistant_tokens = gamma
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0
        if not stop_at_eos:
            assistant.generation_config.eos_token_id = None
        kwargs["assistant_model"] = assistant
    with torch.inference_mode(), quiet_transformers():
        target.generate(ids, **kwargs)  # warm-up
        runs = []
        for _ in range(max(1, repeats)):
            calls[0] = 0
            started = time.perf_counter()
            out = target.generate(ids, **kwargs)
            _sync(pair)
            runs.append(((time.perf_counter() - started) * 1e3, out, calls[0]))
    runs.sort(key=lambda r: r[0])
    ms, out, forwards = runs[len(runs) // 2]
    new = out[0, ids.shape[1] :].tolist()
    n = len(new)
    return {
        "tokens_per_s": 1e3 * n / ms if ms > 0 else 0.0,
        "ms_per_token": ms / max(n, 1),
        "new_tokens": n,
        "output_ids": new,
        "target_forwards": forwards,
        "mean_accepted": (n - forwards) / forwards if assisted and forwards else 0.0,
    }


def summarize(ar: GenerationResult, sp: GenerationResult, gamma: int) -> dict:
    """Compare one target-only run and one speculative run of the same prompt/settings.

    Returns a dict with ``autoregressive`` and ``speculative`` blocks (tokens/s, ms/token,
    TTFT ms, forwards; speculative adds α, mean accepted, histogram, per-position
    acceptance and the per-round breakdown), ``speedup`` (ratio of tokens/s), the
    ``cost_model`` block (α, c, step times, the Leviathan prediction
    ``walltime_improvement(α, γ, c)``, the forward-time prediction (no overhead), the same
    with the measured tokens per round instead of the α formula, and the prediction
    including the measured overhead) and ``greedy_equal`` (output ids identical).
    """
    a, s = ar.stats, sp.stats
    rounds = max(s.rounds, 1)
    target_step = a.target_forward_ms / max(a.target_forwards, 1)
    draft_step = s.draft_forward_ms / max(s.draft_forwards, 1)
    verify = s.target_forward_ms / rounds
    forward_per_round = (s.target_forward_ms + s.draft_forward_ms) / rounds
    overhead = s.overhead_ms / rounds
    alpha = min(max(s.acceptance_rate, 0.0), 1.0)
    c = draft_step / target_step if target_step > 0 else 0.0
    advanced = s.new_tokens / rounds  # tokens actually advanced per round
    draft_per_round = gamma * draft_step
    return {
        "gamma": gamma,
        "autoregressive": {
            "tokens_per_s": a.tokens_per_s,
            "ms_per_token": a.ms_per_token,
            "ttft_ms": a.ttft_ms,
            "new_tokens": a.new_tokens,
            "target_forwards": a.target_forwards,
            "target_step_ms": target_step,
            "overhead_ms_per_token": a.overhead_ms / max(a.new_tokens, 1),
        },
        "speculative": {
            "tokens_per_s": s.tokens_per_s,
            "ms_per_token": s.ms_per_token,
            "ttft_ms": s.ttft_ms,
            "new_tokens": s.new_tokens,
            "rounds": s.rounds,
            "target_forwards": s.target_forwards,
            "draft_forwards": s.draft_forwards,
            "mean_accepted": s.mean_accepted,
            "acceptance_rate": s.acceptance_rate,
            "accepted_histogram": list(s.accepted_histogram),
            "per_position_acceptance": list(s.per_position_acceptance),
            "draft_ms_per_round": s.draft_ms / rounds,
            "verify_ms_per_round": s.verify_ms / rounds,
            "overhead_ms_per_round": max(0.0, s.total_ms - s.draft_ms - s.verify_ms) / rounds,
            "round_ms": s.total_ms / rounds,
            "draft_forward_ms_per_round": s.draft_forward_ms / rounds,
            "verify_forward_ms_per_round": verify,
            "non_forward_ms_per_round": overhead,
            "non_forward_pct": 100.0 * s.overhead_ms / s.total_ms if s.total_ms else 0.0,
        },
        "speedup": s.tokens_per_s / a.tokens_per_s if a.tokens_per_s else 0.0,
        "cost_model": {
            "alpha": alpha,
            "c": c,
            "target_step_ms": target_step,
            "draft_step_ms": draft_step,
            "verify_ms": verify,
            "verify_over_target_step": verify / target_step if target_step > 0 else 0.0,
            "overhead_ms": overhead,
            "expected_tokens_per_round": expected_tokens_per_round(alpha, gamma),
            "measured_tokens_per_round": advanced,
            "leviathan_speedup": walltime_improvement(alpha, gamma, c),
            "forward_time_speedup": (
                forward_time_speedup(alpha, gamma, target_step, draft_step, verify)
                if target_step > 0
                else 0.0
            ),
            "forward_time_speedup_measured_advance": (
                target_step / per_token_cost_ms(draft_per_round, verify, 0.0, advanced)
                if target_step > 0 and forward_per_round > 0
                else 0.0
            ),
            "predicted_speedup": (
                predicted_speedup(alpha, gamma, target_step, draft_step, verify, overhead)
                if target_step > 0
                else 0.0
            ),
        },
        "breakdown": {
            "tokens_per_round": advanced,
            "round": {
                "draft": s.draft_forward_ms / rounds,
                "verify": verify,
                "overhead": overhead,
            },
            "target_only": {
                "target": target_step * advanced,
                "overhead": a.overhead_ms / max(a.new_tokens, 1) * advanced,
            },
            "shares_pct": {
                "draft": 100.0 * s.draft_forward_ms / s.total_ms if s.total_ms else 0.0,
                "verify": 100.0 * s.target_forward_ms / s.total_ms if s.total_ms else 0.0,
                "overhead": 100.0 * s.overhead_ms / s.total_ms if s.total_ms else 0.0,
            },
        },
        "greedy_equal": sp.output_ids == ar.output_ids,
    }


def compare_hf(ar: GenerationResult, hf_greedy: dict | None, hf_assisted: dict | None) -> dict:
    """HF figures next to ours: tokens/s, speed-ups and whether HF's texts equal our
    target-only text (compared over the common length). Either HF run may be ``None``."""
    out: dict = {}
    ar_tps = ar.stats.tokens_per_s
    for name, run in (("hf_greedy", hf_greedy), ("hf_assisted", hf_assisted)):
        if run is None:
            continue
        n = min(len(run["output_ids"]), len(ar.output_ids))
        out[name] = {
            "tokens_per_s": run["tokens_per_s"],
            "ms_per_token": run["ms_per_token"],
            "new_tokens": run["new_tokens"],
            "target_forwards": run["target_forwards"],
            "speedup": run["tokens_per_s"] / ar_tps if ar_tps else 0.0,
            "equal_to_target": run["output_ids"][:n] == ar.output_ids[:n],
        }
        if name == "hf_assisted":
            out[name]["mean_accepted"] = run["mean_accepted"]
    if hf_greedy and hf_assisted and hf_greedy["tokens_per_s"]:
        out["hf_assisted"]["speedup_over_hf_greedy"] = (
            hf_assisted["tokens_per_s"] / hf_greedy["tokens_per_s"]
        )
    return out


def best_point(points: Sequence[dict], key: str) -> dict | None:
    """The point with the largest ``key`` (first on ties), ``None`` for no points."""
    return max(points, key=lambda p: p[key]) if points else None


def batch_crossover(points: Sequence[dict]) -> int | None:
    """The smallest batch size at which batched target-only throughput beats sequential
    speculative throughput (``None``: it never does among ``points``)."""
    for p in sorted(points, key=lambda p: p["batch_size"]):
        if p["batched_autoregressive_tokens_per_s"] > p["sequential_speculative_tokens_per_s"]:
            return p["batch_size"]
    return None


def run_bench(
    pair_spec: str | tuple[str, str] | ModelPair,
    prompt: str,
    gamma: int = 4,
    max_new_tokens: int = 128,
    repeats: int = 3,
    temperature: float = 0.0,
    hf: bool = True,
    ignore_eos: bool = True,
    drafter: str = "model",
) -> dict:
    """Benchmark one pair; returns the ``bench`` JSON object of docs/ARCHITECTURE.md plus details.

    Contract keys: ``autoregressive`` {tokens_per_s, ms_per_token}, ``speculative``
    {tokens_per_s, ms_per_token, mean_accepted}, ``speedup`` (speculative / autoregressive
    tokens/s), ``device``, ``pair`` and, where it runs, ``hf_assisted`` {tokens_per_s,
    ms_per_token, speedup (over our target-only run), speedup_over_hf_greedy,
    mean_accepted, equal_to_target} and ``hf_greedy`` {tokens_per_s, ms_per_token}. Details:
    see :func:`summarize`; ``greedy_equal`` only at temperature 0; ``hf_assisted_error``
    where assisted generation failed. ``ignore_eos`` (default): every run generates
    exactly ``max_new_tokens`` tokens (cut by the context).

    Raises:
        ModelLoadError, PromptError, ConfigError.
    """
    pair = pair_spec if isinstance(pair_spec, ModelPair) else load_pair(pair_spec)
    timed = ignoring_eos(pair) if ignore_eos else pair
    config = SessionConfig(gamma=gamma, temperature=temperature, max_new_tokens=max_new_tokens)
    ar, sp = measure_pair(timed, prompt, config, repeats, drafter)
    result = {
        "pair": pair.name,
        "device": pair.device_label(),
        "threads": torch.get_num_threads(),
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "repeats": repeats,
        "drafter": drafter,
        "ignore_eos": ignore_eos,
        **summarize(ar, sp, gamma),
    }
    if temperature != 0.0:
        del result["greedy_equal"]
    if hf:
        try:
            base = hf_generate(pair, prompt, gamma, max_new_tokens, repeats, False, not ignore_eos)
            asst = hf_generate(pair, prompt, gamma, max_new_tokens, repeats, True, not ignore_eos)
            result.update(compare_hf(ar, base, asst))
        except Exception as exc:  # noqa: BLE001 - report, never fail the benchmark
            result["hf_assisted_error"] = f"{type(exc).__name__}: {exc}"
    return result


def gamma_sweep_point(ar: GenerationResult, sp: GenerationResult, gamma: int) -> dict:
    """One point of the γ sweep: measured tokens/s and speed-up at this γ next to the cost
    model's predictions from the same runs (see :func:`summarize`)."""
    summary = summarize(ar, sp, gamma)
    cm = summary["cost_model"]
    return {
        "gamma": gamma,
        "speculative_tokens_per_s": summary["speculative"]["tokens_per_s"],
        "autoregressive_tokens_per_s": summary["autoregressive"]["tokens_per_s"],
        "speedup": summary["speedup"],
        "alpha": cm["alpha"],
        "mean_accepted": summary["speculative"]["mean_accepted"],
        "c": cm["c"],
        "leviathan_speedup": cm["leviathan_speedup"],
        "forward_time_speedup": cm["forward_time_speedup"],
        "forward_time_speedup_measured_advance": cm["forward_time_speedup_measured_advance"],
        "greedy_equal": summary["greedy_equal"],
    }


def _median_rate(run: Callable[[], tuple[int, float]], repeats: int) -> float:
    run()  # warm-up
    rates = [1e3 * tokens / ms for tokens, ms in (run() for _ in range(max(1, repeats)))]
    return statistics.median(rates)


def batched_throughput(
    pair: ModelPair, prompts: Sequence[str], max_new_tokens: int, repeats: int = 1
) -> float:
    """Tokens/s (summed over the batch) of :func:`batching.generate_batch` over
    ``prompts`` at once, EOS ignored so each prompt gets ``max_new_tokens`` tokens. Median
    of ``repeats`` after a warm-up."""
    timed = ignoring_eos(pair)

    def run() -> tuple[int, float]:
        r = generate_batch(timed, list(prompts), max_new_tokens, stop_at_eos=False)
        return r.new_tokens, r.total_ms

    return _median_rate(run, repeats)


def sequential_throughput(
    pair: ModelPair, prompts: Sequence[str], config: SessionConfig, mode: str, repeats: int = 1
) -> float:
    """Tokens/s of :func:`generate` run on ``prompts`` one after another (``mode``
    ``speculative`` or ``autoregressive``), EOS ignored. Median of ``repeats`` after a
    warm-up."""
    timed = ignoring_eos(pair)

    def run() -> tuple[int, float]:
        results = [generate(timed, p, config, mode) for p in prompts]  # type: ignore[arg-type]
        return sum(r.stats.new_tokens for r in results), sum(r.stats.total_ms for r in results)

    return _median_rate(run, repeats)


def batch_sweep_point(
    pair: ModelPair,
    prompts: Sequence[str],
    config: SessionConfig,
    repeats: int = 1,
) -> dict:
    """One point of the batch-size sweep, ``B = len(prompts)``, ignoring EOS so every
    prompt gets ``config.max_new_tokens`` tokens: throughput (tokens/s over all prompts) of
    batched target-only decoding (one forward per step for the batch) vs running the
    prompts one after another with speculative decoding and with target-only decoding."""
    n = config.max_new_tokens
    return {
        "batch_size": len(prompts),
        "batched_autoregressive_tokens_per_s": batched_throughput(pair, prompts, n, repeats),
        "sequential_speculative_tokens_per_s": sequential_throughput(
            pair, prompts, config, "speculative", repeats
        ),
        "sequential_autoregressive_tokens_per_s": sequential_throughput(
            pair, prompts, config, "autoregressive", repeats
        ),
    }
