"""Helpers of the chain's step machine that are not the round itself: the target's preview
used by the edit controls, the choice behind the quick edits, and the per-position checks a
verification shows. Plain data in (the pair, committed ids, drafts, ``q`` rows, sampling),
plain values out: ``engine/chain/session.py`` imports this module, nothing here imports
back, and no cache is touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from specdec_core.core.errors import InputError
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import Processors
from specdec_core.core.sampling import (
    SamplingConfig,
    logits_to_probs,
    near_tie_argmax,
    near_tie_draw,
)
from specdec_core.core.trace import DistSlice, TokenInfo
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.rules.acceptance import acceptance_probability

if TYPE_CHECKING:
    from specdec_core.engine.chain.round import Checked

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


def check_token_id(token_id: object, vocab: int) -> None:
    """A token id a student may put in a draft: a whole number in ``0..vocab − 1``.

    Raises:
        InputError: anything else (code ``edit_token_id``).
    """
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < vocab:
        raise InputError(
            f"token id must be between 0 and {vocab - 1}, got {token_id!r}",
            "edit_token_id",
            vocab=vocab,
        )


@torch.inference_mode()
def _preview_logits(
    pair: ModelPair,
    committed: list[int],
    drafts: list[int],
    processors: Processors | None = None,
) -> torch.Tensor:
    """``[γ', V]`` float32 target logits at each drafted position given ``drafts``, from a
    cache-free forward of ``pair.target`` over ``committed + drafts`` (no cache touched),
    processed row by row on each row's own prefix by active ``processors`` (which then
    stand back on ``committed``)."""
    ids = torch.tensor([committed + drafts], device=pair.device)
    logits = pair.target(input_ids=ids).logits[0, -(len(drafts) + 1) : -1].float()
    if processors is not None and processors.active:
        logits = processors.rows(logits, committed, drafts)
        processors.sync_to(committed)
    return logits


@torch.inference_mode()
def target_top_ids(
    pair: ModelPair,
    committed: list[int],
    drafts: list[int],
    top_n: int = 5,
    processors: Processors | None = None,
) -> list[list[int]]:
    """The target's top token ids at each drafted position 1..γ' given the current drafts,
    *before* verification (for the edit controls), from a cache-free forward over
    ``committed + drafts``, after the ``processors`` (so a grammar's argmax is inside
    it); no cache is touched.

    Returns:
        ``γ'`` lists of ``min(top_n, V)`` ids, most likely first (index 0 is the greedy
        choice ``argmax p_i``). Empty when there are no drafts.
    """
    if not drafts:
        return []
    logits = _preview_logits(pair, committed, drafts, processors)  # [γ', V]
    return torch.topk(logits, min(top_n, logits.shape[-1]), dim=-1).indices.tolist()


@torch.inference_mode()
def accept_preview(
    pair: ModelPair,
    committed: list[int],
    drafts: list[int],
    q_rows: torch.Tensor,
    sampling: SamplingConfig,
    processors: Processors | None = None,
) -> list[float]:
    """The exact acceptance probability ``a_i = min(1, p_i(y_i) / q_i(y_i))`` at each drafted
    position given the current drafts, *before* verification (a cache-free forward over
    ``committed + drafts``, ``p`` after the ``processors`` and ``sampling``'s
    temperature/top-k/top-p; ``q_rows`` ``[γ', V]``). For an edited position ``q_i`` is
    one-hot, so ``a_i = p_i(y_i)``. Position ``i`` is only checked if positions
    ``1..i−1`` were accepted.
    """
    if not drafts:
        return []
    logits = _preview_logits(pair, committed, drafts, processors)
    p_rows = logits_to_probs(logits, sampling).cpu()
    return [
        acceptance_probability(float(p_rows[i, y]), float(q_rows[i, y]))
        for i, y in enumerate(drafts)
    ]


def first_mismatch(top_ids: list[list[int]], drafts: list[int]) -> tuple[int, int] | None:
    """The quick edit "make the drafts agree", one step: ``(position, token)`` (1-based)
    of the first draft that differs from the target's argmax ``top_ids[i][0]``, and that
    argmax; ``None`` when every draft agrees (greedy verification then accepts all)."""
    for i, (row, y) in enumerate(zip(top_ids, drafts, strict=True)):
        if row[0] != y:
            return i + 1, row[0]
    return None


def build_checks(
    drafts: list[int],
    q_rows: torch.Tensor,
    checked: Checked,
    record: RoundRecord,
    edited: set[int],
    token: Callable[[int], TokenInfo],
    slicer: Slicer,
) -> tuple[PositionCheck, ...]:
    """One :class:`PositionCheck` per drafted position.

    Args:
        drafts: ``[γ']`` ids. q_rows: ``[γ', V]``. checked: the verification (its
            ``p_rows``; greedy: its ``raw`` rows at T = 1, whose top-two gap says whether
            the argmax is a near-tie). record: the round's record (final statuses and
            overlaps). edited: 1-based edited positions.
    """
    p_rows, verdict, raw_rows = checked.p_rows, checked.verdict, checked.raw
    assert p_rows is not None
    target_argmax = p_rows.argmax(dim=-1).tolist()
    checks = []
    for i, y in enumerate(drafts):
        extra = [y] + ([verdict.next_token] if i == verdict.accepted else [])
        if checked.block is not None and i == verdict.accepted:  # the block residual's top
            extra += list(checked.block.residual_ids)
        checked_here = record.statuses[i] in ("accepted", "rejected")
        u = verdict.u[i] if i < len(verdict.u) else None
        if not checked_here:
            tie = False
        elif raw_rows is not None:  # greedy: could the argmax flip?
            tie = near_tie_argmax(torch.log(raw_rows[i]))
        else:  # sampling: could u < a (block verification: u < h) flip?
            bar = checked.block.stop_probs[i] if checked.block else verdict.accept_probs[i]
            tie = near_tie_draw(u, bar)
        checks.append(
            PositionCheck(
                position=i + 1,
                token=token(y),
                p=float(p_rows[i, y]),
                q=float(q_rows[i, y]),
                accept_prob=verdict.accept_probs[i],
                u=u,
                status=record.statuses[i],
                target_argmax=token(target_argmax[i]),
                edited=(i + 1) in edited,
                overlap=record.overlaps[i],
                dist=slicer(p_rows[i], q_rows[i], extra),
                near_tie=tie,
            )
        )
    return tuple(checks)


def verify_slices(
    drafts: list[int], checked: Checked, checks: tuple[PositionCheck, ...], slicer: Slicer
) -> tuple[DistSlice, tuple[DistSlice, ...]]:
    """The verification's ``next_dist`` and greedy ``context_dists``.

    ``next_dist``: the slice at the rejected position (whose ``excess`` is the residual),
    or ``p_{γ'+1}`` after every draft was accepted (bonus). ``context_dists``: with
    ``checked.raw`` (greedy: the same logits at T = 1, ``[γ' + 1, V]``) one slice per
    drafted position and the bonus position, the confidence behind the one-hot argmax;
    else ``()``.
    """
    n, gamma, verdict, raw_rows = (
        checked.verdict.accepted,
        len(drafts),
        checked.verdict,
        checked.raw,
    )
    assert checked.p_rows is not None
    next_dist = (
        checks[n].dist if n < gamma else slicer(checked.p_rows[gamma], None, [verdict.next_token])
    )
    if raw_rows is None:
        return next_dist, ()
    ids = [*drafts, verdict.next_token]
    return next_dist, tuple(slicer(raw_rows[i], None, [y]) for i, y in enumerate(ids))


def unprocessed_slices(
    rows: torch.Tensor | None,
    checks: tuple[PositionCheck, ...],
    contexts: tuple[DistSlice, ...],
    next_dist: DistSlice,
    slicer: Slicer,
) -> tuple[DistSlice, ...]:
    """The target's slices *before* the history-dependent processors at positions
    1..γ'+1, for a chart of ``p`` before / after them (the masked mass made visible).

    Args:
        rows: ``[γ' + 1, V]`` float32 CPU rows before the processors
            (:attr:`~specdec_core.engine.chain.round.Checked.unprocessed`), or
            ``None`` when no processor is active (then ``()``).
        checks, contexts, next_dist: the verification's processed slices; each unprocessed
            slice shows every token they show at that position, plus its own top tokens
            (those the processors removed or pushed down).
    """
    if rows is None:
        return ()
    bonus = [] if any(next_dist is c.dist for c in checks) else [next_dist]
    out = []
    for i in range(rows.shape[0]):
        shown = [checks[i].dist] if i < len(checks) else list(bonus)
        shown += [contexts[i]] if i < len(contexts) else []
        extra = list(dict.fromkeys(int(t) for s in shown for t in s.token_ids))
        out.append(slicer(rows[i], None, extra))
    return tuple(out)
