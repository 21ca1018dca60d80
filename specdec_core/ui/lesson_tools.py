"""The step-through page's lesson tools: one-click scenarios, the lesson link with its QR
code, trace export / import, and step back (undo). Logic lives in the engine
(``lesson_link``, ``replay``, ``scenarios``, ``tracefile``) and in :mod:`.links`; this
module draws the controls."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import pandas as pd
import segno
import streamlit as st

from specdec_core.errors import SpecDecError
from specdec_core.lesson_link import LessonState
from specdec_core.models import ModelPair
from specdec_core.replay import replay, step_back, timeless_json
from specdec_core.scenarios import SCENARIOS
from specdec_core.session import SpeculativeSession
from specdec_core.tracefile import MAX_TRACE_BYTES, TraceFile, export_csv, export_json, parse

from . import links
from .errors import error_message
from .i18n import lang, t
from .render import round_strip, token_strip_html

UPLOAD_KEY = "trace_upload"
VIEW_KEY = "trace_view"
OPEN_KEY = "lt_open"  # the Lesson panel is open (lazy expander state)


def _with_view(state: LessonState) -> LessonState:
    """``state`` in this browser's language and presenter mode."""
    S = st.session_state
    return replace(state, lang=S.get("lang", "en"), presenter=bool(S.get("presenter", False)))


def _step_back() -> None:
    state = step_back(links.current_state("step_through"))
    if state is not None:
        links.request(state)
        st.session_state["step_notice"] = t("lt_stepped_back")


def step_back_button(container, session: SpeculativeSession) -> None:
    """ "↶ Step back": the lesson one phase or edit earlier (replayed)."""
    at_start = session.phase == "propose" and not session.history
    container.button(t("lt_step_back"), on_click=_step_back, disabled=at_start,
                     help=t("lt_step_back_help"), key="btn_step_back")  # fmt: skip


def _open_scenario(state: LessonState) -> None:
    links.request(_with_view(state))
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


def _uploaded() -> None:
    """Upload callback: parse once; replay when the pair matches and the replay gives the
    file's rounds, else keep the file for a read-only view."""
    S = st.session_state
    file = S.get(UPLOAD_KEY)
    S.pop(VIEW_KEY, None)
    if file is None:
        return
    try:
        trace = parse(file.getvalue())
    except SpecDecError as exc:
        S["step_error"] = error_message(exc)
        return
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
    S["step_notice"] = t("lt_import_readonly", pair=trace.pair, n=len(trace.rounds))


def _files(session: SpeculativeSession) -> None:
    state = links.current_state("step_through")
    c1, c2 = st.columns(2)
    c1.download_button(t("lt_download_json"), data=lambda: export_json(session, state),
                       file_name="specdec-trace.json", mime="application/json",
                       on_click="ignore", width="stretch")  # fmt: skip
    c2.download_button(t("lt_download_csv"), data=lambda: export_csv(session),
                       file_name="specdec-checks.csv", mime="text/csv", on_click="ignore",
                       width="stretch")  # fmt: skip
    st.file_uploader(t("lt_upload", mb=MAX_TRACE_BYTES // 1_000_000), type=["json"],
                     key=UPLOAD_KEY, on_change=_uploaded)  # fmt: skip
    view: TraceFile | None = st.session_state.get(VIEW_KEY)
    if view is not None:
        show_trace(view)


def show_trace(trace: TraceFile) -> None:
    """A trace file read-only: each round's strip and checks."""
    st.caption(t("lt_readonly", pair=trace.pair, n=len(trace.rounds)))
    for r in trace.rounds:
        st.markdown(t("lt_round", r=r.round_index + 1, n=r.record.accepted,
                      g=len(r.record.drafted)))  # fmt: skip
        st.html(token_strip_html(round_strip(r.verify, r.record), []))
        if r.verify.checks:
            st.dataframe(pd.DataFrame({
                "#": [c.position for c in r.verify.checks],
                t("token"): [c.token.text for c in r.verify.checks],
                "p(y)": [c.p for c in r.verify.checks], "q(y)": [c.q for c in r.verify.checks],
                t("col_status"): [c.status for c in r.verify.checks],
            }), hide_index=True)  # fmt: skip


def render_lesson_tools(pair: ModelPair, session: SpeculativeSession) -> None:
    """The "Lesson: scenarios, link, files" expander. Drawn only while it is open (a lazy
    expander: opening it reruns the step panel): closed, a step click builds no link, QR
    code or download; open, the link follows every step."""
    box = st.expander(
        t("lt_title"), expanded=False, icon=":material/school:", key=OPEN_KEY, on_change="rerun"
    )
    if not box.open:
        return
    with box:
        tabs = st.tabs([t("lt_tab_scenarios"), t("lt_tab_link"), t("lt_tab_files")])
        with tabs[0]:
            _scenarios(pair)
        with tabs[1]:
            _link()
        with tabs[2]:
            _files(session)
