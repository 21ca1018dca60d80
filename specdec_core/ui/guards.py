"""Bounded work per request: checks a page runs on what a client sent *before* any work.

A crafted websocket client can send any widget value, so pages never trust one: text is
bounded by characters before it is tokenized (and tokenized once per change, not once per
rerun), a data editor's stored edit state is checked (row count, indices, finite numbers)
before Streamlit applies it, and numbers are converted inside the error handling. Every
prompt box says its limit under it (:func:`prompt_limit_note`). Per client: a session's
uploads and a tab's full runs (paced; a browser's script runs: :mod:`specdec_core.ui.run_gate`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specdec_core.core.errors import InputError, PromptError
from specdec_core.core.inputs import MAX_PROMPT_CHARS, SHORT_CHARS, encode_prompt
from specdec_core.core.models import ModelPair
from specdec_core.server.room_limits import RUNS
from specdec_core.ui.i18n import t

#: ``max_chars`` of every prompt box (the engine refuses longer text before tokenizing).
PROMPT_CHARS = MAX_PROMPT_CHARS
_CACHE = "_guard_tokens"


def prompt_limit_note() -> str:
    """The caption under every prompt box: its :data:`PROMPT_CHARS` limit (Streamlit drops
    a change past ``max_chars`` in the browser, so the app never sees a longer paste)."""
    return t("prompt_limit", n=f"{PROMPT_CHARS:,}")


def prompt_ids(pair: ModelPair, prompt: str, slot: str) -> list[int]:
    """``encode_prompt`` once per (pair, text) change for the widget ``slot`` (the result,
    or the error, is kept in session state until the text changes). A prompt box holding
    only whitespace is empty here (the engine takes it: ``"\n"`` is one token; a person
    who cleared the box with spaces meant no prompt).

    Raises:
        PromptError: ``prompt_empty`` for blank text; else as
            :func:`specdec_core.core.inputs.encode_prompt` (the length in characters is
            checked before tokenizing).
    """
    if isinstance(prompt, str) and prompt and not prompt.strip():
        raise PromptError("the prompt is empty: type some text to continue", "prompt_empty")
    cache = st.session_state.setdefault(_CACHE, {})
    key = (pair.name, pair.vocab_size, prompt)
    hit = cache.get(slot)
    if hit is None or hit[0] != key:
        try:
            hit = (key, encode_prompt(pair, prompt), None)
        except InputError as exc:
            hit = (key, None, exc)
        cache[slot] = hit
    if hit[2] is not None:
        raise hit[2]
    return list(hit[1])


def _finite_or_empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and abs(value) <= 1e12


def _short_text(value: object) -> bool:
    return isinstance(value, str) and len(value) <= SHORT_CHARS


def table_state_ok(state: object, n_rows: int, columns: Mapping[str, str]) -> bool:
    """Whether a data editor's stored edit state only edits existing cells with sane
    values: no added or deleted rows, row indices in ``0..n_rows-1``, only ``columns``
    (name → ``"text"`` or ``"number"``), text ≤ :data:`SHORT_CHARS`, numbers finite and
    ≤ 1e12. Cheap: looks at no more than ``n_rows`` edited rows."""
    if state is None:
        return True
    try:
        added, deleted = state.get("added_rows") or [], state.get("deleted_rows") or []
        edited = state.get("edited_rows") or {}
        if added or deleted or not isinstance(edited, Mapping) or len(edited) > n_rows:
            return False
        for index, row in edited.items():
            if isinstance(index, bool) or not 0 <= int(index) < n_rows:
                return False
            if not isinstance(row, Mapping) or not set(row) <= set(columns):
                return False
            for column, value in row.items():
                text = columns[column] == "text"
                if text and value is not None and not _short_text(value):
                    return False
                if not text and not _finite_or_empty(value):
                    return False
    except (AttributeError, TypeError, ValueError, OverflowError):
        return False
    return True


# ------------------------------------------------------------------ uploaded files
#: Files one browser session may hold in Streamlit's upload store (the newest are kept).
#: Streamlit keeps every file a client PUTs to its own session until that session shuts
#: down, whether a widget asks for it or not: 40 × 5.2 MB uploads were all kept (+200 MB).
MAX_SESSION_UPLOADS = 2
_upload_cap_lock = threading.Lock()


def _upload_store():
    """Streamlit's uploaded-file manager of the running server, or ``None`` (a test)."""
    from streamlit.runtime import Runtime

    return Runtime.instance().uploaded_file_mgr if Runtime.exists() else None


