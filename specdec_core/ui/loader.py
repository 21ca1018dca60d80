"""The Streamlit side of the pair registry (:mod:`specdec_core.server.pairs`): the
housekeeping that frees what closed tabs left behind, started with the first loaded pair.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

from specdec_core.core.models import ModelPair
from specdec_core.server import pairs

# ------------------------------------------------------------------ memory of closed tabs
#: Seconds between two sweeps of the housekeeping thread.
HOUSEKEEPING_S = 30.0
_housekeeping: threading.Thread | None = None
last_sweep: dict[str, float] = {}  # the last sweep's figures (tests, benchmarks)


def sweep() -> dict[str, float]:
    """One housekeeping pass: drop the uploaded files of sessions with no open tab, reap
    disconnected sessions whose reconnect time (``server.disconnectedSessionTTL``) is
    over, then, if a session went away since the last pass (or files were dropped), one
    full garbage collection. A closed session's state is freed only by a full collection
    (it holds reference cycles), and ``runner.postScriptGC = false`` turned the one after
    every script run off; after ``gc.freeze()`` a full collection walks only what sessions
    allocated (``benchmarks/gc_pause.py``: 0 ms with no session, ≈ 150 ms with 10
    sessions each holding a parsed 1 MB trace on a loaded 2-core machine), and it runs
    only when someone left. The pause is returned (``gc_ms``; with ``SPECDEC_PROFILE``
    also logged as ``specdec-gc-ms``)."""
    from specdec_core.ui.guards import drop_closed_sessions_uploads

    dropped = drop_closed_sessions_uploads()
    _reap_expired_sessions()
    now = _session_ids()
    gone = now is None or bool(_known_sessions - now)
    _known_sessions.clear()
    _known_sessions.update(now or ())
    started = time.perf_counter()
    found = gc.collect() if gone or dropped else 0  # only when some tab's state was let go
    figures = {
        "gc_ms": (time.perf_counter() - started) * 1e3,
        "collected": float(found),
        "upload_bytes_dropped": float(dropped),
    }
    last_sweep.update(figures)
    if os.environ.get("SPECDEC_PROFILE"):
        print(
            f"specdec-gc-ms {figures['gc_ms']:.1f} collected={found} uploads_dropped={dropped}",
            file=sys.stderr,
            flush=True,
        )
    return figures


_known_sessions: set[str] = set()


def _session_ids() -> set[str] | None:
    """The ids of every session Streamlit still holds (open or waiting to reconnect),
    ``None`` outside a server."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None
        return {info.session.id for info in Runtime.instance()._session_mgr.list_sessions()}
    except Exception:  # noqa: BLE001 - Streamlit internals: then always collect
        return None


def _reap_expired_sessions() -> None:
    """Let Streamlit's store of disconnected sessions drop the expired ones now: its TTL
    cache only reaps on a write, i.e. when another tab disconnects (Streamlit 1.67
    internals, so every step is optional)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return
        storage = getattr(Runtime.instance()._session_mgr, "_session_storage", None)
        cache = getattr(storage, "_cache", None)
        if cache is not None and hasattr(cache, "expire"):
            cache.expire()
    except Exception:  # noqa: BLE001 - housekeeping never breaks the server
        pass


def _housekeeping_loop() -> None:
    while True:
        time.sleep(HOUSEKEEPING_S)
        try:
            sweep()
        except Exception:  # noqa: BLE001 - housekeeping never breaks the server
            pass


def start_housekeeping() -> None:
    """Start the housekeeping thread (once per process; a daemon): :func:`sweep` every
    :data:`HOUSEKEEPING_S` seconds, and cap the upload store (``guards``)."""
    global _housekeeping
    from specdec_core.ui.guards import install_upload_cap

    install_upload_cap()
    if _housekeeping is None:
        _housekeeping = threading.Thread(
            target=_housekeeping_loop, name="specdec-housekeeping", daemon=True
        )
        _housekeeping.start()


def get_pair(name: str) -> ModelPair:
    """:func:`specdec_core.server.pairs.get_pair`, with this process's housekeeping hooked
    to the first load (see :func:`start_housekeeping`)."""
    if start_housekeeping not in pairs.on_first_load:
        pairs.on_first_load.append(start_housekeeping)
    return pairs.get_pair(name)


def cached_pair(name: str) -> ModelPair:
    """Old name of :func:`get_pair` (tests call ``cached_pair.clear()``)."""
    return get_pair(name)


cached_pair.clear = pairs.clear  # type: ignore[attr-defined]
