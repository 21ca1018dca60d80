"""A follower's screen of the teacher's step: the frame (:mod:`~specdec_core.ui.live.frames`)
drawn with the step page's own renderers -- the token strip, the chart of the position the
teacher's chart shows, the checks table and the KV-state table for a chain; the strip and
the drafted nodes for a tree -- in the follower's own language. No engine, no replay: every
number is the teacher's, read from the frame; every text is escaped by the renderers.
Under block verification the checks table has the step page's block columns (``p′``,
``h``, token-wise's decision, ``★``); a recurrent drafter's counter names its state.
"""

from __future__ import annotations

import html as html_lib
import re
from types import SimpleNamespace

import streamlit as st

from specdec_core.core.numfmt import fmt_prob, fmt_sig
from specdec_core.core.words import STRIP_WORDS, StripState
from specdec_core.lessons.link import decode
from specdec_core.rules.acceptance import BlockDecision
from specdec_core.server.pairs import offered_pairs
from specdec_core.server.room_types import RoomView
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.step import HEIGHT as CHART_HEIGHT
from specdec_core.ui.figures.step import distribution_option
from specdec_core.ui.i18n import t
from specdec_core.ui.live.frame_cache import dist_from_json, kv_from_json, untok
from specdec_core.ui.render import StripItem, html_table, kv_table_html, token_strip_html
from specdec_core.ui.step import view
from specdec_core.ui.step.block_checks import residual_labels, residual_top
from specdec_core.ui.step.strip_checks import check_columns, check_notes
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import NODE_STATE, say, step_where

AT = "live_at"  # (code, version, round, phase, carried, pair) of the teacher's step state
TREE_LEGEND: list[StripState] = ["prompt", "committed", "accepted", "correction", "bonus"]


def strip_items(frame: dict) -> list[StripItem]:
    """The frame's token strip as the step page's :class:`StripItem` list."""
    return [StripItem(untok(x[:3]), x[3], bool(x[4])) for x in frame["strip"]]


def checks(frame: dict) -> tuple:
    """The frame's checks, with the attributes ``check_columns`` reads."""
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


def checks_html(frame: dict, presenter: bool = False) -> str:
    """The checks table with the notes the teacher's page gives it (†, near-ties)."""
    rows = checks(frame)
    table = check_columns(rows, bool(frame.get("greedy")), block_of(frame))
    return "".join([html_table(table, name="checks-table"), *check_notes(rows, presenter)])


