"""One chain round, the algorithm (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2):

    draft   = propose(ctx, committed, gamma, draft_rng)     # y_1..y_γ ~ q_1..q_γ, serially
    checked = verify(ctx, committed, ids, q, verify_rng)    # ONE target forward: p_1..p_{γ+1},
                                                            # then the rule (rules/acceptance.py)
    record, stop = decide_round(ctx, committed, gamma, ids, checked)  # accepted prefix +
                                                            # correction/bonus, cut by a stop
    committed, removed = apply_round(ctx, committed, record)  # both caches back to the
                                                            # committed history

Plain functions over one frozen :class:`ChainContext` (the target's cache, the drafter, the
history processors, sampling, the stop rule), returning frozen values. The step machine
(``engine/chain/session.py``) runs them one at a time with its views in between (and the
optional edit, which re-proposes from the edited prefix); the fast path
(``engine/chain/generate.py``) runs them in a loop, greedy rounds through the lean pair
:func:`propose_argmax` / :func:`verify_argmax` (the same decisions, no rows, no draws). The
round's two random streams are :func:`~specdec_core.engine.rounds.round_stream`'s.

Beyond the paper: history-dependent processors (penalties, a grammar matcher) process each
``q`` and ``p`` row on its own prefix and are rolled back with the caches; a stop (EOS, a
stop string, the budget) cuts the commit short (``ctx.stop.cut``); on sampled rounds an
alternative rule from the settings may replace the token-wise one (``ctx.rule``, the table
in ``rules/verification.py``: block verification, Sun et al. 2025, or a lossy rule); greedy
rounds always decide by the greedy rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specdec_core.core.kvcache import ModelCache, rollback
from specdec_core.core.processors import Processors
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import DraftMethod
from specdec_core.drafters.base import Draft, Drafter
from specdec_core.engine.chain.records import RoundRecord, make_record
from specdec_core.rules.acceptance import (
    BlockDecision,
    Verdict,
    acceptance_total,
    greedy_accepted_length,
    greedy_overlaps,
    verify_greedy,
    verify_sampling,
)

if TYPE_CHECKING:
    from specdec_core.engine.rounds import StopRule
    from specdec_core.rules.verification import SampledRule


@dataclass(frozen=True)
class ChainContext:
    """What every round of one generation reads.

    Attributes:
        target: the target's cache (extended by :func:`verify`, cropped by
            :func:`apply_round`). drafter: the draft source (``None``: no drafts, the
            autoregressive baseline). sampling: temperature/top-k/top-p of ``p`` and ``q``.
        processors: the history processors (``None`` or inactive: none apply).
        draft_method, confidence: passed to ``Drafter.propose`` (the confidence stop's
            threshold, ``None`` outside that γ schedule).
        rule: the sampled rounds' rule when not the token-wise one (block verification or
            a lossy rule: ``rules/verification.sampled_rule``), else ``None``.
        stop: the stop rule; prompt_len: ids before the generated ones (the stop counts
            generated tokens).
    """

    target: ModelCache
    drafter: Drafter | None
    sampling: SamplingConfig
    processors: Processors | None = None
    draft_method: DraftMethod = "probabilistic"
    confidence: float | None = None
    rule: SampledRule | None = None
    stop: StopRule | None = None
    prompt_len: int = 0

    @property
    def active(self) -> Processors | None:
        """The processors when any is active, else ``None``."""
        return self.processors if self.processors is not None and self.processors.active else None


@dataclass(frozen=True)
class Checked:
    """A verification: the rule's :class:`Verdict`, ``overlaps`` ``[γ']`` (``Σ min(p_i, q_i)``,
    Leviathan et al. 2023 Def. 3.1), ``fed`` the tokens the forward processed, ``p_rows``
    ``[γ' + 1, V]`` float32 CPU (after the processors and temperature/top-k/top-p; ``None``
    on the lean path). Only when asked (``views``): ``raw`` (greedy: the same logits at
    T = 1, the confidence behind each one-hot argmax) and ``unprocessed`` (active
    processors: the rows before them, after temperature/top-k/top-p or the T = 1 softmax
    at T = 0), both ``[γ' + 1, V]`` float32 CPU. ``block``: what block verification
    computed (``None`` under the token-wise rule)."""

    verdict: Verdict
    overlaps: tuple[float, ...]
    fed: int
    p_rows: torch.Tensor | None = None
    raw: torch.Tensor | None = None
    unprocessed: torch.Tensor | None = None
    block: BlockDecision | None = None


def propose(ctx: ChainContext, committed: list[int], gamma: int, rng: torch.Generator) -> Draft:
    """Step 1: up to ``gamma`` drafts ``y_i ~ q_i`` after ``committed``, serially, from the
    round's drafting stream ``rng`` (``Drafter.propose``; active processors process each
    ``q`` row on its own prefix and stand advanced through the drafts afterwards)."""
    assert ctx.drafter is not None
    method, stop_at = ctx.draft_method, ctx.confidence
    return ctx.drafter.propose(committed, gamma, ctx.sampling, method, rng, ctx.processors, stop_at)


def propose_argmax(ctx: ChainContext, committed: list[int], gamma: int) -> tuple[list[int], int]:
    """Step 1 of a greedy round without processors: the ids :func:`propose` gives at
    temperature 0, without one-hot rows. Returns ``(ids, forwards)``."""
    assert ctx.drafter is not None
    return ctx.drafter.propose_argmax(committed, gamma, ctx.confidence)


def verify(
    ctx: ChainContext,
    committed: list[int],
    draft_ids: list[int],
    q_rows: torch.Tensor,
    rng: torch.Generator,
    views: bool = False,
) -> Checked:
    """Step 3: ONE target forward over ``[committed tokens without KV] + y_1..y_γ'``, then
    the rule: greedy (accept while ``y_i == argmax p_i``), else ``ctx.rule`` if set, else
    :func:`~specdec_core.rules.acceptance.verify_sampling`, with draws from ``rng`` (the
    round's verification stream; unused at temperature 0).

    Args:
        committed: ``[L]`` ids. draft_ids: ``[γ']``. q_rows: ``[γ', V]`` float32 CPU.
        views: also keep :attr:`Checked.raw` and :attr:`Checked.unprocessed`.

    Active processors process row ``i`` for its own prefix ``committed + y_1..y_{i−1}``
    before temperature/top-k/top-p, and then stand advanced through the drafts
    (:func:`apply_round` brings them back with the caches).
    """
    gamma = len(draft_ids)
    feed = ctx.target.sync_to(committed + draft_ids)
    logits = ctx.target.extend(feed)[-(gamma + 1) :]  # [γ'+1, V]
    unprocessed = None
    if ctx.active is not None:
        if views and ctx.sampling.greedy:  # T = 0: the T = 1 softmax, as raw
            unprocessed = torch.softmax(logits.float(), dim=-1).cpu()
        elif views:
            unprocessed = logits_to_probs(logits, ctx.sampling).cpu()
        logits = ctx.active.rows(logits, committed, draft_ids)
    p_rows = logits_to_probs(logits, ctx.sampling).cpu()  # [γ'+1, V]
    raw = torch.softmax(logits.float(), dim=-1).cpu() if views and ctx.sampling.greedy else None
    ids = torch.tensor(draft_ids, dtype=torch.long)
    block = None
    if ctx.sampling.greedy:
        verdict = verify_greedy(ids, p_rows)
    elif ctx.rule is not None:  # block verification or a lossy rule
        verdict, block = ctx.rule(ids, q_rows, p_rows, rng)
    else:
        verdict = verify_sampling(ids, q_rows, p_rows, rng)
    overlaps = acceptance_total(p_rows[:gamma], q_rows).tolist() if gamma else []
    return Checked(verdict, tuple(overlaps), len(feed), p_rows, raw, unprocessed, block)


def verify_argmax(ctx: ChainContext, committed: list[int], draft_ids: list[int]) -> Checked:
    """Step 3 of a greedy round without processors: ONE target forward, then the argmax
    rule straight from the logits (no rows, no draws); decides exactly what :func:`verify`
    decides at temperature 0. Overlaps are 1.0 where the draft is the argmax, else 0.0."""
    g = len(draft_ids)
    feed = ctx.target.sync_to(committed + draft_ids)
    target_argmax = ctx.target.extend(feed)[-(g + 1) :].argmax(dim=-1).tolist()  # [γ'+1]
    overlaps = greedy_overlaps(draft_ids, target_argmax)
    n = greedy_accepted_length(draft_ids, target_argmax)
    kind = "bonus" if n == g else "correction"
    verdict = Verdict(n, target_argmax[n], kind, tuple(overlaps), ())
    return Checked(verdict, tuple(overlaps), len(feed))


def decide_round(
    ctx: ChainContext, committed: list[int], gamma: int, draft_ids: list[int], checked: Checked
) -> tuple[RoundRecord, str | None]:
    """Step 4, decided: the accepted drafts + the correction/bonus token, appended one by
    one until the stop rule names a reason, and the round's record (``gamma``: γ the
    drafter was asked for). ``committed`` is not changed. Returns ``(record, stop)``."""
    assert ctx.stop is not None
    verdict = checked.verdict
    proposal = draft_ids[: verdict.accepted] + [verdict.next_token]
    appended, reason = ctx.stop.cut(committed, proposal, ctx.prompt_len)
    n, kind = verdict.accepted, verdict.kind
    record = make_record(gamma, draft_ids, n, checked.overlaps, appended, kind, checked.block)
    return record, reason


def apply_round(
    ctx: ChainContext, committed: list[int], record: RoundRecord
) -> tuple[list[int], tuple[int, int]]:
    """Step 4 + reject, applied: the new committed ids (``committed`` is not changed) and
    both caches cropped to them, the appended token without KV (the next round's first
    input), the processors back on them. Returns ``(ids, (target, draft) rows removed)``."""
    ids = committed + list(record.appended)
    assert ctx.drafter is not None
    return ids, rollback(ctx.target, ctx.drafter, ctx.processors, ids)
