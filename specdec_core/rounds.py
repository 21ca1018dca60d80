"""The pieces of one round shared by the step machine (``session.py``) and the fast path
(``generate.py``): γ for the round, the parallel verification forward, the stop rule, the
commit that ends in the round's :class:`~specdec_core.records.RoundRecord`, and the
rollback of both caches. Reads top to bottom as the round does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from .acceptance import Verdict, acceptance_total, verify_greedy, verify_sampling
from .drafters import Drafter
from .kvcache import ModelCache, common_prefix_len
from .records import RoundRecord, make_record
from .sampling import SamplingConfig, logits_to_probs

if TYPE_CHECKING:
    from .inputs import SessionConfig
    from .models import ModelPair


def gamma_for_round(
    gamma: int, generated: int, max_new_tokens: int, committed: int, context_length: int
) -> int:
    """γ shortened so a round can pass neither ``max_new_tokens`` nor the context.

    A round commits at most γ + 1 tokens, so ``γ ≤ remaining − 1``; verification feeds
    positions up to ``L − 1 + γ`` and the next round feeds position ``L + γ``, so
    ``γ ≤ context_length − L − 1``. May be 0 (the round is then one plain target step).
    """
    remaining = max_new_tokens - generated
    return max(0, min(gamma, remaining - 1, context_length - committed - 1))


def verify_drafts(
    target: ModelCache,
    committed: list[int],
    draft_ids: list[int],
    draft_probs: torch.Tensor,
    sampling: SamplingConfig,
    generator: torch.Generator,
    raw_out: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, Verdict, int]:
    """ONE target forward over ``[committed tokens without KV] + y_1..y_γ``, then the rule.

    Args:
        target: the target's cache (extended in place by the forward).
        committed: ``[L]`` committed ids. draft_ids: ``[γ]``. draft_probs: ``[γ, V]``.
        raw_out: if given, the same logits at T = 1 (plain softmax, ``[γ + 1, V]`` float32
            CPU) are appended to it: context for a greedy lesson, never used by the rule.

    Returns:
        ``(p_rows, verdict, fed)``: ``p_rows`` ``[γ + 1, V]`` float32 CPU (``p_1..p_{γ+1}``
        after temperature/top-k/top-p), the :class:`Verdict`, and how many tokens the
        forward processed.
    """
    gamma = len(draft_ids)
    feed = target.sync_to(committed + draft_ids)
    logits = target.extend(feed)[-(gamma + 1) :]  # [γ+1, V]
    p_rows = logits_to_probs(logits, sampling).cpu()
    if raw_out is not None:
        raw_out.append(torch.softmax(logits.float(), dim=-1).cpu())
    ids = torch.tensor(draft_ids, dtype=torch.long)
    if sampling.greedy:
        verdict = verify_greedy(ids, p_rows)
    else:
        verdict = verify_sampling(ids, draft_probs, p_rows, generator)
    return p_rows, verdict, len(feed)


def overlaps(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> list[float]:
    """``Σ_x min(p_i(x), q_i(x))`` per drafted position: ``[γ+1, V]`` and ``[γ, V]`` rows
    (the bonus row is ignored) → ``γ`` floats (Leviathan et al. 2023, Def. 3.1)."""
    gamma = draft_probs.shape[0]
    return acceptance_total(target_probs[:gamma], draft_probs).tolist() if gamma else []


def stop_reason_after(
    generated: list[int],
    total_len: int,
    eos_token_id: int | None,
    max_new_tokens: int,
    context_length: int,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
) -> str | None:
    """Why generation stops after the last token of ``generated`` (``None``: go on).

    Checked in order: ``eos``, ``stop_string``, ``max_new_tokens``, ``context_limit``.
    """
    if eos_token_id is not None and generated and generated[-1] == eos_token_id:
        return "eos"
    if stop_strings and decode is not None:
        text = decode(generated)
        if any(s and s in text for s in stop_strings):
            return "stop_string"
    if len(generated) >= max_new_tokens:
        return "max_new_tokens"
    if total_len >= context_length:
        return "context_limit"
    return None


def stop_rule(pair: ModelPair, config: SessionConfig) -> Callable[[list[int], int], str | None]:
    """:func:`stop_reason_after` bound to a pair (EOS id, context, tokenizer) and settings
    (``max_new_tokens``, stop strings): ``stop(generated, total_len)``."""

    def stop(generated: list[int], total_len: int) -> str | None:
        return stop_reason_after(
            generated, total_len, pair.eos_token_id, config.max_new_tokens,
            pair.context_length, config.stop_strings, pair.tokenizer.decode,
        )  # fmt: skip

    return stop


def commit_tokens(
    committed: list[int],
    proposal: list[int],
    prompt_len: int,
    stop: Callable[[list[int], int], str | None],
) -> tuple[list[int], str | None]:
    """Append ``proposal`` (accepted drafts + correction/bonus) token by token until
    ``stop(generated, total_len)`` names a reason. Returns ``(appended, stop_reason)``."""
    appended: list[int] = []
    for token in proposal:
        appended.append(token)
        ids = committed + appended
        reason = stop(ids[prompt_len:], len(ids))
        if reason:
            return appended, reason
    return appended, None


def commit_round(
    committed: list[int],
    prompt_len: int,
    gamma: int,
    draft_ids: list[int],
    verdict: Verdict,
    round_overlaps: list[float],
    stop: Callable[[list[int], int], str | None],
) -> tuple[RoundRecord, str | None]:
    """Commit the accepted drafts + the correction/bonus token (cut short by ``stop``) and
    describe the round. ``committed`` is not changed: the caller appends
    ``record.appended``.

    Args:
        committed: ``[L]`` ids before the round. gamma: γ the drafter was asked for.
        draft_ids: ``[γ']`` drafted ids. verdict: the rule's decision.
        round_overlaps: ``[γ']`` ``Σ min(p_i, q_i)`` (see :func:`overlaps`).

    Returns:
        ``(record, stop_reason)``.
    """
    proposal = draft_ids[: verdict.accepted] + [verdict.next_token]
    appended, reason = commit_tokens(committed, proposal, prompt_len, stop)
    record = make_record(gamma, draft_ids, verdict.accepted, round_overlaps, appended, verdict.kind)
    return record, reason


def rollback(target: ModelCache, drafter: Drafter, committed: list[int]) -> tuple[int, int]:
    """Crop both caches to the committed history, leaving the last committed token
    without KV (it is the first input of the next round). Returns positions removed
    ``(target, draft)``."""
    last = len(committed) - 1
    removed_target = target.crop(min(common_prefix_len(target.ids, committed), last))
    draft_cached = drafter.cached_ids() or []
    removed_draft = drafter.rollback(min(common_prefix_len(draft_cached, committed), last))
    return removed_target, removed_draft
