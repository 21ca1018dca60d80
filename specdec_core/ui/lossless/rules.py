"""The lossless page's section 4a: the lossy rules on the lab's rows, enumerated exactly
(typical and threshold acceptance against the exact rule: final distribution, TV to p,
P(accept), and their price over δ). Widgets and rendering only: every number comes from
:mod:`specdec_core.rules.lab.lossy`."""

from __future__ import annotations

import re

import numpy as np
import streamlit as st

from specdec_core.core.errors import RuleInputError
from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules.lab.lossy import (
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_TOP_K,
    LOSSY_RULES,
    MAX_TOP_K,
    LossyRules,
    check_lossy,
    compare_lossy,
    lossy_sweep,
    typical_threshold,
)
from specdec_core.rules.lab.rows import PRESETS, default_name, normalise
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.lossless import lossy_finals_figure, lossy_price_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import readings as RD

S = st.session_state
ROWS = "ll_rows"  # (names, p, q): the last rows that were valid
ROW_CHARS = 200  # a weights field: 8 numbers need far less
_SPLIT = re.compile(r"[\s,，、;；]+")
KNOBS = {"ll_delta": DEFAULT_DELTA, "ll_eps": DEFAULT_EPSILON, "ll_topk": DEFAULT_TOP_K}


def _text(w) -> str:
    return ", ".join(f"{float(x):.4g}" for x in w)


def _set_rows(names, p, q, source: str) -> None:
    S[ROWS] = (list(names), np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64))
    S["ll_p_text"], S["ll_q_text"] = _text(p), _text(q)
    S["ll_rows_source"] = source


def load_preset(name: str) -> None:
    pr = PRESETS[name]
    _set_rows(pr.names, normalise(pr.p, "p"), normalise(pr.q, "q"), f"preset:{name}")


def load_from_lab() -> None:
    """The rule lab's current table (its edited rows), if the lab has been opened."""
    table = S.get("rl_current")
    if table is None:
        return
    try:
        p = normalise(LV.weights(table["p"].tolist(), "p"), "p")
        q = normalise(LV.weights(table["q"].tolist(), "q"), "q")
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["ll_rows_error"] = error_message(exc)
        return
    _set_rows(LV.unique_names(table["name"].tolist()), p, q, "lab")


def parse_weights(text: object, row: str) -> list[float]:
    """A weights field (numbers separated by commas or spaces) as floats.

    Raises:
        RuleInputError: ``not_a_number`` (an entry that is not a number), ``n_tokens``
            (not 3..8 entries).
    """
    parts = [x for x in _SPLIT.split(str(text)[:ROW_CHARS].strip()) if x]
    try:
        return [float(x) for x in parts]
    except ValueError:
        msg = f"{row}: every weight must be a number"
        raise RuleInputError(msg, "not_a_number", row=row) from None


def parse_rows() -> None:
    """``on_change`` of the two weight fields: new rows, or one message and the last good
    rows (and their text) kept."""
    try:
        p = normalise(LV.weights(parse_weights(S.get("ll_p_text", ""), "p"), "p"), "p")
        q = normalise(LV.weights(parse_weights(S.get("ll_q_text", ""), "q"), "q"), "q")
        if len(p) != len(q):
            msg = "p and q need as many weights"
            raise RuleInputError(msg, "lossy_lengths", p=len(p), q=len(q))
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["ll_rows_error"] = error_message(exc)
        names, p_old, q_old = S[ROWS]
        S["ll_p_text"], S["ll_q_text"] = _text(p_old), _text(q_old)
        return
    old = S[ROWS][0]
    names = old if len(old) == len(p) else [default_name(i) for i in range(len(p))]
    _set_rows(names, p, q, "typed")


def _knobs():
    """The knobs on screen, checked (a crafted state → one message, the defaults back)."""
    try:
        return check_lossy(S.get("ll_delta"), S.get("ll_eps"), S.get("ll_topk"))
    except RuleInputError as exc:
        S.update(KNOBS)
        st.error(error_message(exc))
        return check_lossy(DEFAULT_DELTA, DEFAULT_EPSILON, DEFAULT_TOP_K)


