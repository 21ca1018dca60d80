"""The Lesson panel's files: the trace of the lesson on screen as JSON (replayable) or as
a CSV of its checks, the tree's trace JSON, and opening a trace file (replayed when it was
made on the loaded pair and replays to the same rounds, else shown read-only). Parsing,
export and replay live in ``lessons/`` (``tracefile``, ``replay``); this module draws."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from specdec_core.core.errors import SpecDecError
from specdec_core.engine.session import Session
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import replay, timeless_json
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
from specdec_core.ui.i18n import t
from specdec_core.ui.render import round_strip, token_strip_html
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links

UPLOAD_KEY = "trace_upload"
VIEW_KEY = "trace_view"
TAB_KEY = "lt_tab"  # the Lesson panel's tab to show after a click replays the lesson
#: Trace files one tab may open per minute (each is parsed and may be replayed).
MAX_UPLOADS_PER_MIN = 6
_UPLOAD_TIMES = "lt_upload_times"
#: Rounds of a read-only trace drawn at once (newest first); older ones page by page.
ROUNDS_PER_PAGE = 20


def with_view(state: LessonState) -> LessonState:
    """``state`` in this browser's language and presenter mode."""
    S = st.session_state
    return replace(state, lang=S.get("lang", "en"), presenter=bool(S.get("presenter", False)))


@L.one_at_a_time
def _uploaded() -> None:
    """Upload callback: parse once; replay when the pair matches and the replay gives the
    file's rounds, else keep the file for a read-only view. Bounded per tab: at most
    :data:`MAX_UPLOADS_PER_MIN` files a minute, the raw bytes leave the upload store once
    parsed (only the parsed trace stays), the replay is capped (``replay``)."""
    S = st.session_state
    file = S.get(UPLOAD_KEY)
    if file is not None and not isinstance(file, UploadedFile):
        return  # a file already read (its bytes left the store): nothing new to parse
    S[TAB_KEY] = "files"  # the replay below remounts the tabs: stay on this one
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
            links.request(with_view(trace.state))
            S["step_notice"] = t("lt_import_replayed", n=len(trace.rounds))
            return
    S[VIEW_KEY] = trace
    S["step_notice"] = t("lt_import_readonly", pair=plain(trace.pair), n=len(trace.rounds))


def _download(box, label: str, data: Callable[[], str], file_name: str, **kw: Any) -> None:
    """A download button whose file is made only when clicked (``data`` is called then);
    the click does not rerun the page. ``file_name``'s ending sets the MIME type."""
    mime = "text/csv" if file_name.endswith(".csv") else "application/json"
    box.download_button(label, data=data, file_name=file_name, mime=mime, on_click="ignore", **kw)


def chain_files(session: Session) -> None:
    """The chain's files tab: download JSON and CSV, open a trace file."""
    state = links.current_state("step_through")
    c1, c2 = st.columns(2)
    json_file = partial(export_json, session, state)
    _download(c1, t("lt_download_json"), json_file, "specdec-trace.json", width="stretch")
    csv_file = partial(export_csv, session)
    csv_help = t("lt_download_csv_help")
    _download(
        c2, t("lt_download_csv"), csv_file, "specdec-checks.csv", width="stretch", help=csv_help
    )
    st.file_uploader(
        t("lt_upload", mb=MAX_TRACE_BYTES // 1_000_000),
        type=["json"],
        key=UPLOAD_KEY,
        on_change=_uploaded,
    )
    view: TraceFile | None = st.session_state.get(VIEW_KEY)
    if view is not None:
        show_trace(view)


def tree_files(session: Session) -> None:
    """The tree's export tab: the tree trace JSON."""
    state = links.current_state("step_through")
    tree_file = partial(export_tree_json, session, state)
    label = t("lt_download_tree_json")
    _download(st, label, tree_file, "specdec-tree-trace.json", key="btn_tree_json")


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
