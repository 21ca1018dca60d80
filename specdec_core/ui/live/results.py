"""The class's results for its teacher (and co-teacher): per question the answers per
choice, the first vote and the revote, the share right, as a CSV download (no names).
In the dashboard while the class runs; after "End the class", a box on the page keeps the
download until the room expires (the store keeps the results until then, SQLite and Redis
alike: :meth:`~specdec_core.server.rooms_peer.PeerInstruction.results`).

The CSV is built from the store at most once per room version (:data:`BUILT`), so clicks
and polls cost no store reads beyond the changes; the texts are in the reader's language
(:func:`~specdec_core.ui.live.questions.question_text`, the choices as the chart shows
them), cells a spreadsheet would run as a formula escaped
(:func:`~specdec_core.server.room_results.csv_text`).

Widget keys: ``live_results_csv`` — download button "Results (CSV)" / "结果（CSV）";
``live_after`` — the box after the end; ``live_after_dismiss`` — its "Dismiss" button.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.server.room_results import QuestionResult, csv_text
from specdec_core.server.room_types import RoomError
from specdec_core.ui.i18n import t
from specdec_core.ui.live import room
from specdec_core.ui.live.questions import question_text, shown_choices

BUILT = "live_results_built"  # (code, version, language, csv text) last built


def table(results: list[QuestionResult]) -> str:
    """``results`` as the CSV text (the header and texts in the reader's language)."""
    header = t("live_csv_header").split("|")
    texts = [question_text(r.question.kind, r.question.params) for r in results]
    labels = [shown_choices(r.question.kind, r.question.choices) for r in results]
    return csv_text(results, header, texts, labels)


def _csv(code: str, key: str, version: int) -> str | None:
    """The CSV of room ``code`` at ``version`` (``-1``: ended), built once per version
    and language; ``None`` when the store refuses (the room expired)."""
    S = st.session_state
    built = S.get(BUILT)
    stamp = (code, version, t("live_csv_header"))
    if built is not None and built[:3] == stamp:
        return built[3]
    try:
        results = room.store().results(code, key)
    except RoomError:
        return None
    text = table(results) if results else ""
    S[BUILT] = (*stamp, text)
    return text


def download(code: str, key: str, version: int) -> None:
    """The download button of the results (nothing before the first question)."""
    text = _csv(code, key, version)
    if not text:
        return
    st.download_button(
        t("live_results"),
        data=text.encode("utf-8-sig"),  # a BOM: spreadsheets read the Chinese as UTF-8
        file_name=f"class-{code}-results.csv",
        mime="text/csv",
        key="live_results_csv",
        on_click="ignore",
        help=t("live_results_help"),
        icon=":material/download:",
    )


def _dismiss() -> None:
    st.session_state.pop(room.ENDED_ROOM, None)
    st.session_state.pop(BUILT, None)


def after_class() -> None:
    """After the teacher ended the class: one box with the results' download (until the
    room expires), and "Dismiss"."""
    ended = st.session_state.get(room.ENDED_ROOM)
    if ended is None:
        return
    code, key = ended
    text = _csv(code, key, -1)
    if text is None:  # expired, or the store was reset
        _dismiss()
        return
    with st.container(border=True, key="live_after"):
        line = "live_results_ended" if text else "live_results_none"
        st.markdown(t(line, code=code))
        row = st.container(horizontal=True, gap="small")
        with row:
            download(code, key, -1)
            st.button(t("live_results_dismiss"), key="live_after_dismiss", on_click=_dismiss)
