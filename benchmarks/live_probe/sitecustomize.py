"""Counts the live-class store's operations inside each app replica (benchmark only).

``benchmarks/live_class.py`` puts this folder first on the replicas' ``PYTHONPATH`` with
``SPECDEC_STORE_COUNTS`` = a folder; Python imports ``sitecustomize`` at start-up, and this
one wraps ``specdec_core.server.room_store.make_store`` as soon as that module is imported: the
store it returns is wrapped in :class:`Counting`, which counts every call of a public
method (by name) and, every half second, writes the counts as JSON to
``$SPECDEC_STORE_COUNTS/<pid>.json``. Without ``SPECDEC_STORE_COUNTS`` nothing is touched.
The app's code is not changed; only the benchmark's replicas see this file.
"""

from __future__ import annotations

import functools
import importlib.abc
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

TARGET = "specdec_core.server.room_store"
OUT = os.environ.get("SPECDEC_STORE_COUNTS")
COUNTS: Counter = Counter()
_lock = threading.Lock()


class Counting:
    """A store whose public method calls are counted in :data:`COUNTS` (``store.<name>``)."""

    def __init__(self, store) -> None:
        object.__setattr__(self, "_store", store)

    def __getattr__(self, name: str):
        value = getattr(self._store, name)
        if name.startswith("_") or not callable(value):
            return value

        @functools.wraps(value)
        def counted(*args, **kwargs):
            with _lock:
                COUNTS[name] += 1
            return value(*args, **kwargs)

        return counted


def _dump_forever() -> None:
    path = Path(OUT) / f"{os.getpid()}.json"
    while True:
        time.sleep(0.5)
        with _lock:
            data = dict(COUNTS)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"t": time.time(), "counts": data}))
        tmp.replace(path)


def _patch(module) -> None:
    make = getattr(module, "make_store", None)
    if make is None or getattr(make, "_counted", False):
        return

    @functools.wraps(make)
    def make_store(*args, **kwargs):
        return Counting(make(*args, **kwargs))

    make_store._counted = True
    module.make_store = make_store
    threading.Thread(target=_dump_forever, name="store-counts", daemon=True).start()


class _Hook(importlib.abc.MetaPathFinder):
    """Finds :data:`TARGET` through the other finders and patches it once executed."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    _patch(module)

                spec.loader.exec_module = exec_module
                return spec
        return None


if OUT:
    Path(OUT).mkdir(parents=True, exist_ok=True)
    sys.meta_path.insert(0, _Hook())