def block_of(frame: dict) -> BlockDecision | None:
    """The frame's block-verification decision (``None``: a token-wise round), so the
    checks table adds the step page's ``p′``, ``h`` and token-wise columns."""
    raw = frame.get("block")
    if not isinstance(raw, dict):
        return None
    return BlockDecision(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


def kv_counts(raw: dict) -> list[tuple[str, object]]:
    """The KV counters' (name, value): the draft's is its recurrent state's length for a
    recurrent drafter (as the step page says), "—" for a drafter with no cache."""
    state = kv_from_json(raw)
    draft = t("kv_draft_state_len" if raw.get("recurrent") else "kv_draft_len")
    return [
        (t("kv_committed_len"), state.committed_len),
        (t("kv_target_len"), state.target_kv_len),
        (draft, state.draft_kv_len if raw.get("own", True) else "—"),
    ]


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
        if frame.get("checks"):
            st.html(checks_html(frame, presenter))
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
    dist, keep = dist_from_json(chart["dist"]), ()
    weight = chart.get("residual_weight")  # block verification's resampled position
    if isinstance(weight, (int, float)) and not isinstance(weight, bool) and 0 <= weight <= 1:
        labels, keep = residual_labels(labels, float(weight)), residual_top(dist)
    if chart["kind"] == "bonus":
        labels["correction"] = t("legend_bonus")
        title = t(titles["bonus"], i=int(chart["pos"]))
    else:
        title = t(titles[chart["kind"]], i=int(chart["pos"]), tok=token_in_sentence(tok, "text"))
    option = distribution_option(
        dist,
        labels,
        title,
        marked_id=chart["marked"],
        correction_id=chart["correction"],
        keep_ids=keep,
    )
    st.echarts_chart(option, height=CHART_HEIGHT, key="live_dist_chart")


def _kv(frame: dict) -> None:
    raw = frame.get("kv")
    if not raw:
        return
    st.subheader(t("st_kv"))
    state = kv_from_json(raw)
    st.markdown(" · ".join(f"{name} **{n}**" for name, n in kv_counts(raw)))
    keep = raw.get("keep")
    st.html(kv_table_html(state, int(keep) if isinstance(keep, int) else None))


def _nodes(frame: dict) -> None:
    nodes = frame.get("nodes") or []
    if not nodes:
        return
    st.html(_nodes_html(frame))


# ------------------------------------------------------------------ pushed HTML
def where_line(frame: dict) -> str:
    """ "Following the teacher — round r: … done — next: …" of the frame, as HTML (bold kept)."""
    mode = "tree" if frame.get("shape") == "tree" else "chain"
    where = step_where(int(frame["round"]), str(frame.get("phase")), frame.get("carried"), mode)
    text = html_lib.escape(t("live_following", where=where))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def frame_html(frame: dict) -> str:
    """The frame as one HTML fragment in the current language (``i18n.in_language``): the
    status line, the strip, the chart position's rows, the checks and the KV table, drawn
    by the step page's renderers (every text escaped); pushed to followers' screens."""
    part = [f'<p class="live-where">{where_line(frame)}</p>']
    part.append(f"<h4>{html_lib.escape(t('st_strip'))}</h4>")
    legend = TREE_LEGEND if frame["shape"] == "tree" else list(STRIP_WORDS)
    part.append(token_strip_html(strip_items(frame), legend))
    if frame["shape"] == "tree":
        return "".join(part) + _nodes_html(frame)
    chart = frame.get("chart")
    if chart:
        dist = dist_from_json(chart["dist"])
        pos, tok = int(chart["pos"]), untok(chart["tok"])
        title = (
            t("fig_title_bonus", i=pos)
            if chart["kind"] == "bonus"
            else t(
                "fig_title_draft" if chart["kind"] == "draft" else "fig_title_pos",
                i=pos,
                tok=token_in_sentence(tok, "text"),
            )
        )
        columns = {t("col_token"): [visible_token(x) for x in dist.tokens]}
        for key, values in (("p", dist.p), ("q", dist.q), ("min", dist.min_pq)):
            if values is not None:
                columns[view._labels()[key]] = [fmt_prob(float(v)) for v in values]
        part.append(f"<h4>{html_lib.escape(title)}</h4>")
        part.append(html_table(columns, name="chart-rows"))
    if frame.get("checks"):
        part.append(checks_html(frame))
    raw = frame.get("kv")
    if raw:
        state = kv_from_json(raw)
        line = " · ".join(f"{html_lib.escape(name)} <b>{n}</b>" for name, n in kv_counts(raw))
        keep = raw.get("keep")
        part.append(f"<h4>{html_lib.escape(t('st_kv'))}</h4><p>{line}</p>")
        part.append(kv_table_html(state, int(keep) if isinstance(keep, int) else None))
    return "".join(part)


def _nodes_html(frame: dict) -> str:
    nodes = frame.get("nodes") or []
    if not nodes:
        return ""
    columns = {
        t("tree_node"): list(range(len(nodes))),
        t("col_token"): [visible_token(untok(n[:3])) for n in nodes],
        t("tree_depth_col"): [int(n[4]) for n in nodes],
        "q": [fmt_sig(n[6]) for n in nodes],
        "p": [fmt_sig(n[7]) for n in nodes],
        t("col_state"): [say(NODE_STATE, n[5]) if n[5] in NODE_STATE else "?" for n in nodes],
    }
    return f"<h4>{html_lib.escape(t('tree_fig_heading'))}</h4>" + html_table(
        columns, name="tree-nodes"
    )


def teacher_at(view: RoomView) -> str:
    """Where the teacher is, in words (:func:`step_where`) or "Lessons, chapter 3"."""
    if view.page == "lessons":
        raw = str(view.state.get("chapter", "1"))
        n = int(raw) if raw.isdigit() and len(raw) < 3 else 1
        return t("live_at_lessons", n=n)
    if not view.state:
        return t("live_at_start")
    return step_where(*_decoded(view)[2:5], mode=_decoded(view)[6])


def _decoded(view: RoomView) -> tuple:
    """(code, version, round, phase, carried, pair, mode) of the room's step state, decoded
    once per version, not on every poll."""
    cached = st.session_state.get(AT)
    if cached is None or cached[:2] != (view.code, view.version):
        state, _ = decode(view.state, offered_pairs())
        mode = "tree" if state.tree else "chain"
        cached = (
            view.code,
            view.version,
            state.round,
            state.phase,
            len(state.cont),
            state.pair,
            mode,
        )
        st.session_state[AT] = cached
    return cached


def adopt_pair(view: RoomView) -> None:
    """A follower shown the teacher's frame takes the class's pair (the teacher's, loaded
    here before the sidebar is drawn), so the sidebar names and describes the pair on
    screen, never its own first choice; ``app.py``'s run before the sidebar."""
    if view.page == "lessons" or not view.state:
        return
    S, name = st.session_state, _decoded(view)[5]
    if (S.get("pair_name"), S.get("pair_reason")) != (name, "live_class"):
        S["pair_name"], S["pair_reason"] = name, "live_class"
