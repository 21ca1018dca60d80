"""The checks of a round that block verification decided (``rules/block.py``): per
drafted position the weight ``p'_i`` and the backward test's ``h_i``, what token-wise
verification decides with the same uniforms (so a student sees where block verification
kept a token token-wise would have rejected), and one line on the prefix kept and the
distribution the next token came from. Drawing only; the numbers are the round's
:class:`~specdec_core.rules.block.BlockDecision`."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.numfmt import fmt_sig
from specdec_core.core.trace import TokenInfo
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.rules.block import BlockDecision
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t

#: What token-wise verification does at position ``i`` with the same ``u`` (translation keys).
TOKEN_WISE = ("st_bv_tw_accepted", "st_bv_tw_rejected", "st_bv_tw_not_reached")


def token_wise_word(i: int, block: BlockDecision) -> str:
    """Token-wise's decision at 0-based position ``i`` with the block's draws: accepted
    before its first rejection, rejected there, never reached after."""
    n = block.token_wise
    return t(TOKEN_WISE[0 if i < n else 1 if i == n else 2])


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


def block_note(block: BlockDecision | None, token: Callable[[int], TokenInfo]) -> None:
    """One caption: the prefix kept against token-wise's, the position resampled at and
    the top of the distribution the token came from (``r_τ``); nothing under token-wise."""
    if block is None:
        return
    top = ", ".join(
        f"`{visible_token(token(i))}` {fmt_sig(p)}"
        for i, p in zip(block.residual_ids, block.residual_probs, strict=True)
    )
    gamma = len(block.weights)
    key = "st_bv_note_bonus" if block.kept == gamma else "st_bv_note"
    st.caption(
        t(
            key,
            kept=block.kept,
            tw=block.token_wise,
            pos=block.resample_position,
            mass=fmt_sig(block.residual_mass),
            top=top,
        )
    )
    if block.kept > block.token_wise:
        st.caption(t("st_bv_more", n=block.kept - block.token_wise))
    elif block.kept < block.token_wise:
        st.caption(t("st_bv_fewer", n=block.token_wise - block.kept))
