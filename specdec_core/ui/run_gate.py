"""One script run at a time per browser (``room_limits.RUNS``), hooked into Streamlit.

Why: 40 tabs of one browser polling a live class ran 40 script threads at once, and a
classmate's click got ~1/40 of the GIL. Each browser (its address and browser cookie,
:func:`browser_key`) takes a turn for the whole of a run: at the start of its script
thread (:func:`install_run_gate`), before its widget callbacks (a step click's model
forwards), around ``app.py``'s body (:func:`one_run_per_browser`) and a fragment's rerun
(:func:`fragment`). Relies on the pinned Streamlit 1.67's private
``ScriptRunner._run_script`` and ``SafeSessionState.on_script_will_rerun`` (each wrapped
once per process); another version may move them (the tests check the wrap takes).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from specdec_core.server.room_limits import RUNS
from specdec_core.ui.i18n import t

#: A script thread waits this long for its browser's turn before Streamlit's own per-run
#: work; a run still waiting then waits on before its callbacks, or in its page, and says
#: so (a toast).
RUN_NOTICE_S = 1.0
#: The secret of a session that sent no browser cookie: a real browser always sends
#: Streamlit's XSRF cookie, so only crafted clients share their address's one key.
NO_COOKIE = "nocookie"
_gate_lock = threading.Lock()
_owed = threading.local()  # .toast: this thread's run waited before its callbacks


def _key(client: str, secret: str) -> str:
    return hashlib.sha256(f"{client}|{secret}".encode()).hexdigest()[:16]


def browser_key() -> str:
    """This session's browser for :data:`~specdec_core.server.room_limits.RUNS`: its address
    and browser cookie (:func:`specdec_core.ui.live.identity.jar_secret`; the same cookie
    from another address is another key, so a leaked cookie slows only its own tabs). A
    class behind one address is as many keys as browsers; the clients of an address that
    send no cookie are one key (:data:`NO_COOKIE`)."""
    from specdec_core.ui.live.identity import client, cookies, jar_secret

    return _key(client(), jar_secret(cookies()) or NO_COOKIE)


def thread_browser_key(session_id: str) -> str:
    """:func:`browser_key` before a run has a script context: from the session's websocket
    handshake (Streamlit's ``SessionClient.client_context``); a session with no handshake
    (no server) is a key of its own."""
    from streamlit import runtime

    from specdec_core.server.jobs import client_key
    from specdec_core.ui.live.identity import jar_secret

    own = f"session:{session_id}"
    try:
        session = runtime.get_instance().get_client(session_id) if runtime.exists() else None
        context = getattr(session, "client_context", None)
        if context is None:
            return _key(own, own)
        who = client_key(context.remote_ip, dict(context.headers or ()), session_id)
        return _key(who, jar_secret(dict(context.cookies or {})) or NO_COOKIE)
    except Exception:  # noqa: BLE001 - a run never fails for its key: a session of its own
        return _key(own, own)


def install_run_gate() -> bool:
    """Every script run of this process takes its browser's turn first thing in its thread
    (``ScriptRunner._run_script``: before Streamlit's own per-run work, which 40 tabs' fresh
    threads did at once), and a run still waiting then waits on before its widget callbacks
    (``SafeSessionState.on_script_will_rerun``: they run before the script body), silently:
    a toast there could stop the run before its click's callback, which would be lost (and
    a tab's first run knows no language yet); :func:`one_run_per_browser` says so after.
    Wrapped once; returns ``True``."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.runtime.state.safe_session_state import SafeSessionState

    runner = script_runner.ScriptRunner
    with _gate_lock:
        if not getattr(runner, "_specdec_gated", False):
            run_script = runner._run_script
            will_rerun = SafeSessionState.on_script_will_rerun

            def gated(self, rerun_data) -> None:
                _owed.toast = False
                RUNS.enter(thread_browser_key(self._session_id), RUN_NOTICE_S)
                try:
                    run_script(self, rerun_data)
                finally:
                    RUNS.exit()

            def gated_callbacks(self, *args, **kwargs) -> None:
                if RUNS.wait_pending():  # the turn, held until the run's end
                    _owed.toast = True
                will_rerun(self, *args, **kwargs)

            runner._run_script, runner._specdec_gated = gated, True
            SafeSessionState.on_script_will_rerun = gated_callbacks
    return True


def _notice() -> None:
    st.toast(t("runs_waiting_tabs"), icon=":material/hourglass_top:")


@contextmanager
def one_run_per_browser() -> Iterator[None]:
    """Around a script run (``app.py``'s body, :func:`fragment`'s): waits without the GIL
    while another run of this browser is in flight (``room_limits.Runs``); inside a run
    :func:`install_run_gate` let in, it passes at once, or waits on and says so (or says
    that the run waited before its callbacks)."""
    RUNS.acquire(browser_key(), RUN_NOTICE_S, _notice)
    try:
        if getattr(_owed, "toast", False):
            _owed.toast = False
            _notice()
        yield
    finally:
        RUNS.release()


def fragment(func: Callable | None = None, *, run_every: float | None = None):
    """``st.fragment`` whose reruns take their browser's turn (:func:`one_run_per_browser`);
    drawn inside a full run it runs at once (the run holds the turn)."""
    if func is None:
        return lambda f: fragment(f, run_every=run_every)

    @functools.wraps(func)
    def bounded(*args, **kwargs):
        with one_run_per_browser():
            return func(*args, **kwargs)

    return st.fragment(bounded, run_every=run_every)
