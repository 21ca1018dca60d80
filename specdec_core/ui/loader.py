"""Models are loaded once per process and shared read-only by every browser session.

The loaded pairs live in a process-level registry behind a lock, not in
``st.cache_resource``: any websocket client can send a "clear cache" message that empties
Streamlit's caches for everyone, and the next visitor would load a second copy while open
sessions keep the first. A cache clear cannot reach this registry.

The registry holds at most ``SPECDEC_MAX_PAIRS`` pairs (default 2), and the sidebar offers
only the presets it can hold and load without a network: the shipped pair plus presets whose
weights are already in the local Hugging Face cache (checked once per process).

``SPECDEC_TORCH_THREADS`` (optional) sets torch's CPU threads once, before the first load;
the setting is process-wide, so no page ever changes it afterwards.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from functools import cache

from specdec_core.core.models import PRESETS, ModelLoadError, ModelPair, is_preset_cached, load_pair

CAPACITY_ENV = "SPECDEC_MAX_PAIRS"
THREADS_ENV = "SPECDEC_TORCH_THREADS"
DEFAULT_CAPACITY = 2

_lock = threading.Lock()
_pairs: dict[str, ModelPair] = {}
load_count: dict[str, int] = {}  # loads per preset since start (tests, load checks)


def capacity() -> int:
    """How many pairs this process may hold at once (``SPECDEC_MAX_PAIRS``, ≥ 1)."""
    try:
        return max(1, int(os.environ.get(CAPACITY_ENV, DEFAULT_CAPACITY)))
    except ValueError:
        return DEFAULT_CAPACITY


@cache
def _available(name: str) -> bool:
    try:
        return is_preset_cached(name)
    except Exception:  # noqa: BLE001 - a broken local cache: just don't offer it
        return False


def offered_pairs() -> list[str]:
    """The presets the sidebar offers: loaded ones first kept, then the locally available
    ones in preset order, at most :func:`capacity` in all (``embedded`` always)."""
    names = [n for n in PRESETS if n == "embedded" or n in _pairs or _available(n)]
    return names[: capacity()]


@cache
def _set_threads_once() -> None:
    threads = os.environ.get(THREADS_ENV, "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))


def _warmed(pair: ModelPair) -> ModelPair:
    """``pair`` after one short forward of each model: torch's first call on a model is
    slow (kernel selection, allocations), so it is paid at load time (before the first
    visitor, with ``deploy/warm_up.py``), not by the first student's first click."""
    import torch

    ids = torch.zeros((1, 4), dtype=torch.long, device=pair.device)
    with torch.inference_mode():
        pair.target(input_ids=ids)
        pair.draft(input_ids=ids)
    return pair


def get_pair(name: str) -> ModelPair:
    """The loaded preset ``name`` (loaded on first use, once per process).

    Raises:
        ModelLoadError: the preset is not offered on this server (code ``not_offered``) or
        could not be loaded (the loader's own codes).
    """
    pair = _pairs.get(name)
    if pair is not None:
        return pair
    if name not in offered_pairs():
        raise ModelLoadError(f"the pair {name!r} is not offered on this server", "not_offered")
    with _lock:
        if name not in _pairs:  # another session may have loaded it while we waited
            _set_threads_once()
            _pairs[name] = _warmed(load_pair(name))
            load_count[name] = load_count.get(name, 0) + 1
            # torch, transformers, the models and every module imported so far live as long
            # as the process: gc.freeze() moves them out of the collector's reach, so a
            # full collection walks only what sessions allocated since (≈ 230 ms → < 1 ms
            # here; a full collection holds the GIL, and with it every student's server).
            gc.freeze()
            if os.environ.get("SPECDEC_PROFILE"):
                print(f"specdec-pair-load {name}", file=sys.stderr, flush=True)
            start_housekeeping()
        return _pairs[name]


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


def loaded_pairs() -> list[str]:
    return list(_pairs)


def clear() -> None:
    """Forget every loaded pair (tests only: sessions may still hold them)."""
    with _lock:
        _pairs.clear()
        _available.cache_clear()


def cached_pair(name: str) -> ModelPair:
    """Old name of :func:`get_pair` (tests call ``cached_pair.clear()``)."""
    return get_pair(name)


cached_pair.clear = clear  # type: ignore[attr-defined]
