"""The acceptance lab's block-verification section: token-wise against block verification
(Sun et al. 2025) on the paper's {a, b} example (exact fractions: 10/9, 11/9, 12/9) or on
the lab's rows, the exact laws of the kept length and of the output side by side, the
proof's key step as a picture, and a Monte Carlo of both rules with χ². Widgets and
rendering only: every number comes from ``specdec_core.rules.lab.block``."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import lru_cache

import pandas as pd
import streamlit as st

from specdec_core.core.numfmt import fmt_prob, fmt_short
from specdec_core.rules.lab import block as B
from specdec_core.ui.errors import show_error
from specdec_core.ui.figures.block import block_steps_figure
from specdec_core.ui.i18n import follows_language, t
from specdec_core.ui.lab import view as LV

S = st.session_state
RULE_NAMES = ("token", "block")
MC_DRAWS = 20_000  # both rules on the same drafted blocks and draws, one click


def fractions_over_one_denominator(values: list[Fraction]) -> list[str]:
    """``10/9, 11/9, 4/3`` → ``["10/9", "11/9", "12/9"]``: the paper's way of writing them."""
    den = math.lcm(*(v.denominator for v in values))
    return [f"{v.numerator * den // v.denominator}/{den}" for v in values]


@lru_cache(maxsize=64)
def _block_lab(p: tuple, q: tuple, gamma: int) -> B.BlockLab:
    """:func:`~specdec_core.rules.lab.block.block_lab`, shared by every tab (up to 0.7 s
    for 8 tokens and γ = 3 on this machine; the same rows give the same laws)."""
    return B.block_lab(list(p), list(q), gamma)


def _number(x) -> str:
    return f"{x} ≈ {float(x):.4f}" if isinstance(x, Fraction) else fmt_prob(float(x))


def show_block(p, q, names: list[str], seed: int) -> None:
    """Section 9: which rows (the paper's or the lab's), γ, the three expected lengths,
    the laws side by side, the key step for one drafted block, Monte Carlo + χ²."""
    st.header(t("rl_sec_block"))
    st.markdown(t("rl_bv_help"))
    c1, c2 = st.columns(2)
    if S.get("rl_bv_rows") not in ("ab", "lab"):
        S["rl_bv_rows"] = "ab"
    shown_rows = {k: t(f"rl_bv_rows_{k}") for k in ("ab", "lab")}  # fixed in this language
    which = c1.radio(
        t("rl_bv_rows"),
        list(shown_rows),
        key=follows_language("rl_bv_rows"),
        format_func=shown_rows.get,
    )
    if which == "ab":
        names, p, q = list(B.AB_NAMES), list(B.AB_P), list(B.AB_Q)
    else:
        p, q = [float(x) for x in p], [float(x) for x in q]
    top = max(g for g in range(1, B.MAX_BLOCK_GAMMA + 1) if len(p) ** g <= B.MAX_BLOCKS)
    if type(S.get("rl_bv_gamma")) is not int or not 1 <= S["rl_bv_gamma"] <= top:
        S["rl_bv_gamma"] = min(B.AB_GAMMA, top)
    gamma = c2.selectbox(
        t("rl_bv_gamma"), list(range(1, top + 1)), key="rl_bv_gamma", help=t("rl_bv_gamma_help")
    )
    try:
        lab = _block_lab(tuple(p), tuple(q), gamma)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        show_error(exc)
        return
    three = [lab.expected["token"], lab.expected["block"], lab.expected["ideal"]]
    shown = (
        fractions_over_one_denominator(three)
        if all(isinstance(x, Fraction) for x in three)
        else [fmt_prob(float(x)) for x in three]
    )
    m1, m2, m3 = st.columns(3)
    for col, key, value in zip((m1, m2, m3), ("token", "block", "ideal"), shown, strict=True):
        col.metric(t(f"rl_bv_expected_{key}"), value, help=t(f"rl_bv_expected_{key}_help"))
    _laws(lab, names)
    _key_step(p, q, names, gamma)
    _monte_carlo(p, q, names, gamma, seed, lab)
    st.markdown(t("rl_bv_guarantee"))


