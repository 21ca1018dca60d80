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

Everything is timed in the state a run is in: given the run's length, after the prompt
and the target's greedy continuation over half of it (a forward attends to as many cached
positions as a mean forward of the run: on a 2-core CPU ``t(5)`` rose 6 % from 14 to 78
cached positions, ``t(1)`` 2 %), and the rounds are real greedy rounds
(``engine/chain/round.py``: propose, verify, commit, roll back), so what a proposal
catches up on (EAGLE's head: ~2.5 real features a round, not 1), how many it drafts and
how wide its verification is are a run's.
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
from specdec_core.core.kvcache import ModelCache, rollback
from specdec_core.core.models import ModelPair
from specdec_core.core.sampling import SamplingConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.round import ChainContext, propose_argmax, verify_argmax

MAX_K = 17  # 2γ + 1 at γ = 8, the largest γ the page offers
CURVE_REPEATS = 15  # repeats per k for the benchmark's curve (a forward takes ~2-3 ms here)
WARMUP_PASSES = 2  # untimed round-robin passes first (the first forwards run cold)
# Untimed rounds before a timed one: after the curve's target forwards a small drafter's
# forward runs slower for a few rounds, as in no run (measured on a 2-core CPU, the block
# drafter's one forward in rounds 1-4: 0.45, 0.40, 0.38, 0.37 ms; 0.38 ms in a run).
ROUND_WARMUP = 3
ROUND_SPAN = 16  # tokens the timed rounds advance before starting again from the same context


@dataclass(frozen=True)
class ForwardCurve:
    """``target_ms[k - 1]`` = median ms of one target forward over ``k`` new tokens
    (``k = 1 … len``), back to back with the other ``k``; ``draft_step_ms`` one
    single-token step of the drafter's model, or per draft of a whole proposal for a
    drafter without a plain model cache (the EAGLE head's catch-up and steps with the
    target's LM head rows, an MTP head evaluation); 0 for prompt lookup.

    Real rounds (:func:`_round_timer`: each timed one after :data:`ROUND_WARMUP` rounds
    back to back), summed up over the timed rounds by :func:`round_figures`:
    ``round_drafts`` the median drafts a round made; ``draft_round_ms`` a proposal of
    that many -- ``round_drafts`` × the median ms per draft (serial steps, head
    evaluations), the median forward of a round that drafted (the block's one forward),
    or the median wall time of every round's proposal for a drafter that runs no forward
    (``draft_cost == "none"``: the n-gram lookup); ``round_verify_ms`` a verification of
    ``round_drafts + 1`` tokens at the rounds' level: ``t(round_drafts + 1)`` × the
    median over rounds of ``verify / t(g + 1)`` (each round's verification, right after
    its drafter's work, over the same forward timed alone).
    ``draft_cost``: what the drafter runs per round (``Drafter.draft_cost``). Serial and
    head drafters are priced per draft at :meth:`round_step_ms`, one draft of a round:
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


def _proposal_timer(
    drafter, context: Callable[[], list[int]], gamma: int = 4
) -> Callable[[], float]:
    """A timer of the drafter's time (ms, its own ``forward_ms``) per drafted token of a
    ``gamma``-token greedy proposal after ``context()`` (the draft step of a drafter
    without a plain model cache: the EAGLE head's forwards + the target's LM head rows, an
    MTP head evaluation). The drafter is rolled back by one token first, so the proposal
    catches up on the newest committed token at least, and back to ``context()`` after, as
    after a round. 0 for a drafter that runs no model or proposes nothing."""

    def timer() -> float:
        ids = context()
        drafter.rollback(len(ids) - 1)
        before = drafter.forward_ms
        drafted, _ = drafter.propose_argmax(ids, gamma)
        drafter.rollback_to(ids)
        return (drafter.forward_ms - before) / len(drafted) if drafted else 0.0

    return timer


def _hold(cache: ModelCache, committed: list[int]) -> None:
    """Feed ``cache`` what it lacks of ``committed`` but the last token (untimed)."""
    missing = cache.sync_to(committed)[:-1]
    if missing:
        cache.extend(missing)


def _step_timer(cache: ModelCache, committed: list[int]) -> float:
    """One single-token step of a draft model's ``cache`` over the newest of
    ``committed`` (ms), the rest fed first, untimed; cropped back after, as after a round."""
    _hold(cache, committed)
    return _timed(cache, committed[:-1], committed[-1:], True)


class _Rounds:
    """Real greedy rounds (``engine/chain/round.py``'s :func:`propose_argmax`,
    :func:`verify_argmax`, then the commit and rollback of a run) from ``start`` on the
    target's cache ``target`` (the drafter attached to it); after :data:`ROUND_SPAN`
    committed tokens they start again from ``start``. ``timed``: ``(drafts, draft ms,
    verification ms)`` of each timed round -- the drafter's forward time, or its wall
    time for a drafter that runs no forward (prompt lookup: the lookup itself)."""

    def __init__(self, drafter, target: ModelCache, start: list[int], gamma: int) -> None:
        self.ctx = ChainContext(target, drafter, SamplingConfig(temperature=0.0))
        self.start, self.committed, self.gamma = list(start), list(start), gamma
        self.wall = drafter.draft_cost == "none"
        self.timed: list[tuple[int, float, float]] = []

    def one(self) -> tuple[int, float, float]:
        """One round: ``(drafts, draft ms, verification ms)``; commits what it accepted."""
        ctx, committed = self.ctx, self.committed
        drafter, target = ctx.drafter, ctx.target
        before, started = drafter.forward_ms, time.perf_counter()
        drafted, _ = propose_argmax(ctx, committed, self.gamma)
        sync(target.device)
        ms = (time.perf_counter() - started) * 1e3 if self.wall else drafter.forward_ms - before
        verified = target.forward_ms
        verdict = verify_argmax(ctx, committed, drafted).verdict
        verify_ms = target.forward_ms - verified
        self.committed = committed + drafted[: verdict.accepted] + [verdict.next_token]
        rollback(target, drafter, None, self.committed)
        return len(drafted), ms, verify_ms

    def timer(self) -> float:
        """:data:`ROUND_WARMUP` untimed rounds, then one timed (recorded in ``timed``);
        returns its draft ms."""
        if len(self.committed) - len(self.start) >= ROUND_SPAN:
            self.committed = list(self.start)
            rollback(self.ctx.target, self.ctx.drafter, None, self.committed)
        for _ in range(ROUND_WARMUP):
            self.one()
        self.timed.append(self.one())
        return self.timed[-1][1]


def round_figures(
    rounds: Sequence[tuple[int, float, float]], target_ms: Sequence[float], draft_cost: str
) -> dict[str, float | int]:
    """``round_drafts``, ``draft_round_ms`` and ``round_verify_ms`` of
    :class:`ForwardCurve` from timed rounds ``(drafts g, draft ms, verification ms)`` and
    the curve ``target_ms`` (``t(g + 1)`` held at its last ``k``); zeros for no rounds."""
    if not rounds or not target_ms:
        return dict(round_drafts=0, draft_round_ms=0.0, round_verify_ms=0.0)
    drafting = [(g, ms) for g, ms, _ in rounds if g > 0]
    drafts = statistics.median_low([g for g, _, _ in rounds])
    if draft_cost == "none":
        draft_ms = statistics.median(ms for _, ms, _ in rounds)
    elif not drafting:
        draft_ms = 0.0
    elif draft_cost == "one_forward":
        draft_ms = statistics.median(ms for _, ms in drafting)
    else:
        draft_ms = drafts * statistics.median(ms / g for g, ms in drafting)

    def t(k: int) -> float:
        return target_ms[min(k, len(target_ms)) - 1]

    level = statistics.median(v / t(g + 1) for g, _, v in rounds) if t(1) > 0 else 1.0
    return dict(round_drafts=drafts, draft_round_ms=draft_ms, round_verify_ms=level * t(drafts + 1))


def mid_run(cache: ModelCache, ids: list[int], new_tokens: int) -> list[int]:
    """``ids`` + the target's greedy continuation of ``new_tokens`` tokens, one step each on
    ``cache`` (the context halfway through a run of ``2 × new_tokens``)."""
    out = list(ids)
    for _ in range(max(0, new_tokens)):
        out.append(int(cache.extend_last(cache.sync_to(out)).argmax()))
    return out


def measure_forward_curve(
    pair: ModelPair,
    prompt: str | list[int],
    max_k: int,
    repeats: int = 3,
    drafter: str | Drafter = "model",
    gamma: int | None = None,
    new_tokens: int = 0,
) -> ForwardCurve:
    """Measure ``t(k)`` for ``k = 1 … max_k`` (capped at :data:`MAX_K` and by the context),
    the draft step, and real rounds (:class:`_Rounds`: ``gamma``-draft greedy rounds,
    default ``(max_k − 1) // 2``, the γ of ``max_k = 2γ + 1``), round-robin, in the state
    halfway through a run of ``new_tokens``: after the prompt and the target's greedy
    continuation over ``new_tokens // 2 − ROUND_SPAN // 2`` tokens (:func:`mid_run`; the
    rounds then advance :data:`ROUND_SPAN` tokens; as much as the context leaves room
    for). ``drafter``: a name (:func:`make_named_drafter`) or a fresh drafter not yet
    attached. The shared models are only read; the curve's forwards and the rounds each
    get a target cache of their own, the drafter attached to the rounds'. The drafter's
    cache or recurrent state holds the prefix before any timing, so a proposal reads only
    what a run's reads (a recurrent state restores its checkpoint there; without one it
    would read the whole prompt again in every proposal).

    Raises:
        PromptError: from :func:`encode_prompt`.
    """
    ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
    top = max(1, min(max_k, MAX_K))
    g = max(1, min(gamma if gamma is not None else (max_k - 1) // 2, top - 1))
    r = max(1, repeats)
    with torch.inference_mode():
        target = ModelCache(pair.target)
        free = pair.context_length - len(ids) - max(top, ROUND_SPAN + 2 * g + 2)
        ids = mid_run(target, ids, min(new_tokens // 2 - ROUND_SPAN // 2, free))
        prefix = ids[:-1] or ids
        if target.kv_len == 0:  # no continuation ran (it leaves ``prefix`` cached)
            target.extend(prefix)
        room = max(1, pair.context_length - len(prefix))
        ks = range(1, max(1, min(top, room)) + 1)
        filler = (ids * (MAX_K // max(len(ids), 1) + 2))[: ks[-1]]  # any ids: only time counts
        # an untimed step first in each pass: t(1) follows a target forward, as a run's
        # step does, not the drafter's work (t(1) timed cold ran ~10 % over a run's step)
        timers: list[Callable[[], float]] = [
            (lambda new=filler[:k]: _timed(target, prefix, new, False)) for k in (1, *ks)
        ]
        made = make_named_drafter(pair, drafter) if isinstance(drafter, str) else drafter
        mine = ModelCache(pair.target)  # the rounds' target
        made.attach(mine)  # before the first forward (eagle keeps the hidden states)
        mine.extend(prefix)
        whole = len(ids) > 1  # a round needs a committed token after the prefix
        if whole and made.state_view() is not None:  # a checkpoint after the prefix
            made.propose_argmax(prefix, 1)
        rounds = _Rounds(made, mine, ids, g)
        if whole:  # right after the target's forwards, as in a round (verify, then draft)
            timers.append(rounds.timer)
        draft_kv = getattr(made, "kv", None)
        if isinstance(draft_kv, ModelCache):
            draft_kv.extend(prefix)
            timers.append(lambda: _step_timer(draft_kv, rounds.committed))
        elif whole:
            timers.append(_proposal_timer(made, lambda: rounds.committed, g))
        times = round_robin(timers, r)
    spreads = tuple(Spread.of(ts) for ts in times[1:])
    target_spread, draft = spreads[: len(ks)], spreads[len(ks) + int(whole) :]
    draft_spread = draft[0] if draft and draft[0].high > 0 else None
    target_ms = tuple(sp.median for sp in target_spread)
    return ForwardCurve(
        target_ms=target_ms,
        draft_step_ms=draft_spread.median if draft_spread else 0.0,
        repeats=r,
        target_spread=target_spread,
        draft_spread=draft_spread,
        how=HowMeasured.now(r, WARMUP_PASSES, ks[-1]),
        draft_cost=made.draft_cost,
        **round_figures(rounds.timed[-r:], target_ms, made.draft_cost),  # warm-up passes' out
    )
