"""Verify is not free: the target's forward time for ``k`` new tokens on top of a cached
prefix, ``k = 1 … 2γ + 1``, and the draft's single-token step, each the median of a few
repeats after a warm-up (CUDA synchronised inside ``ModelCache``, as in the runs).

On a 2-core CPU a 5-token verification costs about two single steps; on a GPU with a large
target the curve ``t(k) / t(1)`` is nearly flat, which is what Leviathan et al.'s Thm 3.8
assumes. The cost model reads ``t(γ + 1)`` (or ``t(drafts + 1)``) off this curve.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ..drafters import make_named_drafter
from ..kvcache import ModelCache
from ..models import ModelPair
from ..session import encode_prompt

MAX_K = 17  # 2γ + 1 at γ = 8, the largest γ the page offers
CURVE_REPEATS = 15  # repeats per k for the benchmark's curve (a forward takes ~2-3 ms here)


@dataclass(frozen=True)
class ForwardCurve:
    """``target_ms[k - 1]`` = median ms of one target forward over ``k`` new tokens
    (``k = 1 … len``); ``draft_step_ms`` one single-token step of the drafter's model (0
    for a drafter without a model, prompt lookup)."""

    target_ms: tuple[float, ...]
    draft_step_ms: float
    repeats: int

    def by_tokens(self) -> dict[int, float]:
        """``{k: ms}``, the cost model's curve."""
        return {k: ms for k, ms in enumerate(self.target_ms, start=1)}

    def ratio(self) -> list[float]:
        """``t(k) / t(1)``."""
        return [ms / self.target_ms[0] for ms in self.target_ms]


def _timed(cache: ModelCache, prefix: list[int], new: list[int], last_only: bool) -> float:
    """One forward over ``new`` after ``prefix`` (cached; cropped back after), in ms."""
    cache.sync_to(prefix + new[:1])  # keeps ``prefix`` cached (computed once)
    before = cache.forward_ms
    if last_only:
        cache.extend_last(new)
    else:
        cache.extend(new)
    ms = cache.forward_ms - before
    cache.crop(len(prefix))
    return ms


def _medians(
    cache: ModelCache, prefix: list[int], inputs: list[list[int]], repeats: int, last_only: bool
) -> tuple[float, ...]:
    """Median ms per input after one warm-up pass; the repeats go round-robin over the
    inputs so a burst of load on a shared machine hits every ``k`` alike."""
    for new in inputs:
        _timed(cache, prefix, new, last_only)
    times: list[list[float]] = [[] for _ in inputs]
    for _ in range(repeats):
        for i, new in enumerate(inputs):
            times[i].append(_timed(cache, prefix, new, last_only))
    return tuple(statistics.median(t) for t in times)


def _proposal_step_ms(drafter, context: list[int], repeats: int, gamma: int = 4) -> float:
    """Drafter time (ms, its own ``forward_ms``) per drafted token of a ``gamma``-token
    greedy proposal after ``context``, median of ``repeats`` after a warm-up: the draft step
    of a drafter without a plain model cache (the EAGLE head: head forwards + the target's
    LM head rows). 0 for a drafter that runs no model (prompt lookup) or proposes nothing."""
    drafter.propose_argmax(context, gamma)  # warm-up; catches its cache up on the context
    times = []
    for _ in range(repeats):
        before = drafter.forward_ms
        drafted, _ = drafter.propose_argmax(context, gamma)
        if not drafted:
            return 0.0
        times.append((drafter.forward_ms - before) / len(drafted))
    return statistics.median(times)


def measure_forward_curve(
    pair: ModelPair,
    prompt: str | list[int],
    max_k: int,
    repeats: int = 3,
    drafter: str = "model",
) -> ForwardCurve:
    """Measure ``t(k)`` for ``k = 1 … max_k`` (capped at :data:`MAX_K` and by the context)
    and the draft step, on the prompt as the cached prefix. The shared models are only
    read; each gets a cache of its own.

    Raises:
        PromptError: from :func:`encode_prompt`.
    """
    ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
    prefix = ids[:-1] or ids
    room = max(1, pair.context_length - len(prefix))
    ks = range(1, max(1, min(max_k, MAX_K, room)) + 1)
    filler = (ids * (MAX_K // max(len(ids), 1) + 2))[: ks[-1]]  # any ids: only time counts
    r = max(1, repeats)
    with torch.inference_mode():
        target = ModelCache(pair.target)
        made = make_named_drafter(pair, drafter)
        made.attach(target)  # before the first forward (eagle keeps the hidden states)
        target.extend(prefix)
        curve = _medians(target, prefix, [filler[:k] for k in ks], r, False)
        draft_kv = getattr(made, "kv", None)
        step = 0.0
        if isinstance(draft_kv, ModelCache):
            draft_kv.extend(prefix)
            (step,) = _medians(draft_kv, prefix, [filler[:1]], r, True)
        elif len(ids) > 1:
            step = _proposal_step_ms(made, ids, r)
    return ForwardCurve(target_ms=curve, draft_step_ms=step, repeats=r)
