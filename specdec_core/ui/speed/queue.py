"""The speed page's handle on the server-wide measurement queue
(:data:`specdec_core.server.jobs.QUEUE`): the two things only a Streamlit server knows,
hooked into it so the queue itself never imports Streamlit.

* :func:`client_of` — the client (address) of the running script's session: the
  websocket's peer, or the ``X-Real-IP`` nginx sets when the peer is a trusted proxy
  (:func:`specdec_core.server.jobs.client_key`); a session with no script context is its
  own client.
* :func:`session_alive` — whether a session that queued a job is still connected (always
  true outside a real server, e.g. in AppTest), so a closed tab's job is cancelled.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.server.jobs import QUEUE, JobQueue, client_key


def client_of(session_id: str) -> str:
    """:func:`~specdec_core.server.jobs.client_key` of the running script's session
    (``st.context``)."""
    try:
        headers = dict(st.context.headers or {})
        return client_key(st.context.ip_address, headers, session_id)
    except Exception:  # noqa: BLE001 - no script context: the session is its own client
        return f"session:{session_id}"


def session_alive(session_id: str) -> bool:
    """Whether the browser session ``session_id`` is still connected (Streamlit's runtime;
    ``True`` where there is none)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return True
        return Runtime.instance().is_active_session(session_id)
    except Exception:  # noqa: BLE001 - no runtime: nothing to check
        return True


def queue() -> JobQueue:
    """The server-wide queue with this server's hooks installed (idempotent)."""
    QUEUE.alive, QUEUE.client_of = session_alive, client_of
    return QUEUE
