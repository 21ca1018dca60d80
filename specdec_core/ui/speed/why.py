"""The speed page's "why": the verify-cost curve, the round timeline of the median runs and
the prediction-vs-measurement table per drafter. Rendering only: every number is an
attribute of a bench result or a timeline (``specdec_core.bench``, ``timeline``)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

import streamlit as st

from specdec_core.core.timeline import Timeline
from specdec_core.server.tasks import Measurement
from specdec_core.ui.figures.speed_timing import speed_timeline_figure, speed_verify_curve_figure
from specdec_core.ui.i18n import strings, t
from specdec_core.ui.render import html_table
from specdec_core.ui.speed.view import busy_message, how_label


def _err(pred: float, meas: float) -> str:
    """The relative error in %, its sign and unit kept together (a no-break space)."""
    return f"{100.0 * (pred - meas) / meas:+.1f}\u00a0%" if meas else "—"


def show_verify_curve(measured: Measurement) -> None:
    """The verify-cost curve with its spread and how it was measured; on a machine too busy
    for a conclusion (``summary.timing.busy``), that message instead of the curve and its
    best γ."""
    curve, gamma = measured.curve, measured.params["config"].gamma
    if curve is None:
        return
    st.subheader(t("sp_why_header"))
    st.markdown(t("sp_why_help", r=curve.repeats))
    timing = measured.summary.timing
    if timing is not None and timing.busy:
        st.warning(busy_message(timing.reasons, "sp_busy_curve"))
        st.caption(how_label(curve.how, curve=True))
        return
    labels = {
        "title": t("sp_vc_title"),
        "x": t("sp_vc_x"),
        "y": t("sp_vc_y"),
        "measured": t("sp_vc_measured"),
        "flat": t("sp_vc_flat"),
        "serial": t("sp_vc_serial"),
        "verify": t("sp_vc_verify"),
        "draft": t("sp_vc_draft"),
    }
    st.plotly_chart(
        speed_verify_curve_figure(curve.target_ms, curve.draft_step_ms, gamma, labels),
        width="stretch",
        key="sp_vc_fig",
    )
    k = min(gamma + 1, len(curve.target_ms))
    cm = measured.summary.cost_model
    st.caption(
        t(
            "sp_vc_caption",
            t1=cm.target_step_ms,
            k=k,
            tk=curve.target_ms[k - 1],
            r=curve.ratio()[k - 1],
            d=cm.draft_step_ms,
            g=cm.best_gamma,
        )
    )
    if curve.target_spread:
        one, kk = curve.target_spread[0], curve.target_spread[k - 1]
        d = curve.draft_spread
        st.caption(
            t(
                "sp_vc_spread",
                lo1=one.low,
                hi1=one.high,
                k=k,
                lok=kk.low,
                hik=kk.high,
                lod=d.low if d else 0.0,
                hid=d.high if d else 0.0,
                how=how_label(curve.how, curve=True),
            )
        )


def drafting_text(sp: Timeline) -> str:
    """What the speculative lane's drafter ran, in its own terms (draft-model forwards,
    EAGLE head forwards, MTP head passes, GRU steps, none for prompt lookup), with the
    count per round: the caption's first term."""
    bars = sum(1 for s in sp.forwards if s.kind == "draft")
    rounds = max(1, len(sp.rounds))
    key = "sp_tl_drafting_" + sp.drafter
    n = sp.draft_forwards
    return t(
        key if key in strings() else "sp_tl_drafting",
        n=n,
        b=bars,
        pn=f"{n / rounds:.1f}",
        pb=f"{bars / rounds:.1f}",
    )


def show_timeline(measured: Measurement) -> None:
    if measured.timelines is None:
        return
    ar, sp = measured.timelines
    st.subheader(t("sp_tl_header"))
    st.markdown(t("sp_tl_help"))
    keys = ("title", "x", "ar", "sp", "target", "draft", "verify", "done")
    labels = {k: t("sp_tl_" + k) for k in keys}
    if "sp_tl_draft_" + sp.drafter in strings():  # the drafter's bars by their name
        labels["draft"] = t("sp_tl_draft_" + sp.drafter)
    st.plotly_chart(speed_timeline_figure(ar, sp, labels), width="stretch", key="sp_tl_fig")
    n_draft = sum(1 for s in sp.forwards if s.kind == "draft")
    st.caption(
        t(
            "sp_tl_caption",
            an=len(ar.forwards),
            af=ar.forward_ms,
            ao=ar.overhead_ms,
            at=ar.total_ms,
            drafting=drafting_text(sp),
            sv=len(sp.forwards) - n_draft,
            sf=sp.forward_ms,
            so=sp.overhead_ms,
            st=sp.total_ms,
        )
    )


def show_predictions(by_drafter: Mapping[str, Measurement]) -> None:
    """One row per drafter measured in this session, in three tables: how it ran (γ,
    drafts per round, how its drafting is priced), predicted vs measured tokens per round
    and predicted vs measured speed-up, each with the relative error."""
    if not by_drafter:
        return
    st.subheader(t("sp_pv_header"))
    st.markdown(t("sp_pv_help"))
    # three narrow tables (how each drafter ran, tokens per round, speed-up), one row per
    # drafter, headers wrapping: ten columns scrolled sideways at 1024 px and on a phone
    heads = {
        "runs": ("sp_pv_drafter", "sp_col_gamma", "sp_pv_drafts", "sp_pv_priced"),
        "tokens": ("sp_pv_drafter", "sp_pv_tok_pred", "sp_pv_tok_meas", "sp_pv_err"),
        "speedup": ("sp_pv_drafter", "sp_pv_sp_pred", "sp_pv_sp_meas", "sp_pv_err"),
    }
    tables: dict[str, dict[str, list]] = {
        name: {t(k): [] for k in keys} for name, keys in heads.items()
    }
    errors = []  # |error| of each predicted speed-up shown (%)
    for name, m in by_drafter.items():
        s = m.summary
        cm, sp = s.cost_model, s.speculative
        busy = s.timing is not None and s.timing.busy  # no prediction from a busy machine
        drafter = t("sp_drafter_" + name)
        cells = {
            "runs": [
                drafter,
                s.gamma,
                f"{sp.drafts_per_round:.2f}",
                t("sp_pv_cost_" + m.curve.draft_cost) if m.curve is not None else "—",
            ],
            "tokens": [
                drafter,
                f"{cm.expected_tokens_per_round:.2f}",
                f"{cm.measured_tokens_per_round:.2f}",
                _err(cm.expected_tokens_per_round, cm.measured_tokens_per_round),
            ],
            "speedup": [
                drafter,
                "—" if busy else f"{cm.predicted_speedup:.2f}×",
                f"{s.speedup:.2f}×",
                "—" if busy else _err(cm.predicted_speedup, s.speedup),
            ],
        }
        for table, values in cells.items():
            for column, value in zip(tables[table], values, strict=True):
                tables[table][column].append(value)
        if not busy and s.speedup:
            errors.append(abs(100.0 * (cm.predicted_speedup - s.speedup) / s.speedup))
    for table, columns in tables.items():
        st.html(html_table(columns, name=f"sp-pv-{table} heads-wrap"))
    if errors:
        median, worst = statistics.median(errors), max(errors)
        st.caption(t("sp_pv_median", n=len(errors), median=f"{median:.1f}", worst=f"{worst:.1f}"))
