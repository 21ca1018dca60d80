"""The step-through page's lesson tools: one-click scenarios, the lesson link with its QR
code, trace export / import, and step back (undo). Logic lives in the engine
(``lessons/``: ``link``, ``replay``, ``scenarios``, ``tracefile``) and in
:mod:`specdec_core.ui.step.links`; this
module draws the controls."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any

import pandas as pd
import segno
import streamlit as st

from specdec_core.core.errors import SpecDecError
from specdec_core.core.models import ModelPair
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import (
    MAX_REPLAY_FORWARDS,
    replay,
    replay_forwards,
    step_back,
    timeless_json,
)
from specdec_core.lessons.scenarios import SCENARIOS
from specdec_core.lessons.tracefile import (
    MAX_TRACE_BYTES,
    TraceFile,
    export_csv,
    export_json,
    export_tree_json,
    parse,
)
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.guards import forget_upload
from specdec_core.ui.i18n import lang, t
from specdec_core.ui.render import round_strip, token_strip_html
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links

UPLOAD_KEY = "trace_upload"
VIEW_KEY = "trace_view"
OPEN_KEY = "lt_open"  # the Lesson panel is open (lazy expander state)
TAB_KEY = "lt_tab"  # the panel's tab to show after a click replays the lesson
LiveTab = Callable[[str], None]  # draws the "Live class" tab for the page ``where``
#: Trace files one tab may open per minute (each is parsed and may be replayed).
MAX_UPLOADS_PER_MIN = 6
_UPLOAD_TIMES = "lt_upload_times"
#: Rounds of a read-only trace drawn at once (newest first); older ones page by page.
ROUNDS_PER_PAGE = 20


def _with_view(state: LessonState) -> LessonState:
    """``state`` in this browser's language and presenter mode."""
    S = st.session_state
    return replace(state, lang=S.get("lang", "en"), presenter=bool(S.get("presenter", False)))


def _step_back() -> None:
    L.own_action()
    state = step_back(links.current_state("step_through"))
    if state is not None:
        links.request(state)
        st.session_state["step_notice"] = t("lt_stepped_back")


def step_back_button(container, session: SpeculativeSession | TreeSession) -> None:
    """ "↶ Step back": the lesson one phase or edit earlier (replayed; a tree lesson one
    phase earlier)."""
    at_start = session.phase == "propose" and not session.history
    # step back replays from the start: off where that replay would pass the cap
    earlier = None if at_start else step_back(links.current_state("step_through"))
    capped = earlier is not None and replay_forwards(earlier) > MAX_REPLAY_FORWARDS
    why = t("lt_step_back_capped", forwards=MAX_REPLAY_FORWARDS) if capped else None
    container.button(
        t("lt_step_back"),
        on_click=_step_back,
        disabled=at_start or capped,
        help=why or t("lt_step_back_help"),
        key="btn_step_back",
    )


def _open_scenario(state: LessonState) -> None:
    links.request(_with_view(state))
    st.session_state[TAB_KEY] = "scenarios"
    st.session_state.pop(VIEW_KEY, None)


def _want_scenarios() -> None:
    st.session_state["sc_wanted"] = True


def _scenarios(pair: ModelPair) -> None:
    if not links.scenarios_ready(pair) and not st.session_state.get("sc_wanted"):
        st.caption(t("sc_intro"))
        st.button(t("sc_find"), on_click=_want_scenarios, key="btn_sc_find")
        return
    found = {f.key: f.state for f in links.scenarios(pair)}
    keys = [k for k in SCENARIOS if found.get(k) is not None]
    missing = [k for k in SCENARIOS if found.get(k) is None]
    if not keys:
        st.info(t("sc_none"))
        return
    # the translated titles are the options themselves (no format_func) and there is one
    # widget per language: Streamlit matches a radio's value by its label
    titles = {t(f"sc_{k}_title"): k for k in keys}
    key = titles[st.radio(t("sc_pick"), list(titles), key=f"sc_choice_{lang()}")]
    st.markdown(t(f"sc_{key}_text"))
    state = _with_view(found[key])
    st.button(t("sc_open"), on_click=_open_scenario, args=(state,), type="primary")
    st.caption(t("sc_link"))
    st.code(links.link_for(state), language=None, wrap_lines=True)
    if missing:
        st.caption(t("sc_missing", names=", ".join(t(f"sc_{k}_title") for k in missing)))


