"""How long the housekeeping thread's full garbage collection holds the GIL:
``ui/loader.sweep`` runs ``gc.collect()`` every 30 s so a closed tab's state comes
back; ``runner.postScriptGC = false`` was set because a full collection after every script
run took ≈ 230 ms with torch loaded. After ``gc.freeze()`` (done once the pair is loaded)
a collection walks only what sessions allocated since.

    python benchmarks/gc_pause.py [--sessions 10]

Prints the pause of one full collection: torch + transformers + the pair loaded, with and
without the freeze, with ``--sessions`` live sessions' worth of objects (each a step-through
session after 5 rounds and a parsed 1 MB read-only trace). Bounded: a few seconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # specdec_core


def pause_ms(repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    from probe_attacks import PROMPT, long_trace

    from specdec_core.core.models import load_pair
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.session import SpeculativeSession
    from specdec_core.lessons.tracefile import parse

    pair = load_pair("embedded")
    data, _ = long_trace(limit=1_000_000)
    out = {"unfrozen_no_sessions_ms": pause_ms()}
    gc.freeze()  # what ui/loader.get_pair does once the pair is loaded
    out["frozen_no_sessions_ms"] = pause_ms()
    held = []
    for _ in range(args.sessions):
        session = SpeculativeSession(pair, PROMPT, SessionConfig(gamma=4, max_new_tokens=80))
        for _ in range(5):
            session.run_round()
        held.append((session, parse(data)))
    out[f"frozen_{args.sessions}_sessions_ms"] = pause_ms()
    gc.unfreeze()
    out[f"unfrozen_{args.sessions}_sessions_ms"] = pause_ms()
    print(json.dumps({k: round(v, 1) for k, v in out.items()}))


if __name__ == "__main__":
    main()
