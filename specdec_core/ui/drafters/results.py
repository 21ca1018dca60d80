"""The drafters page's results: each source's speed-up, acceptance rate and mean
accepted length, the table beside the target alone, the time split per token (Plotly),
the token strips (which model made each token), and the table of the drafters this app
does not run. Drawing only; every number comes from ``specdec_core.bench.compare``."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from specdec_core.bench.compare import DrafterResult
from specdec_core.core.models import ModelPair
from specdec_core.ui.drafters.cards import RunKey
from specdec_core.ui.drafters.cards import label as source_label
from specdec_core.ui.figures.drafters import drafter_time_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.render import STYLES, StripItem, token_strip_html
from specdec_core.ui.words import DRAFTERS_STRIP

OTHER_ROWS = ("eagle", "mtp", "block", "random")  # Medusa-style heads and a PARD block run above
OTHER_COLS = ("method", "how", "needs", "note")
#: Cards per row: all seven sources in one row left each ≈ 45 px at 1024 px, its label and
#: numbers broken letter by letter; four keep a metric's value whole on a projector.
PER_ROW = 4


def section(pair: ModelPair, key: RunKey) -> bool:
    """The last run's results (a note when the inputs changed since); returns whether
    there are any."""
    stored = st.session_state.get("dr_results")
    if stored is None:
        st.info(t("dr_no_results"))
        return False
    run_key, found = stored
    if run_key != key:
        st.info(t("dr_stale"))
    used = run_key[1]
    base = found[0].baseline
    labels = [source_label(pair, r.name, r.knob) for r in found]
    st.subheader(t("dr_results", tokens=used.max_new_tokens))  # the budget, visible
    st.caption(
        t(
            "dr_run_info",
            gamma=used.gamma,
            temp=used.temperature,
            seed=used.seed,
            tokens=used.max_new_tokens,
            device=pair.device_label(),
            tps=base.tokens_per_s,
            ms=base.ms_per_token,
        )
    )

    capped = [f"{label} γ = {r.gamma}" for r, label in zip(found, labels, strict=True)]
    capped = [c for c, r in zip(capped, found, strict=True) if r.gamma and r.gamma < used.gamma]
    if capped:  # a source that proposes fewer (MTP heads: K) ran with its own maximum
        st.caption(t("src_capped", caps=", ".join(capped)))

    _metrics(found, labels)
    _table(pair, found, labels, used.sampling.greedy)
    _time_figure(found, labels)
    _strips(found, labels)
    return True


def card_columns(n: int) -> list:
    """``n`` columns of one width in rows of at most :data:`PER_ROW` (a short last row
    keeps the width, leaving its end empty); below 640 px Streamlit stacks them."""
    per = min(n, PER_ROW)
    return [col for start in range(0, n, per) for col in st.columns(per)[: n - start]]


def _metrics(found: list[DrafterResult], labels: list[str]) -> None:
    """One bordered card per source: speed-up, α, mean accepted length."""
    for col, r, label in zip(card_columns(len(found)), found, labels, strict=True):
        with col.container(border=True):
            st.markdown(f"**{html.escape(label)}**")
            st.metric(t("dr_metric_speedup"), f"{r.speedup:.2f}×", help=t("dr_metric_speedup_help"))
            st.metric(
                t("dr_metric_alpha"), f"{r.acceptance_rate:.2f}", help=t("dr_metric_alpha_help")
            )
            st.metric(t("dr_metric_mean"), f"{r.mean_accepted:.2f}", help=t("dr_metric_mean_help"))


def _table(pair: ModelPair, found: list[DrafterResult], labels: list[str], greedy: bool) -> None:
    """The table of every source beside the target alone (its first row)."""
    base = found[0].baseline

    def _row(label: str, r: DrafterResult | None) -> dict:
        if r is None:  # the target alone: one token per forward, nothing drafted
            return {
                "drafter": label,
                "alpha": "—",
                "mean": "—",
                "rounds": f"{base.new_tokens}",
                "empty": "—",
                "draft_ms": "—",
                "verify_ms": f"{base.ms_per_token:.2f}",
                "tps": f"{base.tokens_per_s:.0f}",
                "speedup": "1.00×",
                "same": t("yes"),
            }
        return {
            "drafter": label,
            "alpha": f"{r.acceptance_rate:.2f}",
            "mean": f"{r.mean_accepted:.2f}",
            "rounds": f"{r.rounds}",
            "empty": f"{r.empty_rounds}",
            "draft_ms": f"{r.draft_ms_per_round:.2f}",
            "verify_ms": f"{r.verify_ms_per_round:.2f}",
            "tps": f"{r.tokens_per_s:.0f}",
            "speedup": f"{r.speedup:.2f}×",
            "same": t("yes" if r.same_as_target else "no"),
        }

    table = pd.DataFrame(
        [_row(t("dr_label_target"), None)]
        + [_row(label, r) for label, r in zip(labels, found, strict=True)]
    )
    column_config = {
        col: st.column_config.TextColumn(
            t("dr_col_" + col),
            help=None if col == "drafter" else t(f"dr_col_{col}_help"),
            alignment="left" if col == "drafter" else "right",
        )
        for col in table.columns
    }
    st.dataframe(table, hide_index=True, width="stretch", column_config=column_config)
    st.caption(t("dr_greedy_note") if greedy else t("dr_sampled_note"))
    st.caption(t("dr_timing_note", device=pair.device_label()))


def _time_figure(found: list[DrafterResult], labels: list[str]) -> None:
    """Milliseconds per token: drafting, verifying, the rest (the target alone first)."""
    base = found[0].baseline
    fig_labels = {
        "draft": t("dr_fig_draft"),
        "verify": t("dr_fig_verify"),
        "other": t("dr_fig_other"),
        "ms": t("dr_fig_ms"),
    }
    fig = drafter_time_figure(
        [t("dr_label_target")] + labels,
        [0.0] + [r.draft_ms_per_token for r in found],
        [base.ms_per_token] + [r.verify_ms_per_token for r in found],
        [0.0] + [r.overhead_ms_per_token for r in found],
        fig_labels,
        t("dr_fig_title"),
    )
    st.plotly_chart(fig, width="stretch", key="dr_time_fig")


def _strips(found: list[DrafterResult], labels: list[str]) -> None:
    """Each source's token strip (which model made each token), discarded drafts on ask."""
    st.subheader(t("dr_strips"))
    show_discarded = st.toggle(t("dr_show_discarded"), key="dr_show_discarded")
    legend = "".join(
        f'<span style="{STYLES[s]}padding:1px 6px;margin-right:6px;border-radius:4px;'
        f'font-size:12px;display:inline-block">{html.escape(t(key))}</span>'
        for s, key in DRAFTERS_STRIP.items()
    )
    st.html(f'<div style="margin-bottom:4px">{legend}</div>')
    edited_note = html.escape(t("legend_edited"))
    for col, r, label in zip(card_columns(len(found)), found, labels, strict=True):
        with col.container(border=True):
            st.markdown(f"**{html.escape(label)}**")
            st.caption(
                t(
                    "dr_strip_caption",
                    accepted=r.accepted,
                    drafted=r.drafted,
                    rounds=r.rounds,
                    empty=r.empty_rounds,
                )
            )
            items = [
                StripItem(m.token, m.state)
                for m in r.strip
                if show_discarded or m.state != "discarded"
            ]
            st.html(token_strip_html(items, []).replace(edited_note, ""))


def other_drafters() -> None:
    """The drafters this app does not run, as a Markdown table."""
    st.subheader(t("dr_other_title"))
    st.markdown(t("dr_other_intro"))
    header = "| " + " | ".join(t("dr_oth_col_" + c) for c in OTHER_COLS) + " |"
    rule = "|" + "---|" * len(OTHER_COLS)

    def cell(r: str, c: str) -> str:
        # each cell names its column for a phone, where the table is stacked (app.py's
        # CSS: one card per row, the header hidden, these labels shown)
        if c == "method":
            return f"**{t(f'dr_oth_{r}_{c}')}**"
        label = html.escape(t("dr_oth_col_" + c))
        return f'<span class="sd-col">{label}: </span>' + t(f"dr_oth_{r}_{c}")

    rows = ["| " + " | ".join(cell(r, c) for c in OTHER_COLS) + " |" for r in OTHER_ROWS]
    with st.container(key="dr_other"):
        st.markdown("\n".join([header, rule, *rows]), unsafe_allow_html=True)
