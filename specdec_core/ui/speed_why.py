"""The speed page's "why": the verify-cost curve, the round timeline of the median runs and
the prediction-vs-measurement table per drafter. Rendering only: every number is an
attribute of a bench result or a timeline (``specdec_core.bench``, ``timeline``)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from specdec_core.figures.speed_timing import speed_timeline_figure, speed_verify_curve_figure

from .i18n import t
from .jobs import Measurement


def _err(pred: float, meas: float) -> str:
    return f"{100.0 * (pred - meas) / meas:+.1f} %" if meas else "—"


def show_verify_curve(measured: Measurement) -> None:
    curve, gamma = measured.curve, measured.params["config"].gamma
    if curve is None:
        return
    st.subheader(t("sp_why_header"))
    st.markdown(t("sp_why_help", r=curve.repeats))
    labels = {
        "title": t("sp_vc_title"), "x": t("sp_vc_x"), "y": t("sp_vc_y"),
        "measured": t("sp_vc_measured"), "flat": t("sp_vc_flat"), "serial": t("sp_vc_serial"),
        "verify": t("sp_vc_verify"), "draft": t("sp_vc_draft"),
    }  # fmt: skip
    st.plotly_chart(
        speed_verify_curve_figure(curve.target_ms, curve.draft_step_ms, gamma, labels),
        width="stretch", key="sp_vc_fig",
    )  # fmt: skip
    k = min(gamma + 1, len(curve.target_ms))
    st.caption(t(
        "sp_vc_caption", t1=curve.target_ms[0], k=k, tk=curve.target_ms[k - 1],
        r=curve.ratio()[k - 1], d=curve.draft_step_ms, g=measured.summary.cost_model.best_gamma,
    ))  # fmt: skip


def show_timeline(measured: Measurement) -> None:
    if measured.timelines is None:
        return
    ar, sp = measured.timelines
    st.subheader(t("sp_tl_header"))
    st.markdown(t("sp_tl_help"))
    keys = ("title", "x", "ar", "sp", "target", "draft", "verify", "done")
    labels = {k: t("sp_tl_" + k) for k in keys}
    st.plotly_chart(speed_timeline_figure(ar, sp, labels), width="stretch", key="sp_tl_fig")
    n_draft = sum(1 for s in sp.forwards if s.kind == "draft")
    st.caption(t(
        "sp_tl_caption", an=len(ar.forwards), af=ar.forward_ms, ao=ar.overhead_ms,
        at=ar.total_ms, sd=n_draft, sv=len(sp.forwards) - n_draft, sf=sp.forward_ms,
        so=sp.overhead_ms, st=sp.total_ms,
    ))  # fmt: skip


def show_predictions(by_drafter: Mapping[str, Measurement]) -> None:
    """One row per drafter measured in this session: predicted vs measured tokens per
    round and speed-up, with the relative errors."""
    if not by_drafter:
        return
    st.subheader(t("sp_pv_header"))
    st.markdown(t("sp_pv_help"))
    rows: dict[str, list] = {t(k): [] for k in (
        "sp_pv_drafter", "sp_col_gamma", "sp_pv_drafts", "sp_pv_tok_pred",
        "sp_pv_tok_meas", "sp_pv_err", "sp_pv_sp_pred", "sp_pv_sp_meas")}  # fmt: skip
    rows[t("sp_pv_err") + " "] = []
    for name, m in by_drafter.items():
        s = m.summary
        cm, sp = s.cost_model, s.speculative
        values = [
            t("sp_drafter_" + name), s.gamma, f"{sp.drafts_per_round:.2f}",
            f"{cm.expected_tokens_per_round:.2f}", f"{cm.measured_tokens_per_round:.2f}",
            _err(cm.expected_tokens_per_round, cm.measured_tokens_per_round),
            f"{cm.predicted_speedup:.2f}×", f"{s.speedup:.2f}×",
            _err(cm.predicted_speedup, s.speedup),
        ]  # fmt: skip
        for column, value in zip(rows, values, strict=True):
            rows[column].append(value)
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
