"""Models are loaded once per process and shared read-only by every browser session and
by the measurement worker (``server/worker.py``), which holds its own registry in its own
process.

The loaded pairs live in a process-level registry behind a lock, not in
``st.cache_resource``: any websocket client can send a "clear cache" message that empties
Streamlit's caches for everyone, and the next visitor would load a second copy while open
sessions keep the first. A cache clear cannot reach this registry.

The registry holds at most ``SPECDEC_MAX_PAIRS`` pairs (default 2), and the sidebar offers
only the presets it can hold and load without a network: the shipped pair plus presets whose
weights are already in the local Hugging Face cache (checked once per process).

torch's CPU threads are set once, before the first load (:func:`torch_threads`): from
``SPECDEC_TORCH_THREADS`` when set, else one thread on a machine with at most
:data:`SMALL_MACHINE_CORES` cores (two threads spin there: the scenario search took 10.7 s
at torch's default two threads and 0.65 s at one), else torch's default. The setting is
process-wide, so no page ever changes it afterwards.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable
from functools import cache

from specdec_core.core.errors import ModelLoadError
from specdec_core.core.models import PRESETS, ModelPair, is_preset_cached, load_pair

CAPACITY_ENV = "SPECDEC_MAX_PAIRS"
THREADS_ENV = "SPECDEC_TORCH_THREADS"
DEFAULT_CAPACITY = 2
SMALL_MACHINE_CORES = 2  # at most this many cores: one torch thread unless the env says

_lock = threading.Lock()
_pairs: dict[str, ModelPair] = {}
#: Called (no arguments) after each load, under the lock: the Streamlit side hooks its
#: housekeeping here (``ui/loader.py``), so the registry itself never imports Streamlit.
on_first_load: list[Callable[[], None]] = []
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
    ones in preset order (the shipped pairs first), at most :func:`capacity` in all
    (``embedded`` always)."""
    names = [n for n in PRESETS if n == "embedded" or n in _pairs or _available(n)]
    return names[: capacity()]


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def torch_threads() -> int | None:
    """The torch CPU threads this server uses: ``SPECDEC_TORCH_THREADS`` when it is a
    positive whole number, else 1 on a machine with ≤ :data:`SMALL_MACHINE_CORES` cores,
    else ``None`` (torch's default)."""
    threads = os.environ.get(THREADS_ENV, "").strip()
    if threads.isdigit() and int(threads) > 0:
        return int(threads)
    return 1 if cores() <= SMALL_MACHINE_CORES else None


@cache
def _set_threads_once() -> None:
    threads = torch_threads()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


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
            for hook in on_first_load:
                hook()
        return _pairs[name]


def loaded_pairs() -> list[str]:
    return list(_pairs)


def clear() -> None:
    """Forget every loaded pair (tests only: sessions may still hold them)."""
    with _lock:
        _pairs.clear()
        _available.cache_clear()
