"""The speed page's sweeps: γ (each point its own interleaved target-only / speculative
runs) and batch size (batched target-only decoding vs speculative decoding of one prompt),
as a figure and a table each.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from specdec_core.bench.results import BatchPoint, GammaPoint
from specdec_core.bench.sweeps import batch_crossover, best_point, gamma_sweep_verdict
from specdec_core.bench.timing import HowMeasured
from specdec_core.ui.figures.speed import (
    speed_batch_figure,
    speed_gamma_sweep_figure,
)
from specdec_core.ui.i18n import t
from specdec_core.ui.render import html_table
from specdec_core.ui.speed.view import busy_message, fmt, how_label


def _partial(title_key: str, partial: bool) -> str:
    return t(title_key) + (" " + t("sp_partial") if partial else "")


def show_gamma_sweep(
    points: Sequence[GammaPoint], partial: bool, how: HowMeasured | None = None
) -> None:
    """The γ sweep: each point its own interleaved target-only / speculative runs (its
    step times are its own runs'); ``how``: the label, once the sweep finished."""
    labels = {
        "title": _partial("sp_gamma_fig_title", partial),
        "x": t("sp_curve_fig_x"),
        "y": t("sp_gamma_fig_y"),
        "measured": t("sp_gamma_measured"),
        "forward": t("sp_gamma_forward"),
        "leviathan": t("sp_gamma_leviathan"),
        "breakeven": t("sp_breakeven"),
    }
    st.plotly_chart(speed_gamma_sweep_figure(points, labels), width="stretch", key="sp_gamma_fig")
    verdict, conclusive = gamma_sweep_verdict(points)
    top = best_point(points, lambda q: q.speedup)
    top_model = best_point(points, lambda q: q.forward_time_speedup)
    if verdict.busy:  # the curve's rule: no best γ from times that describe the load
        st.warning(busy_message(verdict.reasons, "sp_busy_sweep"))
    elif not conclusive:
        st.warning(t("sp_sweep_one_pass"))
    elif top is not None and top_model is not None:
        st.markdown(
            t(
                "sp_gamma_best",
                g=top.gamma,
                x=top.speedup,
                gp=top_model.gamma,
                xp=top_model.forward_time_speedup,
            )
        )
    # two narrow tables rather than one of eight columns, headers wrapping, numbers not:
    # each fits a phone's width with nothing to scroll sideways (st.dataframe's headers
    # never wrap) and reads in a projector's type
    gammas = {t("sp_col_gamma"): [q.gamma for q in points]}
    speedups = {
        t("sp_col_speedup"): [f"{q.speedup:.2f}×" for q in points],
        t("sp_col_forward"): [f"{q.forward_time_speedup:.2f}×" for q in points],
        t("sp_col_leviathan"): [f"{q.leviathan_speedup:.2f}×" for q in points],
    }
    runs = {
        t("sp_col_sp_tps"): [fmt(q.speculative_tokens_per_s, 1) for q in points],
        t("sp_col_alpha"): [fmt(q.alpha, 3) for q in points],
        t("sp_col_mean_acc"): [fmt(q.mean_accepted) for q in points],
        t("sp_col_equal"): [t("yes") if q.greedy_equal else t("no") for q in points],
    }
    for name, columns in (("sp-gamma-speedups", speedups), ("sp-gamma-runs", runs)):
        st.html(html_table(gammas | columns, name=name + " heads-wrap"))
    if how is not None:
        st.caption(how_label(how))


def show_batch_sweep(
    points: Sequence[BatchPoint], partial: bool, how: HowMeasured | None = None
) -> None:
    """The batch sweep; ``how``: the label, once the sweep finished."""
    done = sorted(points, key=lambda q: q.batch_size)
    labels = {
        "title": _partial("sp_batch_fig_title", partial),
        "x": t("sp_batch_fig_x"),
        "y": t("sp_batch_fig_y"),
        "batched": t("sp_batch_batched"),
        "speculative": t("sp_batch_speculative"),
        "sequential": t("sp_batch_sequential"),
    }
    st.plotly_chart(speed_batch_figure(done, labels), width="stretch", key="sp_batch_fig")
    cross = batch_crossover(done)
    if cross is not None and cross == done[0].batch_size:
        st.markdown(t("sp_batch_never", b=cross))
    elif cross is not None:
        st.markdown(t("sp_batch_crossover", b=cross))
    else:
        st.markdown(t("sp_batch_no_crossover", b=done[-1].batch_size))
    columns = {
        t("sp_col_batch"): [q.batch_size for q in done],
        t("sp_col_batched"): [fmt(q.batched_autoregressive_tokens_per_s, 1) for q in done],
        t("sp_col_seq_sp"): [fmt(q.sequential_speculative_tokens_per_s, 1) for q in done],
        t("sp_col_seq_ar"): [fmt(q.sequential_autoregressive_tokens_per_s, 1) for q in done],
    }
    st.html(html_table(columns, name="sp-batch heads-wrap"))  # as the γ sweep's tables
    if how is not None:
        st.caption(how_label(how))
