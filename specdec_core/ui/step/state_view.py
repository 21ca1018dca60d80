"""The step page's state table, beside the KV table, for a drafter with a recurrent state
(``core/checkpoints.py``; the ``recurrent`` drafter): one row per checkpoint of its state —
saved by this round's proposal, kept, restored after a rejection, discarded — and a line on
what the state has read. Drawing only; every number comes from the session's
:class:`~specdec_core.core.trace.KVState`."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.checkpoints import CheckpointStatus, StateView
from specdec_core.core.trace import KVState
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.session import Session
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.render import KV_ROW_COLORS, html_table

STATUS_COLORS: dict[CheckpointStatus, str] = {
    "saved": KV_ROW_COLORS["tentative"],
    "kept": "",
    "restored": KV_ROW_COLORS["accepted"],
    "discarded": KV_ROW_COLORS["discarded"],
}


def _read_ids(session: Session, last: RoundTrace | None) -> list[int]:
    """The ids the drafter may have read: the committed ids, then the drafts of the round
    in flight (or of the last round, whose discarded checkpoints read its rejected
    drafts)."""
    if session.phase in ("verify", "commit") or last is None:
        return session.ids + list(session.steps.drafts)
    before = last.commit.kv_before.committed_len
    return session.ids[:before] + list(last.record.drafted)


def state_columns(view: StateView, ids: list[int], token: Callable[[int], str]) -> dict:
    """The table's columns: the position of the last token a checkpoint read (0-based,
    as in the KV table: ``m − 1`` for the state after ``m`` tokens; "—" for the zero
    state), that token (``ids[m − 1]``) and the checkpoint's status."""
    rows = view.rows()
    return {
        t("st_state_col_after"): [m - 1 if m else "—" for m, _ in rows],
        t("col_token"): [token(ids[m - 1]) if 0 < m <= len(ids) else "—" for m, _ in rows],
        t("st_state_col_status"): [t(f"st_state_{s}") for _, s in rows],
    }


def section(
    session: Session,
    state: KVState,
    last: RoundTrace | None,
    heading: Callable[[str], None],
) -> None:
    """The state table (nothing for a drafter without a recurrent state)."""
    view = state.draft_state
    if view is None:
        return
    heading(t("st_state"))
    ids = _read_ids(session, last)
    columns = state_columns(view, ids, lambda i: visible_token(session.token(i)))
    colors = [STATUS_COLORS[s] for _, s in view.rows()]
    st.html(html_table(columns, colors, "state-table"))
    st.caption(t("st_state_line", n=view.length, r=view.recomputed))
    st.caption(t("st_state_help"))
