"""Verify is not free: the target's forward time for ``k`` new tokens on top of a cached
prefix, ``k = 1 … 2γ + 1``, and the draft's single-token step, each the median of a few
repeats after warm-up passes (CUDA synchronised inside ``ModelCache``, as in the runs).
Every ``k`` and the draft step are timed round-robin within each repeat, so a burst of
load on a shared machine hits them alike; the spread of each and how the curve was
measured are kept, and :meth:`ForwardCurve.verdict` says whether the curve supports a
conclusion (``timing.judge``).

On a 2-core CPU a 5-token verification costs about two single steps; on a GPU with a large
target the curve ``t(k) / t(1)`` is nearly flat, which is what Leviathan et al.'s Thm 3.8
assumes. The cost model reads ``t(γ + 1)`` (or ``t(drafts + 1)``) off this curve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec_core.bench.timing import HowMeasured, Spread, Verdict, judge
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.drafters import make_named_drafter

MAX_K = 17  # 2γ + 1 at γ = 8, the largest γ the page offers
CURVE_REPEATS = 15  # repeats per k for the benchmark's curve (a forward takes ~2-3 ms here)
WARMUP_PASSES = 2  # untimed round-robin passes first (the first forwards run cold)


@dataclass(frozen=True)
class ForwardCurve:
    """``target_ms[k - 1]`` = median ms of one target forward over ``k`` new tokens
    (``k = 1 … len``); ``draft_step_ms`` one single-token step of the drafter's model (0
    for a drafter without a model, prompt lookup); ``draft_cost`` what the drafter runs
    per round (``Drafter.draft_cost``) and, for ``one_forward``, ``draft_round_ms``: the
    median ms of one whole γ-draft proposal (one forward over the new token + γ − 1
    masks), what the cost model prices such a round at."""

    target_ms: tuple[float, ...]
    draft_step_ms: float
    repeats: int
    target_spread: tuple[Spread, ...] = ()  # per k, the repeats' spread (ms)
    draft_spread: Spread | None = None  # the draft step's (None: no model drafts)
    how: HowMeasured | None = None
    draft_cost: str = "serial"
    draft_round_ms: float = 0.0

    def verdict(self) -> Verdict:
        """Whether this curve supports a conclusion (:func:`timing.judge`: repeats agree,
        monotone, not superlinear)."""
        spreads = self.target_spread + ((self.draft_spread,) if self.draft_spread else ())
        return judge(spreads, self.target_ms)

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


def round_robin(
    timers: Sequence[Callable[[], float]], repeats: int, warmup: int = WARMUP_PASSES
) -> list[list[float]]:
    """``warmup`` untimed passes over ``timers``, then ``repeats`` passes each calling every
    timer once, in order (interleaved: a burst of load hits every timer alike). Returns
    each timer's ``repeats`` results (ms)."""
    for _ in range(max(0, warmup)):
        for timer in timers:
            timer()
    times: list[list[float]] = [[] for _ in timers]
    for _ in range(max(1, repeats)):
        for i, timer in enumerate(timers):
            times[i].append(timer())
    return times


def _proposal_timer(
    drafter, context: list[int], gamma: int = 4, per_token: bool = True
) -> Callable[[], float]:
    """A timer of the drafter's time (ms, its own ``forward_ms``) of a ``gamma``-token
    greedy proposal after ``context``, per drafted token (``per_token``: the draft step of
    a drafter without a plain model cache, the EAGLE head: head forwards + the target's LM
    head rows) or for the whole proposal. The drafter is rolled back by one token first,
    so each proposal catches up on the newest committed token as a round's does (EAGLE:
    one head forward over its real feature; a block: that token + the masks). 0 for a
    drafter that runs no model (prompt lookup) or proposes nothing."""

    def timer() -> float:
        drafter.rollback(len(context) - 1)
        before = drafter.forward_ms
        drafted, _ = drafter.propose_argmax(context, gamma)
        if not drafted:
            return 0.0
        return (drafter.forward_ms - before) / (len(drafted) if per_token else 1)

    return timer


def measure_forward_curve(
    pair: ModelPair,
    prompt: str | list[int],
    max_k: int,
    repeats: int = 3,
    drafter: str = "model",
    gamma: int | None = None,
) -> ForwardCurve:
    """Measure ``t(k)`` for ``k = 1 … max_k`` (capped at :data:`MAX_K` and by the context)
    and the draft step, on the prompt as the cached prefix; for a drafter whose round is
    one forward (``draft_cost == "one_forward"``) also a whole ``gamma``-draft proposal
    (default ``(max_k − 1) // 2``, the γ of ``max_k = 2γ + 1``). The shared models are
    only read; each gets a cache of its own.

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
        timers: list[Callable[[], float]] = [
            (lambda new=filler[:k]: _timed(target, prefix, new, False)) for k in ks
        ]
        draft_kv = getattr(made, "kv", None)
        whole = made.draft_cost == "one_forward" and len(ids) > 1
        if whole:  # right after the target's forwards, as in a round (verify, then draft)
            g = max(1, gamma if gamma is not None else (max_k - 1) // 2)
            timers.append(_proposal_timer(made, ids, g, per_token=False))
        if isinstance(draft_kv, ModelCache):
            draft_kv.extend(prefix)
            timers.append(lambda: _timed(draft_kv, prefix, filler[:1], True))
        elif len(ids) > 1:
            timers.append(_proposal_timer(made, ids))
        times = round_robin(timers, r)
    spreads = tuple(Spread.of(ts) for ts in times)
    target_spread, draft = spreads[: len(ks)], spreads[len(ks) + int(whole) :]
    draft_spread = draft[0] if draft and draft[0].high > 0 else None
    return ForwardCurve(
        target_ms=tuple(sp.median for sp in target_spread),
        draft_step_ms=draft_spread.median if draft_spread else 0.0,
        repeats=r,
        target_spread=target_spread,
        draft_spread=draft_spread,
        how=HowMeasured.now(r, WARMUP_PASSES, ks[-1]),
        draft_cost=made.draft_cost,
        draft_round_ms=spreads[len(ks)].median if whole else 0.0,
    )