def _link() -> None:
    state = links.current_state("step_through")
    url = links.link_for(state)
    st.caption(t("lt_link_help"))
    st.code(url, language=None, wrap_lines=True)
    if links.is_local_url(url):  # a projected QR code of localhost opens nothing on a phone
        st.warning(t("lt_link_local"))
    uri, version = _qr(url)
    # an <img> with a data URI: inline, no /media file (which lives on one replica only)
    st.html(f'<img src="{uri}" alt="QR code" style="background:#fff">')
    st.caption(t("lt_link_len", n=len(url), version=version))


@lru_cache(maxsize=256)
def _qr(url: str) -> tuple[str, int]:
    """The QR code of ``url`` as an SVG data URI and its version (≈ 55 ms to build, so
    built once per link, not on every click)."""
    qr = segno.make(url, error="m")
    return qr.svg_data_uri(scale=5, border=2), qr.version


@L.one_at_a_time
def _uploaded() -> None:
    """Upload callback: parse once; replay when the pair matches and the replay gives the
    file's rounds, else keep the file for a read-only view. Bounded per tab: at most
    :data:`MAX_UPLOADS_PER_MIN` files a minute, the raw bytes leave the upload store once
    parsed (only the parsed trace stays), the replay is capped (``replay``)."""
    S = st.session_state
    S[TAB_KEY] = "files"  # the replay below remounts the tabs: stay on this one
    file = S.get(UPLOAD_KEY)
    if file is None:
        S.pop(VIEW_KEY, None)
        return
    now = time.monotonic()
    recent = [t0 for t0 in S.get(_UPLOAD_TIMES, []) if now - t0 < 60.0]
    if len(recent) >= MAX_UPLOADS_PER_MIN:
        forget_upload(file)
        S["step_notice"] = t("lt_upload_too_many", n=len(recent), limit=MAX_UPLOADS_PER_MIN)
        return
    S[_UPLOAD_TIMES] = [*recent, now]
    S.pop(VIEW_KEY, None)
    try:
        data = file.getvalue()
        forget_upload(file)
        trace = parse(data)
    except SpecDecError as exc:
        S["step_error"] = error_message(exc)
        return
    except Exception as exc:  # noqa: BLE001 - an upload never breaks the page
        S["step_error"] = error_message(exc)
        return
    del data
    pair = S.get("pair")
    if trace.state is not None and pair is not None and trace.pair == pair.name:
        out = replay(pair, trace.state)
        same = out.session is not None and (
            timeless_json(out.session.history) == timeless_json(trace.rounds)
        )
        if same and not out.problems:
            links.request(_with_view(trace.state))
            S["step_notice"] = t("lt_import_replayed", n=len(trace.rounds))
            return
    S[VIEW_KEY] = trace
    S["step_notice"] = t("lt_import_readonly", pair=plain(trace.pair), n=len(trace.rounds))


def _download(box, label: str, data: Callable[[], str], file_name: str, **kw: Any) -> None:
    """A download button whose file is made only when clicked (``data`` is called then);
    the click does not rerun the page. ``file_name``'s ending sets the MIME type."""
    mime = "text/csv" if file_name.endswith(".csv") else "application/json"
    box.download_button(label, data=data, file_name=file_name, mime=mime, on_click="ignore", **kw)


