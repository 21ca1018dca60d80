"""Timed runs: our target-only and speculative generation, interleaved, and Hugging Face
``generate`` with and without an assistant. Median of ``repeats`` runs after a warm-up;
times in ms, throughput in tokens/s. The shared models are never changed."""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass, replace

import torch

from specdec_core.bench.results import HFRun, RunSpread
from specdec_core.bench.timing import HowMeasured, Spread
from specdec_core.core.device import sync
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.models import ModelPair, quiet_transformers
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, generate


def ignoring_eos(pair: ModelPair) -> ModelPair:
    """A view of ``pair`` whose generation does not stop at EOS (same models, shared and
    unchanged), so every timed run produces exactly ``max_new_tokens`` tokens."""
    return replace(pair, eos_token_id=None)


@dataclass(frozen=True)
class PairRuns:
    """:func:`measure_pair_runs`: the median target-only and speculative runs and
    ``spread``: each lane's ms per generated token over the repeats, how they were
    measured."""

    autoregressive: GenerationResult
    speculative: GenerationResult
    spread: RunSpread


def measure_pair_runs(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    repeats: int = 3,
    drafter: str = "model",
    warmup: bool = True,
) -> PairRuns:
    """Target-only and speculative runs of the same prompt and settings, *interleaved*
    (AR, speculative, AR, …) so a burst of load on a shared machine hits both alike; each
    lane's run with the median ms per generated token of ``repeats`` (with an even count,
    the upper of the two middle runs), after one warm-up run of each, with the spread of ms
    per generated token over the repeats. The spread's ``median`` is that run's ms per
    token, so the spread caption, the run's tokens/s and the speed-up use one number.

    Raises:
        PromptError, ConfigError: from :func:`generate`.
    """

    def once(mode: str) -> GenerationResult:
        made = make_named_drafter(pair, drafter) if mode == "speculative" else None
        return generate(pair, prompt, config, mode, made, trace_timeline=True)  # type: ignore[arg-type]

    if warmup:
        once("autoregressive")
        once("speculative")
    runs: dict[str, list[GenerationResult]] = {"autoregressive": [], "speculative": []}
    for _ in range(max(1, repeats)):
        for mode, done in runs.items():
            done.append(once(mode))
    picked: list[GenerationResult] = []
    spreads: list[Spread] = []
    for lane in runs.values():
        lane.sort(key=_ms_per_token)
        run = lane[len(lane) // 2]  # with an even count, the upper of the two middle runs
        picked.append(run)
        # the shown run *is* the median: caption, tiles, table and speed-up use one number
        spreads.append(
            replace(Spread.of([_ms_per_token(g) for g in lane]), median=_ms_per_token(run))
        )
    how = HowMeasured.now(len(runs["autoregressive"]), int(warmup), config.max_new_tokens)
    return PairRuns(picked[0], picked[1], RunSpread(spreads[0], spreads[1], how))


def _ms_per_token(run: GenerationResult) -> float:
    """ms per generated token of one run (``GenerationStats.ms_per_token``: 0 with none)."""
    return run.stats.ms_per_token


def measure_pair(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    repeats: int = 3,
    drafter: str = "model",
    warmup: bool = True,
) -> tuple[GenerationResult, GenerationResult]:
    """:func:`measure_pair_runs` without the spread.

    Returns:
        ``(autoregressive, speculative)`` :class:`GenerationResult` s.

    Raises:
        PromptError, ConfigError: from :func:`generate`.
    """
    runs = measure_pair_runs(pair, prompt, config, repeats, drafter, warmup)
    return runs.autoregressive, runs.speculative


def hf_generate(
    pair: ModelPair,
    prompt: str,
    gamma: int,
    max_new_tokens: int,
    repeats: int = 3,
    assisted: bool = True,
    stop_at_eos: bool = True,
    warmup: bool = True,
) -> HFRun:
    """Time Hugging Face ``target.generate`` (greedy), with ``assistant_model=draft`` at a
    constant γ (``num_assistant_tokens_schedule="constant"``, no confidence early-stop) or
    without (``assisted=False``: HF's own target-only baseline); one untimed warm-up run
    first unless ``warmup=False`` (a caller that warmed up already).

    The shared models are not changed: generation runs on shallow copies that carry their
    own ``generation_config`` (HF reads γ from the *assistant's* config and would otherwise
    adapt it in place) and count the target forwards (``rounds``).

    Returns:
        The median run's :class:`HFRun` (``mean_accepted`` estimated as
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
        if warmup:
            target.generate(ids, **kwargs)
        runs = []
        for _ in range(max(1, repeats)):
            calls[0] = 0
            started = time.perf_counter()
            out = target.generate(ids, **kwargs)
            sync(pair.device)
            runs.append(((time.perf_counter() - started) * 1e3, out, calls[0]))
    runs.sort(key=lambda r: r[0])
    ms, out, forwards = runs[len(runs) // 2]
    new = out[0, ids.shape[1] :].tolist()
    n = len(new)
    return HFRun(
        tokens_per_s=1e3 * n / ms if ms > 0 else 0.0,
        ms_per_token=ms / max(n, 1),
        new_tokens=n,
        output_ids=tuple(new),
        target_forwards=forwards,
        mean_accepted=(n - forwards) / forwards if assisted and forwards else 0.0,
    )
