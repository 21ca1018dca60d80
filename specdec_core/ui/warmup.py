"""Warm a fresh server in the background: the pair the app opens on is loaded (with its
first forwards, ``server/pairs._warmed``) and its lesson scenarios searched, once per
process, so a teacher who opens the Lesson panel finds them ready instead of a search.

Streamlit has no start-up hook: ``app.py`` calls :func:`start` on every run, and the first
run of the process (the first visitor, or ``deploy/warm_up.py``'s session) starts the
thread; later calls do nothing. The first page loads the same pair under the registry's
lock, so the two never load it twice; the search waits until that first run has finished
(:func:`first_run_done`, at most :data:`FIRST_RUN_WAIT_S`) and its page has reached the
browser (:data:`SETTLE_S`), so it does not slow the first visitor's page. Only inside a
running server (an ``AppTest`` has a mock runtime) and unless ``SPECDEC_WARM_UP=0``. When
done it logs one line on stderr:

    specdec-warm pair=embedded threads=1 load_s=0.9 scenarios=7 search_s=0.7
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from specdec_core.core.models import default_pair_name
from specdec_core.server.pairs import offered_pairs
from specdec_core.ui.loader import get_pair
from specdec_core.ui.step.links import search_scenarios

WARM_ENV = "SPECDEC_WARM_UP"
FIRST_RUN_WAIT_S = 30.0  # the search starts after the first run of app.py, or after this
SETTLE_S = 2.0  # and this long after it: the server still sends that page to the browser
log = logging.getLogger("specdec.warmup")
_lock = threading.Lock()
_thread: threading.Thread | None = None
_first_run = threading.Event()
done: dict[str, float] = {}  # the finished warm-up's figures (tests, benchmarks)


def in_server() -> bool:
    """Whether this process is a running Streamlit server (not an ``AppTest``, whose
    runtime is a mock, and not a plain script)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.exists() and type(Runtime.instance()) is Runtime
    except Exception:  # noqa: BLE001 - Streamlit internals: then not a server
        return False


def opening_pair() -> str:
    """The preset the sidebar opens on (``gpt2`` when cached and offered, else the shipped
    ``embedded`` pair), as ``ui/sidebar.render_sidebar`` chooses it."""
    name, _ = default_pair_name()
    return name if name in offered_pairs() else "embedded"


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
    """Load the opening pair, then (after the first run of ``app.py``) search its
    scenarios; log the figures. A failure is logged and leaves the server as it was (the
    first visitor who asks then does the work)."""
    import torch

    try:
        started = time.perf_counter()
        name = opening_pair()
        pair = get_pair(name)
        loaded = time.perf_counter()
        if _first_run.wait(FIRST_RUN_WAIT_S):
            time.sleep(SETTLE_S)
        searching = time.perf_counter()
        found = search_scenarios(pair)
        searched = time.perf_counter()
    except Exception:  # noqa: BLE001 - a warm-up never breaks the server
        log.exception("warm-up failed")
        return
    done.update(
        load_s=loaded - started,
        search_s=searched - searching,
        scenarios=float(sum(f.state is not None for f in found)),
        threads=float(torch.get_num_threads()),
    )
    print(
        f"specdec-warm pair={name} threads={torch.get_num_threads()} "
        f"load_s={done['load_s']:.1f} scenarios={int(done['scenarios'])} "
        f"search_s={done['search_s']:.1f}",
        file=sys.stderr,
        flush=True,
    )
