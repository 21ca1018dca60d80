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

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec_core.bench.timing import HowMeasured, Spread, Verdict, judge
from specdec_core.core.device import sync
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import make_named_drafter

MAX_K = 17  # 2γ + 1 at γ = 8, the largest γ the page offers
CURVE_REPEATS = 15  # repeats per k for the benchmark's curve (a forward takes ~2-3 ms here)
WARMUP_PASSES = 2  # untimed round-robin passes first (the first forwards run cold)
# Untimed rounds before a timed one: after the curve's target forwards a small drafter's
# forward runs slower for a few rounds, as in no run (measured on a 2-core CPU, the block
# drafter's one forward in rounds 1-4: 0.45, 0.40, 0.38, 0.37 ms; 0.38 ms in a run).
ROUND_WARMUP = 3


@dataclass(frozen=True)
class ForwardCurve:
    """``target_ms[k - 1]`` = median ms of one target forward over ``k`` new tokens
    (``k = 1 … len``), back to back with the other ``k``; ``draft_step_ms`` one
    single-token step of the drafter's model, or per draft of a whole proposal for a
    drafter without a plain model cache (the EAGLE head's catch-up and steps with the
    target's LM head rows, an MTP head evaluation); 0 for prompt lookup.

    A round as it runs (:func:`_round_timer`, after :data:`ROUND_WARMUP` rounds back to
    back): ``draft_round_ms`` is the median of its γ-draft proposal -- the drafter's
    forward time (the block's one forward) or, for a drafter that runs no forward
    (``draft_cost == "none"``), the proposal's wall time (the n-gram lookup);
    ``round_drafts`` the drafts it made; ``round_verify_ms`` the median of the
    verification forward over those drafts + 1 right after it, when the drafter's work
    has just run beside the target's.
    ``draft_cost``: what the drafter runs per round (``Drafter.draft_cost``). Serial and
    head drafters are priced per draft at :meth:`round_step_ms`, one draft of that round:
    a lone step (``draft_step_ms``, the ``c`` shown) is the cold first step of a round,
    the later ones follow a step of their own (the int8 draft model: 4 lone steps 1.11 ms,
    a round 0.78 ms in the run)."""

    target_ms: tuple[float, ...]
    draft_step_ms: float
    repeats: int
    target_spread: tuple[Spread, ...] = ()  # per k, the repeats' spread (ms)
    draft_spread: Spread | None = None  # the draft step's (None: no model drafts)
    how: HowMeasured | None = None
    draft_cost: str = "serial"
    draft_round_ms: float = 0.0
    round_drafts: int = 0
    round_verify_ms: float = 0.0

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

    def round_step_ms(self) -> float:
        """``draft_round_ms / round_drafts``, one draft of a round as it runs (ms);
        ``draft_step_ms`` when no round was measured or it drafted nothing."""
        if self.round_drafts > 0 and self.draft_round_ms > 0:
            return self.draft_round_ms / self.round_drafts
        return self.draft_step_ms

    def verify_level(self) -> float:
        """``round_verify_ms / t(round_drafts + 1)``: a verification in a round over the
        same forward alone, back to back with other target forwards (1.0 when no round
        was measured). The cost model reads ``t(g + 1) × verify_level()``."""
        k = self.round_drafts + 1
        if self.round_verify_ms <= 0 or k > len(self.target_ms) or self.target_ms[k - 1] <= 0:
            return 1.0
        return self.round_verify_ms / self.target_ms[k - 1]


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


def _proposal_timer(drafter, context: list[int], gamma: int = 4) -> Callable[[], float]:
    """A timer of the drafter's time (ms, its own ``forward_ms``) per drafted token of a
    ``gamma``-token greedy proposal after ``context`` (the draft step of a drafter without
    a plain model cache: the EAGLE head's forwards + the target's LM head rows, an MTP
    head evaluation). The drafter is rolled back by one token first, so each proposal
    catches up on the newest committed token as a round's does (EAGLE: one head forward
    over its real feature). 0 for a drafter that runs no model or proposes nothing."""

    def timer() -> float:
        drafter.rollback(len(context) - 1)
        before = drafter.forward_ms
        drafted, _ = drafter.propose_argmax(context, gamma)
        return (drafter.forward_ms - before) / len(drafted) if drafted else 0.0

    return timer


