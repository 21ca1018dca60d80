"""Warm a fresh server in the background: the pairs the app opens on (an English screen's
and a Chinese screen's, :func:`opening_pairs`) are loaded (with their first forwards,
``server/pairs._warmed``) and their lesson scenarios searched, once per process, so a
visitor finds the pair of their language loaded and a teacher who opens the Lesson panel
finds the scenarios ready instead of a search.

``app.py``'s ``st.App`` lifespan (``ui/live/push_server.warm_up``) calls :func:`start` a
second after the server starts, so the health check answers at once and the English
screen's pair loads before anyone visits; ``app.py`` also calls it on every run (a
server without the lifespan), and later calls do nothing. A page that needs a pair the
thread is loading waits on the registry's lock, so a pair is never loaded twice. Only the
English screen's pair is loaded at once; the rest waits until the first run of
``app.py`` has finished (:func:`first_run_done`, at most :data:`FIRST_RUN_WAIT_S`) and its
page has reached the browser (:data:`SETTLE_S`; the Chinese screen's pair
:data:`LATER_S`), so it does not slow the first visitor's page (loading and searching the
Chinese pair beside it took that page from ≈ 3 to ≈ 6 s at load 10-13).
Only inside a running server (an ``AppTest`` has a mock runtime) and unless
``SPECDEC_WARM_UP=0``. It logs one line on stderr per pair, the English screen's first:

    specdec-warm pair=embedded threads=1 load_s=0.9 scenarios=7 search_s=0.7
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from specdec_core.core.models import default_pair_name
from specdec_core.server.pairs import capacity, offered_pairs
from specdec_core.ui.loader import get_pair
from specdec_core.ui.step.links import search_scenarios

WARM_ENV = "SPECDEC_WARM_UP"
FIRST_RUN_WAIT_S = 30.0  # the search starts after the first run of app.py, or after this
SETTLE_S = 2.0  # and this long after it: the server still sends that page to the browser
#: the other pairs (the Chinese screen's) this long after the first run: their search
#: (≈ 3 s on one idle core) beside the first visitor's page made it ≈ 6 s instead of ≈ 3
LATER_S = 15.0
log = logging.getLogger("specdec.warmup")
_lock = threading.Lock()
_thread: threading.Thread | None = None
_first_run = threading.Event()
done: dict[str, dict[str, float]] = {}  # pair → its warm-up's figures (tests, benchmarks)


def in_server() -> bool:
    """Whether this process is a running Streamlit server (not an ``AppTest``, whose
    runtime is a mock, and not a plain script)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.exists() and type(Runtime.instance()) is Runtime
    except Exception:  # noqa: BLE001 - Streamlit internals: then not a server
        return False


def opening_pairs() -> list[str]:
    """The presets the sidebar opens on for an English screen, then a Chinese one
    (``embedded-zh`` when shipped; else ``gpt2`` when cached and offered, else the shipped
    ``embedded`` pair), as ``ui/sidebar.render_sidebar`` chooses them; each once, at most
    as many as the registry holds."""
    offered, names = offered_pairs(), []
    for lang in ("en", "zh"):
        name, _ = default_pair_name(lang)
        name = name if name in offered else "embedded"
        if name not in names:
            names.append(name)
    return names[: capacity()]


def start() -> bool:
    """Start the warm-up thread (a daemon) if this process has none yet; returns whether
    this call started it."""
    global _thread
    if _thread is not None or os.environ.get(WARM_ENV, "1").strip() == "0" or not in_server():
        return False
    with _lock:
        if _thread is not None:
            return False
        _thread = threading.Thread(target=_warm, name="specdec-warm-up", daemon=True)
        _thread.start()
    return True


def first_run_done() -> None:
    """Called at the end of every run of ``app.py``: the first one lets the search start."""
    _first_run.set()


def _warm() -> None:
    """Load the English screen's pair at once; after the first run of ``app.py``, search
    its scenarios, then load the Chinese screen's pair and search its scenarios; log each
    pair's figures. A failure is logged and stops the warm-up, leaving the server as it
    was (the first visitor who asks then does the work)."""
    import torch

    try:
        names = opening_pairs()
        for i, name in enumerate(names):
            if i == 1:  # the Chinese screen's pair, once the first page has settled
                time.sleep(LATER_S)
            started = time.perf_counter()
            pair = get_pair(name)
            load_s = time.perf_counter() - started
            if i == 0 and _first_run.wait(FIRST_RUN_WAIT_S):
                time.sleep(SETTLE_S)
            searching = time.perf_counter()
            found = search_scenarios(pair)
            figures = {
                "load_s": load_s,
                "search_s": time.perf_counter() - searching,
                "scenarios": float(sum(f.state is not None for f in found)),
                "threads": float(torch.get_num_threads()),
            }
            done[name] = figures
            print(
                f"specdec-warm pair={name} threads={torch.get_num_threads()} "
                f"load_s={figures['load_s']:.1f} scenarios={int(figures['scenarios'])} "
                f"search_s={figures['search_s']:.1f}",
                file=sys.stderr,
                flush=True,
            )
    except Exception:  # noqa: BLE001 - a warm-up never breaks the server
        log.exception("warm-up failed")
