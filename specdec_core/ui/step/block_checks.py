"""The checks of a round that block verification decided (``rules/block.py``): per
drafted position the weight ``p'_i`` and the backward test's ``h_i``, what token-wise
verification decides with the same uniforms (so a student sees where block verification
kept a token token-wise would have rejected), and the distribution the next token came
from in the chart of its position (the block residual, not token-wise's ``[p − q]+``); the
notes under the checks table are :func:`~specdec_core.ui.step.strip_checks.block_lines`.
Drawing only; the numbers are the round's
:class:`~specdec_core.rules.acceptance.BlockDecision`."""

from __future__ import annotations

import numpy as np

from specdec_core.core.numfmt import fmt_sig
from specdec_core.core.trace import DistSlice
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.rules.acceptance import BlockDecision
from specdec_core.rules.block import RESIDUAL_TOP
from specdec_core.ui.figures.step_slices import block_residual_slice
from specdec_core.ui.i18n import t

#: What token-wise verification does at position ``i`` with the same ``u`` (translation keys).
TOKEN_WISE = ("st_bv_tw_accepted", "st_bv_tw_rejected", "st_bv_tw_not_reached")


def token_wise_word(i: int, block: BlockDecision) -> str:
    """Token-wise's decision at 0-based position ``i`` with the block's draws: accepted
    before its first rejection, rejected there, never reached after."""
    n = block.token_wise
    return t(TOKEN_WISE[0 if i < n else 1 if i == n else 2])


def check_line(c: PositionCheck, block: BlockDecision | None, pos: int, verdict: str) -> str | None:
    """The line under drafted position ``pos``'s chart in a block round: ``p'``, ``h``
    and the ``u`` the backward test compared, with token-wise's ``a`` beside them
    (``None``: not a block round, the token-wise line stands)."""
    if block is None or not 1 <= pos <= len(block.weights):
        return None
    i = pos - 1
    return t(
        "check_block",
        **{"p": fmt_sig(c.p), "q": fmt_sig(c.q), "a": fmt_sig(c.accept_prob)},
        **{"w": fmt_sig(block.weights[i]), "h": fmt_sig(block.stop_probs[i])},
        **{"u": fmt_sig(block.u[i]), "verdict": verdict, "tw": token_wise_word(i, block)},
    )


def residual_weight(block: BlockDecision | None, pos: int, correction: int | None) -> float | None:
    """``p′_τ`` when the chart of 1-based position ``pos`` is where block verification drew
    the next token from its residual ``r_τ`` (``pos = τ + 1 ≤ γ`` and a correction was
    emitted there); ``None`` anywhere else (token-wise, the bonus row, another position)."""
    if block is None or correction is None or pos != block.resample_position:
        return None
    if pos > len(block.weights):  # τ = γ: the bonus row p_{γ+1}, drawn as p already
        return None
    return block.weights[pos - 2] if pos > 1 else 1.0


def residual_labels(labels: dict[str, str], weight: float) -> dict[str, str]:
    """The chart's words with the excess row named as the block residual and its weight."""
    return {**labels, "excess": t("st_bv_residual", w=fmt_sig(weight)), "excess_short": "r"}


def residual_top(dist: DistSlice) -> tuple[int, ...]:
    """The ids of the residual's largest entries in a residual slice (the chart shows them
    beside its top tokens by ``max(p, q)``), up to :data:`RESIDUAL_TOP`, zeros left out."""
    assert dist.excess is not None
    order = np.argsort(-dist.excess, kind="stable")[:RESIDUAL_TOP]
    return tuple(int(dist.token_ids[i]) for i in order if dist.excess[i] > 0)


def residual_chart(
    dist: DistSlice,
    labels: dict[str, str],
    block: BlockDecision | None,
    pos: int,
    correction: int | None,
) -> tuple[DistSlice, dict[str, str], tuple[int, ...]]:
    """The rows, words and always-shown ids of position ``pos``'s chart: at block
    verification's resampled position the excess row is the residual the token was drawn
    from (:func:`~specdec_core.ui.figures.step_slices.block_residual_slice`), its top
    tokens shown; else unchanged (no extra ids)."""
    weight = residual_weight(block, pos, correction)
    if weight is None or block is None:
        return dist, labels, ()
    residual = block_residual_slice(dist, weight, block.residual_mass)
    return residual, residual_labels(labels, weight), residual_top(residual)


def block_columns(checks: tuple[PositionCheck, ...], block: BlockDecision) -> dict[str, list]:
    """The block rule's columns of the checks table (header → cells): ``p′``, ``h``, and
    token-wise's decision with the same ``u``, starred where block verification kept a
    draft that token-wise would not have (``★``)."""
    kept = block.kept
    tw = []
    for i, _ in enumerate(checks):
        word = token_wise_word(i, block)
        tw.append(word + (" ★" if i < kept and i >= block.token_wise else ""))
    return {
        t("st_bv_col_weight"): [fmt_sig(w) for w in block.weights],
        t("st_bv_col_h"): [fmt_sig(h) for h in block.stop_probs],
        t("st_bv_col_token_wise"): tw,
    }
