"""The speed page's results: one measurement (metrics, side-by-side table, breakdown,
predictions, histogram, per-position acceptance, texts), the γ sweep and the batch sweep.
Rendering only: every number is an attribute of a bench result (``specdec_core.bench``)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from specdec_core.bench.curve import ForwardCurve
from specdec_core.bench.results import (
    AutoregressiveFigures,
    BenchSummary,
    HFComparison,
    HFFigures,
    SpeculativeFigures,
    TimingFigures,
)
from specdec_core.bench.timing import (
    BUSY_SPREAD,
    LOAD_CHANGED,
    SAME_STEP_SPREAD,
    HowMeasured,
    Spread,
)
from specdec_core.server.tasks import Measurement
from specdec_core.ui.figures.speed import (
    speed_breakdown_figure,
    speed_histogram_figure,
    speed_position_figure,
)
from specdec_core.ui.i18n import t
from specdec_core.ui.render import html_table

# side-by-side rows: (string key, digits)
ROWS = (
    ("sp_row_tps", 1),
    ("sp_row_ms_tok", 3),
    ("sp_row_ttft", 2),
    ("sp_row_new", 0),
    ("sp_row_target_fw", 0),
    ("sp_row_draft_fw", 0),
    ("sp_row_mean_acc", 2),
)


def fmt(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}"


def how_label(how: HowMeasured | None, curve: bool = False) -> str:
    """How a timing was measured, for the caption next to it: when (UTC),
    repeats, warm-up, tokens and, where the OS has it, the machine's load. ``curve``: the
    verify-cost curve's wording (``tokens`` is its widest forward). Empty for ``None``."""
    if how is None:
        return ""
    when = time.strftime("%H:%M:%S", time.gmtime(how.at))
    text = t(
        "sp_how_curve" if curve else "sp_how",
        when=when,
        repeats=how.repeats,
        warmup=how.warmup,
        tokens=how.tokens,
    )
    return text + (t("sp_how_load", load=how.load, cpus=how.cpus) if how.load is not None else ".")


def spread_text(s: Spread, digits: int = 2) -> str:
    """``median (min–max)``."""
    return f"{s.median:.{digits}f} ({s.low:.{digits}f}–{s.high:.{digits}f})"


def busy_message(reasons: Sequence[str], key: str = "sp_busy") -> str:
    """ "This machine is too busy to measure this now", with the failed checks named."""
    pct = {LOAD_CHANGED: 100 * SAME_STEP_SPREAD}
    why = t("sp_busy_join").join(
        t("sp_busy_" + r, pct=pct.get(r, 100 * BUSY_SPREAD)) for r in reasons
    )
    return t(key, why=why)


def _timing_notes(timing: TimingFigures | None) -> None:
    """The runs' spread and how they were measured (the busy warning is drawn above the
    metrics, where they are read first)."""
    if timing is None:
        return
    if timing.ar_ms_per_token is not None and timing.sp_ms_per_token is not None:
        st.caption(
            t(
                "sp_spread",
                n=timing.ar_ms_per_token.n,
                a=spread_text(timing.ar_ms_per_token),
                s=spread_text(timing.sp_ms_per_token),
            )
            + " "
            + how_label(timing.runs_how)
        )


def _cells(run: AutoregressiveFigures | SpeculativeFigures | HFFigures) -> list:
    """One column of the side-by-side table, in the order of :data:`ROWS` (``None``: the
    run has no such figure)."""
    ttft = drafts = accepted = None
    if isinstance(run, AutoregressiveFigures):
        ttft = run.ttft_ms
    elif isinstance(run, SpeculativeFigures):
        ttft, drafts, accepted = run.ttft_ms, run.draft_forwards, run.mean_accepted
    else:
        accepted = run.mean_accepted
    return [
        run.tokens_per_s,
        run.ms_per_token,
        ttft,
        run.new_tokens,
        run.target_forwards,
        drafts,
        accepted,
    ]


def _greedy_check(equal: bool, hf: HFComparison) -> None:
    hf_ok = hf.assisted.equal_to_target if hf.assisted is not None else None
    if equal:
        st.success(t("sp_eq_ok", hf=t("sp_eq_ok_hf") if hf_ok else ""))
    else:
        st.error(t("sp_eq_bad"))
    if hf_ok is False:
        st.error(t("sp_eq_bad_hf"))


