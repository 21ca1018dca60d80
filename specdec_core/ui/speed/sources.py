"""Every draft source compared: the table + chart that show a
:class:`SourceComparison`, on the drafters page and the speed page (each under its own
session key ``{prefix}_sources``; the run itself: ``ui/speed/compare_run.py``).

Rendering only: every number is an attribute of a :class:`SourceComparison` (measured by
the engine's fast path; predictions from ``rules/costmodel.py`` inside ``bench``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specdec_core.bench.source_results import SourceComparison, SourceRow
from specdec_core.ui.figures.drafters import sources_figure
from specdec_core.ui.i18n import follows_language, strings, t, tr
from specdec_core.ui.render import header_width
from specdec_core.ui.speed.view import busy_message, how_label, spread_text

TOKENS = (8, 16, 32)  # new tokens per run offered (a run of 6 sources × 4 settings)
REPEATS = (1, 3, 5)
COLUMNS = (
    "source",
    "gamma",
    "accepted",
    "draft_fwd",
    "heads",
    "extra_target",
    "alpha",
    "tokens",
    "tokens_pred",
    "ms",
    "speedup",
    "speedup_pred",
    "c",
)


def source_label(name: str) -> str:
    """A source's short name on screen (``src_name_<name>``; the raw name for a source
    that has no string yet)."""
    key = "src_name_" + name
    return t(key) if key in strings() else name


def temp_label(temperature: float, language: str | None = None) -> str:
    """ "Greedy (T = 0)" or "Sampled (T = 1)" in ``language`` (default: the page's)."""
    if language is None:
        return t("src_temp_greedy") if temperature == 0 else t("src_temp_sampled", t=temperature)
    key = "src_temp_greedy" if temperature == 0 else "src_temp_sampled"
    return tr(key, language).format(t=temperature)


def result_key(prefix: str) -> str:
    return f"{prefix}_sources"


def _row(r: SourceRow) -> dict[str, str]:
    return {
        "source": source_label(r.name),
        "gamma": str(r.gamma),
        "accepted": f"{r.accepted_per_round:.2f}",
        "draft_fwd": f"{r.draft_forwards_per_round:.2f}",
        "heads": "—"
        if r.head_evaluations_per_round is None
        else f"{r.head_evaluations_per_round:.2f}",
        "extra_target": f"{r.extra_target_forwards_per_round:.2f}",
        "alpha": f"{r.acceptance_rate:.2f}",
        "tokens": f"{r.tokens_per_round:.2f}",
        "tokens_pred": f"{r.predicted_tokens_per_round:.2f}",
        "ms": spread_text(r.ms_per_token, 1),
        "speedup": spread_text(r.speedup),
        "speedup_pred": f"{r.predicted_speedup:.2f}×",
        "c": f"{r.cost_ratio:.2f}",
    }


def table(rows: tuple[SourceRow, ...], key: str) -> None:
    """One setting's rows as a table (translated headers with their help)."""
    frame = pd.DataFrame([_row(r) for r in rows], columns=list(COLUMNS))
    config = {
        col: st.column_config.TextColumn(
            t("src_col_" + col),
            help=t(f"src_col_{col}_help"),
            alignment="left" if col == "source" else "right",
            # a dataframe never wraps a header: each column as wide as its header and
            # cells (the grid scrolls sideways, the source's name pinned), none cut
            width=header_width(t("src_col_" + col), list(frame[col])),
            pinned=col == "source",
        )
        for col in COLUMNS
    }
    st.dataframe(frame, hide_index=True, width="stretch", column_config=config, key=key)


def show(comp: SourceComparison, prefix: str) -> None:
    """The comparison: how it was measured, a temperature choice, one table per prompt
    and the chart of measured vs predicted speed-ups."""
    caps = sorted({(r.name, r.gamma) for r in comp.rows if r.gamma != comp.gamma})
    st.caption(
        t("src_run_info", gamma=comp.gamma, tokens=comp.max_new_tokens, seed=comp.seed)
        + (
            " "
            + t(
                "src_capped",
                caps=t("src_list_sep").join(f"{source_label(n)} γ = {g}" for n, g in caps),
            )
            if caps
            else ""
        )
        + " "
        + how_label(comp.how)
    )
    if comp.partial:
        st.warning(
            t(
                "src_bg_partial",
                budget=f"{comp.budget_s or 0:.0f}",
                ran=comp.ran,
                planned=comp.planned,
            )
        )
    if comp.verdict.busy:
        st.warning(busy_message(comp.verdict.reasons, "src_busy"))
    elif comp.how.repeats < 2:  # nothing to judge the load by
        st.warning(t("src_one_pass"))
    temps = sorted({temp for _, temp in comp.settings})
    # labels in the screen's language; a language switch puts the choice back by key
    shown = {x: temp_label(x) for x in temps}
    temp = st.radio(
        t("src_show_temp"),
        temps,
        format_func=shown.get,
        horizontal=True,
        key=follows_language(f"{prefix}_src_temp"),
    )
    prompts = [key for key, _ in comp.prompts if (key, temp) in comp.settings]  # partial: some
    for key in prompts:
        target = comp.target(key, temp)
        st.markdown(
            f"**{t('src_prompt_' + key) if 'src_prompt_' + key in strings() else key}** · "
            + t("src_target_line", ms=spread_text(target.ms_per_token, 1), step=target.step_ms)
        )
        table(comp.rows_for(key, temp), key=f"{prefix}_src_table_{key}")
    if not comp.conclusive:  # no ranking from times that describe the load
        st.info(t("src_bg_no_ranking"))
        st.caption(t("src_forwards_note"))
        return
    names = comp.sources
    labels = {k: t("src_fig_" + k) for k in ("measured", "predicted", "y", "breakeven")}
    groups = [t("src_prompt_" + k) if "src_prompt_" + k in strings() else k for k in prompts]
    measured = [
        [(r.speedup.median, r.speedup.low, r.speedup.high) for r in comp.rows_for(k, temp)]
        for k in prompts
    ]
    predicted = [[r.predicted_speedup for r in comp.rows_for(k, temp)] for k in prompts]
    fig = sources_figure(
        [source_label(n) for n in names],
        groups,
        measured,
        predicted,
        labels,
        t("src_fig_title", temp=temp_label(temp)),
    )
    st.plotly_chart(fig, width="stretch", key=f"{prefix}_src_fig")
    st.caption(t("src_forwards_note"))
    st.caption(t("src_predict_note"))
