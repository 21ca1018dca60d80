"""The whole benchmark of one pair (:func:`run_bench`, ``python -m specdec_core bench``):
target-only and speculative runs interleaved, the verify-cost curve, :func:`summarize`,
and Hugging Face ``generate`` without and with the draft as assistant next to ours
(:func:`compare_hf`).
"""

from __future__ import annotations

import torch

from specdec_core.bench.curve import CURVE_REPEATS, measure_forward_curve
from specdec_core.bench.results import BenchReport, HFComparison, HFFigures, HFRun
from specdec_core.bench.runs import hf_generate, ignoring_eos, measure_pair_runs
from specdec_core.bench.summary import summarize
from specdec_core.core.models import ModelPair, load_pair
from specdec_core.core.quant import quantized_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import GenerationResult


def compare_hf(
    ar: GenerationResult, hf_greedy: HFRun | None, hf_assisted: HFRun | None
) -> HFComparison:
    """HF figures next to ours: tokens/s, speed-ups and whether HF's texts equal our
    target-only text (compared over the common length). Either HF run may be ``None``."""
    ar_tps = ar.stats.tokens_per_s

    def figures(run: HFRun, **assisted: float | None) -> HFFigures:
        n = min(len(run.output_ids), len(ar.output_ids))
        return HFFigures(
            tokens_per_s=run.tokens_per_s,
            ms_per_token=run.ms_per_token,
            new_tokens=run.new_tokens,
            target_forwards=run.target_forwards,
            speedup=run.tokens_per_s / ar_tps if ar_tps else 0.0,
            equal_to_target=list(run.output_ids[:n]) == list(ar.output_ids[:n]),
            **assisted,
        )

    greedy = figures(hf_greedy) if hf_greedy is not None else None
    assisted = None
    if hf_assisted is not None:
        over_greedy = None
        if hf_greedy is not None and hf_greedy.tokens_per_s:
            over_greedy = hf_assisted.tokens_per_s / hf_greedy.tokens_per_s
        assisted = figures(
            hf_assisted,
            mean_accepted=hf_assisted.mean_accepted,
            speedup_over_hf_greedy=over_greedy,
        )
    return HFComparison(greedy=greedy, assisted=assisted)


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
    target_quant: str = "none",
    acceptance: dict | None = None,
) -> BenchReport:
    """Benchmark one pair; ``.to_json()`` is the ``bench`` JSON object of
    docs/ARCHITECTURE.md. Target-only and speculative runs interleaved (see
    :func:`measure_pair`), then, with ``hf``, Hugging Face ``generate`` without and with
    the draft as assistant (a failure of HF's is reported in ``hf_error``, never raised).
    ``ignore_eos`` (default): every run generates exactly ``max_new_tokens`` tokens (cut by
    the context). ``target_quant`` (``none``/``int8``/``int4``): time a fake-quantized copy
    of the target (``core/quant.py``); ``acceptance``: ``SessionConfig`` keywords of a
    lossy verification rule (``acceptance``, ``acceptance_delta``, …).

    Raises:
        ModelLoadError, PromptError, ConfigError.
    """
    pair = pair_spec if isinstance(pair_spec, ModelPair) else load_pair(pair_spec)
    pair = quantized_pair(pair, target_quant)
    timed = ignoring_eos(pair) if ignore_eos else pair
    config = SessionConfig(
        gamma=gamma, temperature=temperature, max_new_tokens=max_new_tokens, **(acceptance or {})
    )
    runs = measure_pair_runs(timed, prompt, config, repeats, drafter)
    ar, sp = runs.autoregressive, runs.speculative
    # the curve's forwards take milliseconds: a median of 5 moved t(2)/t(1) by ±0.15 on a
    # shared CPU (1.04-1.49 seen), a median of 15 by ±0.03
    curve = measure_forward_curve(
        pair, prompt, 2 * gamma + 1, max(CURVE_REPEATS, repeats), drafter, None, max_new_tokens
    )
    compared, error = HFComparison(), None
    if hf:
        try:
            base = hf_generate(pair, prompt, gamma, max_new_tokens, repeats, False, not ignore_eos)
            asst = hf_generate(pair, prompt, gamma, max_new_tokens, repeats, True, not ignore_eos)
            compared = compare_hf(ar, base, asst)
        except Exception as exc:  # noqa: BLE001 - report, never fail the benchmark
            error = f"{type(exc).__name__}: {exc}"
    return BenchReport(
        pair=pair.name,
        device=pair.device_label(),
        threads=torch.get_num_threads(),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        repeats=repeats,
        drafter=drafter,
        ignore_eos=ignore_eos,
        summary=summarize(ar, sp, gamma, curve, runs.spread),
        curve=curve,
        hf=compared,
        hf_error=error,
    )