def _laws(lab: B.BlockLab, names: list[str]) -> None:
    """The kept length's law and the output's first two tokens, both rules side by side."""
    rule = {r: t(f"opt_verification_{r}") for r in RULE_NAMES}
    lengths = pd.DataFrame(
        {
            t("rl_bv_col_kept"): list(range(lab.gamma + 1)),
            **{rule[r]: [_number(x) for x in lab.lengths[r]] for r in RULE_NAMES},
        }
    )
    out = {t("rl_bv_col_token"): names}
    for r in RULE_NAMES:
        out[t("rl_bv_col_first", rule=rule[r])] = [_number(x) for x in lab.first[r]]
        out[t("rl_bv_col_second", rule=rule[r])] = [_number(x) for x in lab.second[r]]
    st.markdown(t("rl_bv_lengths"))
    st.dataframe(lengths, hide_index=True)
    st.markdown(t("rl_bv_output"))
    st.dataframe(pd.DataFrame(out), hide_index=True)
    st.caption(t("rl_bv_tv", token=fmt_prob(lab.tv["token"]), block=fmt_prob(lab.tv["block"])))


def _key_step(p, q, names: list[str], gamma: int) -> None:
    """The proof's key step for a block the student picks (default: the block where block
    verification gains most over token-wise)."""
    blocks = list(itertools.product(range(len(p)), repeat=gamma))
    blocks = [b for b in blocks if all(float(q[y]) > 0 for y in b)]

    def gain(b) -> float:
        law_t, law_b = B.keep_law(p, q, b, "token"), B.keep_law(p, q, b, "block")
        return float(sum(k * (x - y) for k, (x, y) in enumerate(zip(law_b, law_t, strict=True))))

    label = {b: " ".join(names[y] for y in b) for b in blocks}
    if S.get("rl_bv_block") not in label.values():
        S["rl_bv_block"] = label[max(blocks, key=gain)]
    chosen = st.selectbox(
        t("rl_bv_block"), [label[b] for b in blocks], key="rl_bv_block", help=t("rl_bv_block_help")
    )
    block = next(b for b in blocks if label[b] == chosen)
    steps = B.block_steps(p, q, block)
    titles = [
        t("rl_bv_panel", i=i, w=fmt_short(s.weight), h=fmt_short(s.stop_prob) if i else "—")
        for i, s in enumerate(steps)
    ]
    labels = {
        "scaled_p": t("rl_bv_scaled_p"),
        "q": t("rl_bv_q"),
        "excess": t("rl_bv_excess"),
        "probability": t("probability"),
    }
    st.plotly_chart(
        LV.figure(block_steps_figure, names, steps, titles, labels, t("rl_bv_fig", block=chosen)),
        key="rl_fig_block",
    )
    law_t, law_b = B.keep_law(p, q, block, "token"), B.keep_law(p, q, block, "block")
    st.markdown(
        t(
            "rl_bv_key_step",
            block=chosen,
            token=", ".join(fmt_prob(float(x)) for x in law_t),
            blk=", ".join(fmt_prob(float(x)) for x in law_b),
        )
    )


def _monte_carlo(p, q, names: list[str], gamma: int, seed: int, lab: B.BlockLab) -> None:
    """On click: both rules' mechanisms on the same drafted blocks and draws, χ² each."""
    key = (tuple(float(x) for x in p), tuple(float(x) for x in q), gamma, seed)
    if st.button(t("rl_bv_mc_run", n=f"{MC_DRAWS:,}"), key="rl_bv_mc"):
        S["rl_bv_mc_result"] = (key, B.block_monte_carlo(*key[:3], MC_DRAWS, seed))
    stored = S.get("rl_bv_mc_result")
    if not stored or stored[0] != key:
        st.caption(t("rl_bv_mc_help", seed=seed))
        return
    mc = stored[1]
    rows = []
    for r in RULE_NAMES:
        for what, counts, exact, fit in (
            ("kept", mc.lengths[r], lab.lengths[r], mc.length_fit[r]),
            ("first", mc.firsts[r], lab.first[r], mc.first_fit[r]),
        ):
            freq = ", ".join(fmt_prob(c / mc.n) for c in counts)
            rows.append(
                {
                    t("rl_bv_col_rule"): t(f"opt_verification_{r}"),
                    t("rl_bv_col_what"): t(f"rl_bv_what_{what}"),
                    t("rl_bv_col_freq"): freq,
                    t("rl_bv_col_exact"): ", ".join(fmt_prob(float(x)) for x in exact),
                    t("rl_bv_col_p"): fmt_prob(fit.p_value),
                    t("rl_bv_col_verdict"): t("rl_bv_fits" if fit.consistent else "rl_bv_misfit"),
                }
            )
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.caption(t("rl_bv_mc_more", more=f"{mc.more_than_token:,}", n=f"{mc.n:,}", seed=seed))
