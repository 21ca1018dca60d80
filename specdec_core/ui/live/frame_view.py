"""A follower's screen of the teacher's step: the frame (:mod:`~specdec_core.ui.live.frames`)
drawn with the step page's own renderers -- the token strip, the chart of the position the
teacher's chart shows, the checks table and the KV-state table for a chain; the strip and
the drafted nodes for a tree -- in the follower's own language. No engine, no replay: every
number is the teacher's, read from the frame; every text is escaped by the renderers.
"""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

from specdec_core.core.numfmt import fmt_sig
from specdec_core.core.words import STRIP_WORDS, StripState
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.step import HEIGHT as CHART_HEIGHT
from specdec_core.ui.figures.step import distribution_option
from specdec_core.ui.i18n import t
from specdec_core.ui.live.frame_cache import dist_from_json, kv_from_json, untok
from specdec_core.ui.render import StripItem, html_table, kv_table_html, token_strip_html
from specdec_core.ui.step import view
from specdec_core.ui.words import NODE_STATE, say

TREE_LEGEND: list[StripState] = ["prompt", "committed", "accepted", "correction", "bonus"]


def strip_items(frame: dict) -> list[StripItem]:
    """The frame's token strip as the step page's :class:`StripItem` list."""
    return [StripItem(untok(x[:3]), x[3], bool(x[4])) for x in frame["strip"]]


def checks(frame: dict) -> tuple:
    """The frame's checks, with the attributes ``view.check_columns`` reads."""
    return tuple(
        SimpleNamespace(
            position=int(c["pos"]),
            token=untok(c["tok"]),
            target_argmax=untok(c["argmax"]),
            p=float(c["p"]),
            q=float(c["q"]),
            accept_prob=float(c["a"]),
            u=None if c["u"] is None else float(c["u"]),
            status=str(c["status"]),
            near_tie=bool(c["tie"]),
        )
        for c in frame["checks"] or ()
    )


def draw(frame: dict, presenter: bool = False) -> None:
    """The teacher's step as the frame has it (inside the follower's fragment). A frame
    that does not read back (a newer layout, a fault) draws nothing."""
    heading = st.markdown if presenter else st.subheader
    try:
        items = strip_items(frame)
        if frame["shape"] == "tree":
            heading(t("st_strip"))
            st.html(token_strip_html(items, TREE_LEGEND))
            _nodes(frame)
            return
        heading(t("st_strip"))
        st.html(token_strip_html(items, list(STRIP_WORDS)))
        _chart(frame)
        rows = checks(frame)
        if rows:
            greedy = bool(frame.get("greedy"))
            st.html(html_table(view.check_columns(rows, greedy), name="checks-table"))
        _kv(frame)
    except (KeyError, TypeError, ValueError, IndexError):
        return


def _chart(frame: dict) -> None:
    chart = frame.get("chart")
    if not chart:
        return
    st.subheader(t("st_dists"))
    tok = untok(chart["tok"])
    labels = view._labels()
    titles = {"check": "fig_title_pos", "draft": "fig_title_draft", "bonus": "fig_title_bonus"}
    if chart["kind"] == "bonus":
        labels["correction"] = t("legend_bonus")
        title = t(titles["bonus"], i=int(chart["pos"]))
    else:
        title = t(titles[chart["kind"]], i=int(chart["pos"]), tok=visible_token(tok))
    option = distribution_option(
        dist_from_json(chart["dist"]),
        labels,
        title,
        marked_id=chart["marked"],
        correction_id=chart["correction"],
    )
    st.echarts_chart(option, height=CHART_HEIGHT, key="live_dist_chart")


def _kv(frame: dict) -> None:
    raw = frame.get("kv")
    if not raw:
        return
    st.subheader(t("st_kv"))
    state = kv_from_json(raw)
    draft = state.draft_kv_len if raw.get("own", True) else "—"
    counts = [
        (t("kv_committed_len"), state.committed_len),
        (t("kv_target_len"), state.target_kv_len),
        (t("kv_draft_len"), draft),
    ]
    st.markdown(" · ".join(f"{name} **{n}**" for name, n in counts))
    keep = raw.get("keep")
    st.html(kv_table_html(state, int(keep) if isinstance(keep, int) else None))


def _nodes(frame: dict) -> None:
    nodes = frame.get("nodes") or []
    if not nodes:
        return
    st.subheader(t("tree_fig_heading"))
    columns = {
        t("tree_node"): list(range(len(nodes))),
        t("col_token"): [visible_token(untok(n[:3])) for n in nodes],
        t("tree_depth"): [int(n[4]) for n in nodes],
        "q": [fmt_sig(n[6]) for n in nodes],
        "p": [fmt_sig(n[7]) for n in nodes],
        t("col_state"): [say(NODE_STATE, n[5]) if n[5] in NODE_STATE else "?" for n in nodes],
    }
    st.html(html_table(columns, name="tree-nodes"))