def _round_timer(
    drafter, target: ModelCache, prefix: list[int], context: list[int], gamma: int, out: list
) -> Callable[[], float]:
    """A timer of one round as it runs, after ``prefix`` (cached): :data:`ROUND_WARMUP`
    untimed rounds, then the timed one, back to back as in a run. A round: a
    ``gamma``-draft greedy proposal after ``context`` (the drafter rolled back by one
    token, so it catches up on the newest token as a round's proposal does), then the
    target's verification forward over ``context[-1:] + drafts``; both rolled back after.
    Returns the timed proposal's ms -- the drafter's forward time, or its wall time for a
    drafter that runs no forward (prompt lookup: the lookup itself) -- and appends
    ``(drafts, verification ms)`` to ``out``."""
    wall = drafter.draft_cost == "none"

    def one_round() -> tuple[float, int, float]:
        drafter.rollback(len(context) - 1)
        target.sync_to(context)  # the prefix cached, as after a round's rollback
        before, started = drafter.forward_ms, time.perf_counter()
        drafted, _ = drafter.propose_argmax(context, gamma)
        sync(target.device)
        ms = (time.perf_counter() - started) * 1e3 if wall else drafter.forward_ms - before
        return ms, len(drafted), _timed(target, prefix, context[-1:] + drafted, False)

    def timer() -> float:
        for _ in range(ROUND_WARMUP):
            one_round()
        ms, drafts, verify_ms = one_round()
        out.append((drafts, verify_ms))
        return ms

    return timer


def measure_forward_curve(
    pair: ModelPair,
    prompt: str | list[int],
    max_k: int,
    repeats: int = 3,
    drafter: str | Drafter = "model",
    gamma: int | None = None,
) -> ForwardCurve:
    """Measure ``t(k)`` for ``k = 1 … max_k`` (capped at :data:`MAX_K` and by the context),
    the draft step, and a round as it runs (:func:`_round_timer`: a ``gamma``-draft
    proposal, default ``(max_k − 1) // 2``, the γ of ``max_k = 2γ + 1``, then its
    verification), on the prompt as the cached prefix, round-robin. ``drafter``: a name
    (:func:`make_named_drafter`) or a fresh drafter not yet attached. The shared models are
    only read; each gets a cache of its own. The drafter's cache or recurrent state holds
    the prefix before any timing, so a rollback by one token leaves each timed proposal
    the newest token to read, as a run's (a recurrent state restores its checkpoint there;
    without one it would read the whole prompt again in every proposal).

    Raises:
        PromptError: from :func:`encode_prompt`.
    """
    ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
    prefix = ids[:-1] or ids
    room = max(1, pair.context_length - len(prefix))
    ks = range(1, max(1, min(max_k, MAX_K, room)) + 1)
    filler = (ids * (MAX_K // max(len(ids), 1) + 2))[: ks[-1]]  # any ids: only time counts
    r = max(1, repeats)
    g = max(1, min(gamma if gamma is not None else (max_k - 1) // 2, ks[-1] - 1))
    rounds: list[tuple[int, float]] = []
    with torch.inference_mode():
        target = ModelCache(pair.target)
        made = make_named_drafter(pair, drafter) if isinstance(drafter, str) else drafter
        made.attach(target)  # before the first forward (eagle keeps the hidden states)
        target.extend(prefix)
        timers: list[Callable[[], float]] = [
            (lambda new=filler[:k]: _timed(target, prefix, new, False)) for k in ks
        ]
        whole = len(ids) > 1  # a round needs a committed token after the prefix
        if whole and made.state_view() is not None:  # a checkpoint after the prefix
            made.propose_argmax(prefix, 1)
        if whole:  # right after the target's forwards, as in a round (verify, then draft)
            timers.append(_round_timer(made, target, prefix, ids, g, rounds))
        draft_kv = getattr(made, "kv", None)
        if isinstance(draft_kv, ModelCache):
            draft_kv.extend(prefix)
            timers.append(lambda: _timed(draft_kv, prefix, filler[:1], True))
        elif whole:
            timers.append(_proposal_timer(made, ids))
        times = round_robin(timers, r)
    spreads = tuple(Spread.of(ts) for ts in times)
    target_spread, draft = spreads[: len(ks)], spreads[len(ks) + int(whole) :]
    draft_spread = draft[0] if draft and draft[0].high > 0 else None
    timed_rounds = rounds[-r:]  # the warm-up passes' rounds are not timings
    return ForwardCurve(
        target_ms=tuple(sp.median for sp in target_spread),
        draft_step_ms=draft_spread.median if draft_spread else 0.0,
        repeats=r,
        target_spread=target_spread,
        draft_spread=draft_spread,
        how=HowMeasured.now(r, WARMUP_PASSES, ks[-1]),
        draft_cost=made.draft_cost,
        draft_round_ms=spreads[len(ks)].median if whole else 0.0,
        round_drafts=timed_rounds[-1][0] if timed_rounds else 0,
        round_verify_ms=statistics.median(v for _, v in timed_rounds) if timed_rounds else 0.0,
    )