def _files(session: SpeculativeSession) -> None:
    state = links.current_state("step_through")
    c1, c2 = st.columns(2)
    json_file = partial(export_json, session, state)
    _download(c1, t("lt_download_json"), json_file, "specdec-trace.json", width="stretch")
    csv_file = partial(export_csv, session)
    _download(c2, t("lt_download_csv"), csv_file, "specdec-checks.csv", width="stretch")
    st.file_uploader(
        t("lt_upload", mb=MAX_TRACE_BYTES // 1_000_000),
        type=["json"],
        key=UPLOAD_KEY,
        on_change=_uploaded,
    )
    view: TraceFile | None = st.session_state.get(VIEW_KEY)
    if view is not None:
        show_trace(view)


def show_trace(trace: TraceFile) -> None:
    """A trace file read-only: each round's strip and checks, :data:`ROUNDS_PER_PAGE`
    rounds at a time, newest first (a 515-round file drew every round on every click:
    550–650 ms and 1.4 MB a click). Text from the file is escaped."""
    st.caption(t("lt_readonly", pair=plain(trace.pair), n=len(trace.rounds)))
    n = len(trace.rounds)
    pages = max(1, -(-n // ROUNDS_PER_PAGE))
    page = 0
    if pages > 1:
        labels = [
            f"{max(1, n - (k + 1) * ROUNDS_PER_PAGE + 1)}–{n - k * ROUNDS_PER_PAGE}"
            for k in range(pages)
        ]
        if st.session_state.get("lt_trace_page") not in labels:
            st.session_state["lt_trace_page"] = labels[0]
        page = labels.index(
            st.selectbox(
                t("lt_rounds_page"), labels, key="lt_trace_page", help=t("lt_older_rounds")
            )
        )
    shown = trace.rounds[max(0, n - (page + 1) * ROUNDS_PER_PAGE) : n - page * ROUNDS_PER_PAGE]
    if pages > 1:
        st.caption(
            t(
                "lt_rounds_shown",
                first=shown[-1].round_index + 1,
                last=shown[0].round_index + 1,
                n=n,
            )
        )
    for r in reversed(shown):
        st.markdown(
            t("lt_round", r=r.round_index + 1, n=r.record.accepted, g=len(r.record.drafted))
        )
        st.html(token_strip_html(round_strip(r.verify, r.record), []))
        if r.verify.checks:
            st.dataframe(
                pd.DataFrame(
                    {
                        "#": [c.position for c in r.verify.checks],
                        t("token"): [c.token.text for c in r.verify.checks],
                        "p(y)": [c.p for c in r.verify.checks],
                        "q(y)": [c.q for c in r.verify.checks],
                        t("col_status"): [c.status for c in r.verify.checks],
                    }
                ),
                hide_index=True,
            )


def render_lesson_tools(
    pair: ModelPair, session: SpeculativeSession, live_tab: LiveTab | None = None
) -> None:
    """The "Lesson: scenarios, link, files" expander. Drawn only while it is open (a lazy
    expander: opening it reruns the step panel): closed, a step click builds no link, QR
    code or download; open, the link follows every step. ``live_tab(where)`` draws the
    "Live class" tab (the step page passes ``ui/live/teacher.start_button``); no tab
    without it."""
    box = st.expander(
        t("lt_title"), expanded=False, icon=":material/school:", key=OPEN_KEY, on_change="rerun"
    )
    if not box.open:
        return
    with box:
        # the tab a click of this panel belongs to stays selected when the click replays
        # the lesson (a full rerun remounts the tabs: an upload jumped back to Scenarios)
        names = {
            "scenarios": t("lt_tab_scenarios"),
            "link": t("lt_tab_link"),
            "files": t("lt_tab_files"),
        }
        live = live_tab
        if live is not None:
            names["live"] = t("live_tab")
        tabs = st.tabs(
            list(names.values()), default=names[st.session_state.get(TAB_KEY, "scenarios")]
        )
        with tabs[0]:
            _scenarios(pair)
        with tabs[1]:
            _link()
        with tabs[2]:
            _files(session)
        if live is not None:
            with tabs[3]:
                live("step")


def render_tree_lesson_tools(session: TreeSession, live_tab: LiveTab | None = None) -> None:
    """Tree mode's Lesson panel (a lazy expander, like the chain's): the lesson link of
    this tree moment with its QR code, and the tree trace JSON. Scenarios, the checks CSV
    and opening a trace file are the chain's; the panel says so."""
    box = st.expander(
        t("lt_title_tree"),
        expanded=False,
        icon=":material/school:",
        key=OPEN_KEY,
        on_change="rerun",
    )
    if not box.open:
        return
    with box:
        st.caption(t("lt_tree_chain_only"))
        live = live_tab
        tabs = st.tabs([t("lt_tab_link"), t("lt_tab_export")] + ([t("live_tab")] if live else []))
        with tabs[0]:
            _link()
        with tabs[1]:
            state = links.current_state("step_through")
            tree_file = partial(export_tree_json, session, state)
            label = t("lt_download_tree_json")
            _download(st, label, tree_file, "specdec-tree-trace.json", key="btn_tree_json")
        if live is not None:
            with tabs[2]:
                live("step")
