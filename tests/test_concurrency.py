"""Many students at once: sessions share read-only models; caches, generators and edits
are per session. 8 threads on one pair give exactly the traces of each session alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import to_jsonable
from specdec_core.engine.chain.session import SpeculativeSession
from tests.conftest import like_the_app

TIMINGS = {"draft_ms", "verify_ms"}


def _strip_timings(obj):
    if isinstance(obj, dict):
        return {k: _strip_timings(v) for k, v in obj.items() if k not in TIMINGS}
    if isinstance(obj, list):
        return [_strip_timings(x) for x in obj]
    return obj


def drive(pair, i: int) -> list:
    """Session ``i``: its own seed, settings and edits, 6 rounds."""
    config = SessionConfig(
        gamma=1 + i % 4,
        temperature=[0.0, 0.8, 1.2][i % 3],
        seed=100 + i,
        top_k=[0, 30][i % 2],
        max_new_tokens=30,
    )
    session = SpeculativeSession(
        pair, ["KING:\nWe", "ROMEO:\nO", "First Citizen:\n"][i % 3], config
    )
    for r in range(6):
        if session.phase == "finished":
            break
        proposed = session.propose()
        if proposed.gamma and (r + i) % 2 == 0:
            session.steps.edit_draft(1 + (r % proposed.gamma), (7 * i + r) % pair.vocab_size)
        session.verify()
        session.commit()
    return _strip_timings(to_jsonable(session.history))


def test_eight_threads_equal_sessions_run_alone(embedded_pair):
    # each alone in a fresh thread, as the pool's are: torch gives a thread its CPU thread
    # count at its first parallel op (1 and 2 threads differ in low bits)
    alone = [like_the_app(drive, embedded_pair, i) for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda i: drive(embedded_pair, i), range(8)))
    assert together == alone
    assert len({str(a) for a in alone}) == 8  # the sessions really differ
