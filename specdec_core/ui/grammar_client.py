"""Who is compiling a grammar: the hook the per-client compile budget asks
(:data:`specdec_core.core.grammar_compile.CLIENT_OF`), so the engine never imports
Streamlit. The client is the running session's address, as the measurement queue names it
(:func:`specdec_core.ui.speed.queue.client_of`: the websocket's peer, or nginx's
``X-Real-IP`` behind a trusted proxy); outside a script run there is none (no budget).
Also whether that session is still connected (:data:`grammar_compile.ALIVE_OF`)."""

from __future__ import annotations

from collections.abc import Callable

from streamlit.runtime.scriptrunner import get_script_run_ctx

from specdec_core.core import grammar_compile
from specdec_core.ui.speed.queue import client_of, session_alive


def running_client() -> str | None:
    """The client of the script run on this thread, or ``None`` outside one."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else client_of(ctx.session_id)


def running_alive() -> Callable[[], bool] | None:
    """For the script run on this thread: a check that its session is still connected (a
    closed tab stops a compile only it waited for), or ``None`` outside one."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return None
    session_id = ctx.session_id
    return lambda: session_alive(session_id)


def install() -> None:
    """Install :func:`running_client` as the compile budget's hook (idempotent) and, in a
    real server, start the compile process now rather than in the first student's bound."""
    grammar_compile.CLIENT_OF = running_client
    grammar_compile.ALIVE_OF = running_alive
    from streamlit.runtime import Runtime

    if Runtime.exists():
        grammar_compile.prestart()
