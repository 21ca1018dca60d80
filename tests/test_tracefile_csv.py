"""The checks CSV includes the round that is verified but not committed yet, marked
``round_committed = False``; the column names the round, not the draft (a rejected row
of a committed round says ``True`` there and ``rejected`` in ``status``)."""

from __future__ import annotations

import csv
import io

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.tracefile import CSV_COLUMNS, export_csv


def test_the_verified_but_uncommitted_round_is_in_the_csv(tiny_pair):
    config = SessionConfig(gamma=3, temperature=1.0, seed=2, max_new_tokens=20)
    session = SpeculativeSession(tiny_pair, "ROMEO:", config)
    session.run(max_rounds=2)
    session.propose()
    before = list(csv.DictReader(io.StringIO(export_csv(session))))
    assert {r["round"] for r in before} == {"1", "2"}  # drafted, not verified: no checks
    verify = session.verify()
    rows = list(csv.DictReader(io.StringIO(export_csv(session))))
    assert list(rows[0]) == list(CSV_COLUMNS)
    pending = [r for r in rows if r["round"] == "3"]
    assert len(pending) == len(verify.checks) > 0
    assert [r["status"] for r in pending] == [c.status for c in verify.checks]
    assert [float(r["p"]) for r in pending] == [c.p for c in verify.checks]
    assert {r["round_committed"] for r in pending} == {"False"}
    assert {r["round_committed"] for r in rows if r["round"] != "3"} == {"True"}
    session.commit()
    after = list(csv.DictReader(io.StringIO(export_csv(session))))
    assert [r["round_committed"] for r in after] == ["True"] * len(after)
    assert len(after) == len(rows)


def test_the_commit_column_names_the_round_not_the_draft(tiny_pair):
    config = SessionConfig(gamma=4, temperature=1.0, seed=0, max_new_tokens=40)
    session = SpeculativeSession(tiny_pair, "ROMEO:", config)
    session.run(max_rounds=6)
    rows = list(csv.DictReader(io.StringIO(export_csv(session))))
    assert "committed" not in rows[0] and "round_committed" in rows[0]
    rejected = [r for r in rows if r["status"] == "rejected"]
    assert rejected  # the tiny random pair rejects often at T = 1
    assert {r["round_committed"] for r in rejected} == {"True"}
