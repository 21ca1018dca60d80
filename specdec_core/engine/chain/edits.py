"""Helpers of the step machine that are not the round itself: the target's preview used by
the edit controls, the two quick edits, and the per-position checks a verification shows.

Kept out of ``session.py`` so that file reads as the round does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from specdec_core.core.errors import InputError
from specdec_core.core.records import RoundRecord
from specdec_core.core.sampling import logits_to_probs
from specdec_core.core.trace import DistSlice, EditTrace, PositionCheck, TokenInfo
from specdec_core.rules.acceptance import Verdict, acceptance_probability

if TYPE_CHECKING:
    from specdec_core.engine.chain.session import SpeculativeSession

Slicer = Callable[[torch.Tensor | None, torch.Tensor | None, list[int]], DistSlice]


def check_position(position: object, gamma: int) -> None:
    """A drafted position a student may edit: a whole number in ``1..gamma``.

    Raises:
        InputError: anything else (code ``edit_position``).
    """
    if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= gamma:
        raise InputError(
            f"position must be between 1 and {gamma}, got {position!r}",
            "edit_position",
            gamma=gamma,
        )


@torch.inference_mode()
def _preview_logits(session: SpeculativeSession, drafts: list[int]) -> torch.Tensor:
    """``[γ', V]`` float32 target logits at each drafted position given ``drafts``, from a
    cache-free forward over ``committed + drafts`` (the session's caches are untouched)."""
    ids = torch.tensor([session.ids + drafts], device=session.pair.device)
    return session.pair.target(input_ids=ids).logits[0, -(len(drafts) + 1) : -1].float()


@torch.inference_mode()
def target_preview(
    session: SpeculativeSession, drafts: list[int], top_n: int = 5
) -> list[list[TokenInfo]]:
    """The target's top tokens at each drafted position 1..γ' given the current drafts,
    *before* verification (for the edit controls), from a cache-free forward over
    ``committed + drafts``; the session's caches are not touched.

    Returns:
        ``γ'`` lists of ``top_n`` :class:`TokenInfo`, most likely first (index 0 is the
        greedy choice ``argmax p_i``). Empty when there are no drafts.
    """
    if not drafts:
        return []
    logits = _preview_logits(session, drafts)  # [γ', V]
    top = torch.topk(logits, min(top_n, logits.shape[-1]), dim=-1).indices.tolist()
    return [[session.token(t) for t in row] for row in top]


@torch.inference_mode()
def accept_preview(
    session: SpeculativeSession, drafts: list[int], q_rows: torch.Tensor
) -> list[float]:
    """The exact acceptance probability ``a_i = min(1, p_i(y_i) / q_i(y_i))`` at each drafted
    position given the current drafts, *before* verification (a cache-free forward over
    ``committed + drafts`` with the session's sampling settings; caches untouched). For an
    edited position ``q_i`` is one-hot, so ``a_i = p_i(y_i)``. Position ``i`` is only
    checked if positions ``1..i−1`` were accepted.
    """
    if not drafts:
        return []
    p_rows = logits_to_probs(_preview_logits(session, drafts), session.config.sampling).cpu()
    return [
        acceptance_probability(float(p_rows[i, y]), float(q_rows[i, y]))
        for i, y in enumerate(drafts)
    ]


def make_position_wrong(session: SpeculativeSession, position: int) -> EditTrace:
    """Quick edit: replace ``y_position`` by the target's second choice there, a plausible
    token that greedy verification rejects.

    Raises:
        PhaseError: not after ``propose``. InputError: position out of range.
    """
    check_position(position, len(session.drafts))  # before the preview's forward
    preview = session.target_preview(top_n=2)
    return session.edit_draft(position, preview[position - 1][1].id)


def make_draft_agree(session: SpeculativeSession) -> list[EditTrace]:
    """Quick edit: replace each draft that differs from the target's argmax (first
    mismatch first, re-checking after each edit) so that greedy verification accepts all
    of them. At most γ' edits, each one cache-free target forward."""
    edits = []
    for _ in range(len(session.drafts)):
        preview = session.target_preview(top_n=1)
        drafts = session.drafts
        mismatch = [i for i, row in enumerate(preview) if row[0].id != drafts[i]]
        if not mismatch:
            break
        k = mismatch[0]
        edits.append(session.edit_draft(k + 1, preview[k][0].id))
    return edits


def build_checks(
    drafts: list[int],
    q_rows: torch.Tensor,
    p_rows: torch.Tensor,
    verdict: Verdict,
    record: RoundRecord,
    edited: set[int],
    token: Callable[[int], TokenInfo],
    slicer: Slicer,
) -> tuple[PositionCheck, ...]:
    """One :class:`PositionCheck` per drafted position.

    Args:
        drafts: ``[γ']`` ids. q_rows: ``[γ', V]``. p_rows: ``[γ' + 1, V]`` float32 CPU.
        verdict: the rule's decision. record: the round's record (final statuses and
            overlaps). edited: 1-based edited positions.
    """
    target_argmax = p_rows.argmax(dim=-1).tolist()
    checks = []
    for i, y in enumerate(drafts):
        extra = [y] + ([verdict.next_token] if i == verdict.accepted else [])
        checks.append(
            PositionCheck(
                position=i + 1,
                token=token(y),
                p=float(p_rows[i, y]),
                q=float(q_rows[i, y]),
                accept_prob=verdict.accept_probs[i],
                u=verdict.u[i] if i < len(verdict.u) else None,
                status=record.statuses[i],
                target_argmax=token(target_argmax[i]),
                edited=(i + 1) in edited,
                overlap=record.overlaps[i],
                dist=slicer(p_rows[i], q_rows[i], extra),
            )
        )
    return tuple(checks)