def install_upload_cap(store=None) -> bool:
    """Make the upload store keep at most :data:`MAX_SESSION_UPLOADS` files per session
    (the oldest is dropped when another arrives), once per process. Returns whether the
    cap is in place. Works on Streamlit 1.67's ``MemoryUploadedFileManager`` (its
    ``file_storage``: session id → {file id: record}, in arrival order)."""
    store = _upload_store() if store is None else store
    if store is None or not hasattr(store, "file_storage"):
        return False
    with _upload_cap_lock:
        if getattr(store, "_specdec_capped", False):
            return True
        add_file = store.add_file

        def capped_add_file(session_id: str, file) -> None:
            add_file(session_id, file)
            held = list(store.file_storage.get(session_id, {}))
            for file_id in held[:-MAX_SESSION_UPLOADS]:
                store.remove_file(session_id, file_id)

        store.add_file = capped_add_file
        store._specdec_capped = True
    return True


def forget_upload(file: object) -> None:
    """Drop an uploaded file's bytes from the upload store once they were read (from the
    next run on the widget's value is a ``DeletedFile`` with no bytes, and its change
    callback fires once more: callers skip it; the page keeps what it parsed)."""
    ctx = get_script_run_ctx()
    store = getattr(ctx, "uploaded_file_mgr", None)
    file_id = getattr(file, "file_id", None)
    if store is not None and file_id:
        store.remove_file(ctx.session_id, file_id)


def drop_closed_sessions_uploads(store=None) -> int:
    """Remove the uploaded files of every session that has no open tab (closed, or
    waiting to reconnect): Streamlit frees them only when such a session is shut down,
    which an expired disconnected session never is. Returns the bytes dropped."""
    from streamlit.runtime import Runtime

    store = _upload_store() if store is None else store
    if store is None or not Runtime.exists() or not hasattr(store, "file_storage"):
        return 0
    runtime, dropped = Runtime.instance(), 0
    for session_id in list(store.file_storage):
        if not runtime.is_active_session(session_id):
            files = store.file_storage.get(session_id, {})
            dropped += sum(len(f.data) for f in list(files.values()))
            store.remove_session_files(session_id)
    return dropped


# ------------------------------------------------------------------ full-run pacing
#: Full runs of the app a tab may start: a burst of :data:`FULL_RUN_BURST`, then
#: :data:`FULL_RUNS_PER_S` a second (a token bucket per browser session). A student who
#: changes a setting, switches page or clicks never waits; a client that sends full
#: reruns as fast as the server answers (10 a second cost a classmate 2× p95) is slowed to
#: this rate. The wait sleeps without the GIL; a step click is a fragment rerun and does
#: not count.
FULL_RUNS_PER_S = 4.0
FULL_RUN_BURST = 8.0
_BUCKET = "_full_run_bucket"


def pace_full_run(now: float | None = None, state: dict | None = None) -> float:
    """Take one token from this tab's bucket, sleeping until one is there; returns the
    seconds slept (0 for a run within the burst). ``now`` (``time.monotonic()`` seconds)
    and ``state`` (default: ``st.session_state``) are for tests."""
    state = st.session_state if state is None else state
    clock = time.monotonic() if now is None else now
    tokens, last = state.get(_BUCKET, (FULL_RUN_BURST, clock))
    tokens = min(FULL_RUN_BURST, tokens + (clock - last) * FULL_RUNS_PER_S)
    wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / FULL_RUNS_PER_S
    if wait > 0 and now is None:
        RUNS.sleep(wait)  # the browser's other tabs may run meanwhile
    state[_BUCKET] = (tokens + wait * FULL_RUNS_PER_S - 1.0, clock + wait)
    return wait