def show_rows_input() -> tuple[list[str], np.ndarray, np.ndarray]:
    """Preset buttons, the lab's rows, two weight fields. Returns (names, p, q)."""
    if ROWS not in S:
        load_preset("textbook")
    for key, value in KNOBS.items():
        if key not in S:
            S[key] = value
    cols = st.columns(len(PRESETS) + 1)
    for col, name in zip(cols, PRESETS, strict=False):
        col.button(
            t(f"rl_preset_{name}"),
            key=f"ll_preset_{name}",
            on_click=load_preset,
            args=(name,),
            width="stretch",
        )
    cols[-1].button(
        t("ll_from_lab"),
        key="ll_from_lab",
        on_click=load_from_lab,
        disabled=S.get("rl_current") is None,
        help=t("ll_from_lab_help"),
        width="stretch",
    )
    if "ll_rows_error" in S:
        st.error(S.pop("ll_rows_error"))
    a, b = st.columns(2)
    a.text_input(t("ll_p_weights"), key="ll_p_text", on_change=parse_rows, max_chars=ROW_CHARS)
    b.text_input(t("ll_q_weights"), key="ll_q_text", on_change=parse_rows, max_chars=ROW_CHARS)
    st.caption(t("ll_rows_help"))
    names, p, q = S[ROWS]
    return names, p, q


def show_lab_rules() -> LossyRules:
    """Section 4a: the exact, typical and threshold rules on the lab's rows. Returns the
    knobs on screen (section 4b runs the pair with the same ε and top-k)."""
    st.subheader(t("ll_sub_lab"))
    st.markdown(t("ll_rules_help"))
    names, p, q = show_rows_input()
    knobs = _knobs()  # before the widgets: a crafted state never reaches them
    k1, k2, k3 = st.columns(3)
    k1.slider(t("ll_delta"), 0.0, 1.0, step=0.025, key="ll_delta", help=t("ll_delta_help"))
    k2.number_input(
        t("ll_eps"), 0.0, 1.0, step=0.01, format="%.2f", key="ll_eps", help=t("ll_eps_help")
    )
    k3.selectbox(t("ll_topk"), list(range(MAX_TOP_K + 1)), key="ll_topk", help=t("ll_topk_help"))
    results = compare_lossy(p, q, knobs)
    st.caption(
        t(
            "ll_typical_bar",
            bar=fmt_prob(typical_threshold(p, knobs.delta, knobs.epsilon)),
            delta=f"{knobs.delta:g}",
            eps=f"{knobs.epsilon:g}",
        )
    )
    labels = {
        "p": t("rl_lab_p"),
        "probability": t("probability"),
        "token": t("token"),
        **{rule: t(f"ll_rule_{rule}") for rule in LOSSY_RULES},
    }
    finals = {rule: res.final for rule, res in results.items()}
    st.plotly_chart(
        LV.figure(lossy_finals_figure, names, p, finals, labels, t("ll_fig_finals")),
        key="ll_fig_finals",
    )
    LV.table(
        "ll_rule_summary",
        {
            "rule": ([t(f"ll_rule_{r}") for r in LOSSY_RULES], t("rl_col_rule")),
            "acceptance": (
                [results[r].acceptance for r in LOSSY_RULES],
                LV.number(t("ll_col_accept")),
            ),
            "tv": ([results[r].tv_to_p for r in LOSSY_RULES], LV.number(t("rl_col_tv"))),
            "lossless": (
                [t("yes") if results[r].tv_to_p < 1e-9 else t("no") for r in LOSSY_RULES],
                t("ll_col_lossless"),
            ),
        },
    )
    st.markdown(f"**{t('ll_table_title')}**")
    marks = {r: results[r].accepted for r in ("typical", "threshold")}
    LV.table(
        "ll_final_table",
        {
            "token": (names, t("rl_col_name")),
            "p": (p, LV.number("p")),
            "q": (q, LV.number("q")),
            **{r: (results[r].final, LV.number(t(f"ll_short_{r}"))) for r in LOSSY_RULES},
            "passes": (
                [
                    f"{t('yes') if a else t('no')} / {t('yes') if b else t('no')}"
                    for a, b in zip(*marks.values(), strict=True)
                ],
                t("ll_col_passes"),
            ),
        },
    )
    sweeps = {r: lossy_sweep(p, q, r, knobs) for r in ("typical", "threshold")}
    curve_labels = {
        "delta": "δ",
        "value": t("ll_fig_price_y"),
        "exact_A": t("ll_price_exact_A"),
        **{f"{r}_tv": t("ll_price_tv", rule=t(f"ll_rule_{r}")) for r in sweeps},
        **{f"{r}_A": t("ll_price_A", rule=t(f"ll_rule_{r}")) for r in sweeps},
    }
    st.plotly_chart(
        LV.figure(
            lossy_price_figure,
            sweeps["typical"].deltas,
            {r: (s.tv_to_p, s.acceptance) for r, s in sweeps.items()},
            results["exact"].acceptance,
            knobs.delta,
            curve_labels,
            t("ll_fig_price"),
        ),
        key="ll_fig_price",
    )
    st.markdown(RD.price_reading(p, sweeps, results["exact"].acceptance, knobs))
    return knobs