def show_measurement(measured: Measurement) -> None:
    p, summary, hf = measured.params, measured.summary, measured.hf
    ar, sp, cm = summary.autoregressive, summary.speculative, summary.cost_model
    st.caption(
        t(
            "sp_results_for",
            settings=t(
                "sp_settings_fmt",
                gamma=p["config"].gamma,
                temp=p["config"].temperature,
                n=p["n"],
                r=p["repeats"],
                pair=p["pair"],
                device=p["device"],
            )
            + t("sp_settings_drafter", drafter=t("sp_drafter_" + p.get("drafter", "model")))
            + (t("sp_settings_threads", n=p["threads"]) if p["threads"] else ""),
        )
    )
    busy = summary.timing is not None and summary.timing.busy
    if busy:  # above the metrics: a timed figure is read first, and here it is uncertain
        st.warning(busy_message(summary.timing.reasons))
    timed = t("sp_m_uncertain") if busy else ""  # the load-dependent metrics, marked
    timed_help = t("sp_m_uncertain_help") if busy else None
    r1, r2, r3, r4, r5 = st.columns(5)
    r1.metric(t("sp_m_ar_tps") + timed, fmt(ar.tokens_per_s, 1), help=timed_help)
    r2.metric(t("sp_m_sp_tps") + timed, fmt(sp.tokens_per_s, 1), help=timed_help)
    r3.metric(t("sp_m_speedup") + timed, f"{summary.speedup:.2f}×", help=timed_help)
    r4.metric(t("sp_m_alpha"), fmt(sp.acceptance_rate, 3), help=t("sp_m_alpha_help"))
    r5.metric(t("sp_m_mean_acc"), fmt(sp.mean_accepted), help=t("sp_m_mean_acc_help"))
    if p["config"].temperature == 0.0:
        _greedy_check(summary.greedy_equal, hf)
    else:
        st.info(t("sp_eq_sampling"))
    if measured.hf_error:
        st.warning(t("sp_hf_failed", msg=measured.hf_error))
    _timing_notes(summary.timing)

    st.subheader(t("sp_table_header"))
    columns: list[tuple[str, AutoregressiveFigures | SpeculativeFigures | HFFigures]] = [
        (t("sp_col_ar"), ar),
        (t("sp_col_sp"), sp),
    ]
    if hf.greedy is not None:
        columns.append((t("sp_col_hf_greedy"), hf.greedy))
    if hf.assisted is not None:
        columns.append((t("sp_col_hf_assisted"), hf.assisted))
    table = {"": [t(key) for key, _ in ROWS]}
    for name, run in columns:
        table[name] = [
            "—" if v is None else fmt(v, d) for v, (_, d) in zip(_cells(run), ROWS, strict=True)
        ]
    st.html(html_table(table, name="sp-side heads-wrap"))  # fits a phone: headers wrap

    if not busy:  # made of the step times: nothing is concluded from a busy machine
        _breakdown_and_predictions(summary, measured.curve)

    h1, h2 = st.columns(2)
    h1.plotly_chart(
        speed_histogram_figure(
            sp.accepted_histogram,
            {"title": t("sp_hist_title"), "x": t("sp_hist_x"), "y": t("sp_hist_y")},
        ),
        width="stretch",
        key="sp_hist_fig",
    )
    pos_labels = {
        "title": t("sp_pos_title"),
        "x": t("sp_pos_x"),
        "y": t("sp_pos_y"),
        "measured": t("sp_pos_measured"),
        "model": t("sp_pos_model"),
        "conditional": t("sp_pos_conditional"),
    }
    h2.plotly_chart(
        speed_position_figure(
            sp.per_position_acceptance, cm.alpha, pos_labels, cm.conditional_acceptance
        ),
        width="stretch",
        key="sp_pos_fig",
    )
    with st.expander(t("sp_texts")):
        st.markdown(f"**{t('sp_text_ar')}**")
        st.text(measured.texts[0])
        st.markdown(f"**{t('sp_text_sp')}**")
        st.text(measured.texts[1])


def _one_source(verify_ms: float, drafts: float, curve: ForwardCurve) -> str:
    """Where the breakdown's step times come from: the curve, and how the verification is
    read off it (``verify_ms`` = the mean ``t(g + 1)`` over the rounds × the level)."""
    level = curve.verify_level()
    return t(
        "sp_one_source",
        tg=verify_ms / level if level > 0 else verify_ms,
        g=drafts,
        lvl=level,
        v=verify_ms,
    )


def _breakdown_and_predictions(summary: BenchSummary, curve: ForwardCurve | None) -> None:
    """The round breakdown and the predictions: every step time in them is the one
    measurement's (``summary.cost_model``; read off ``curve`` where there is one: ``t(1)``,
    and the verification as ``t(g + 1) × curve.verify_level()`` over the rounds' ``g``)."""
    cm = summary.cost_model
    st.subheader(t("sp_breakdown_header"))
    bd = summary.breakdown
    labels = {
        "draft": t("sp_part_draft"),
        "verify": t("sp_part_verify"),
        "overhead": t("sp_part_overhead"),
        "target": t("sp_part_target"),
        "round": t("sp_breakdown_round", k=bd.tokens_per_round),
        "target_only": t("sp_breakdown_target", k=bd.tokens_per_round),
        "title": t("sp_breakdown_fig_title"),
        "x": "ms",
    }
    st.plotly_chart(speed_breakdown_figure(bd, labels), width="stretch", key="sp_breakdown_fig")
    sh = bd.shares_pct
    one_source = summary.timing is not None and summary.timing.source == "curve"
    st.caption(
        t(
            "sp_breakdown_caption",
            d=bd.round.draft,
            dp=sh.draft,
            v=bd.round.verify,
            vp=sh.verify,
            o=bd.round.overhead,
            op=sh.overhead,
            t=cm.target_step_ms,
            r=cm.verify_over_target_step,
            g=summary.speculative.drafts_per_round,
        )
        + (
            _one_source(cm.verify_ms, summary.speculative.drafts_per_round, curve)
            if one_source and curve is not None
            else ""
        )
    )

    st.subheader(t("sp_predict_header"))
    predictions = [
        ("sp_pred_measured", summary.speedup),
        ("sp_pred_forward", cm.forward_time_speedup),
        ("sp_pred_forward_adv", cm.forward_time_speedup_measured_advance),
        ("sp_pred_overhead", cm.predicted_speedup),
        ("sp_pred_leviathan", cm.leviathan_speedup),
    ]
    st.dataframe(
        pd.DataFrame(
            {
                t("sp_pred_col_what"): [t(k) for k, _ in predictions],
                t("sp_pred_col_value"): [f"{v:.2f}×" for _, v in predictions],
            }
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption(
        t(
            "sp_pred_caption",
            c=cm.c,
            adv=cm.measured_tokens_per_round,
            exp=cm.expected_tokens_per_round,
            rates=", ".join(f"{a:.2f}" for a in cm.conditional_acceptance) or "—",
        )
    )
