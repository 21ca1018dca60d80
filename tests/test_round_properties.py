"""Property tests over the statistics' consistency: any prompt, seed, γ, temperature,
drafter and sequence of steps and edits drives the step machine without an exception other
than the documented ones; every trace satisfies drafted = committed drafts + rejected +
discarded + cut; statistics recomputed from the trace equal the reported ones; a failed
step leaves the session unchanged; the CLI never prints a traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdec_core.__main__ import main
from specdec_core.core.errors import SpecDecError
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import to_jsonable
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize
from specdec_core.engine.chain.session import SpeculativeSession

PROMPTS = ["First Citizen:\nWe are", "ha ha ha ha ha ha ha", "\n", "To be, or not to be, " * 3]
DRAFTERS = ["model", "greedy-draft", "ngram", "early-exit"]
STEPS = ["propose", "verify", "commit", "round", "edit", "wrong", "agree"]
SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=SLOW_OK)


def _snapshot(session: SpeculativeSession) -> str:
    """Everything a failed step must leave as it was, as JSON."""
    return json.dumps(
        to_jsonable(
            [
                session.history,
                session.ids,
                session.phase,
                session.steps.drafts,
                session.kv_state(session.steps.current_statuses()),
                session.steps.rng_state(),
            ]
        )
    )


def _check_trace(session: SpeculativeSession) -> None:
    committed = list(session.ids[: session.prompt_len])
    for r in session.history:
        rec, checks = r.record, r.verify.checks
        statuses = [c.status for c in checks]
        assert statuses == list(rec.statuses) and [c.token.id for c in checks] == list(rec.drafted)
        n = statuses.count("accepted")
        counts = [statuses.count(s) for s in ("accepted", "rejected", "discarded", "cut")]
        assert sum(counts) == len(rec.drafted) and counts[1] <= 1  # drafted = a + r + d + c
        assert statuses[:n] == ["accepted"] * n  # committed drafts come first
        appended = [t.id for t in r.commit.appended[:n]]
        assert list(rec.appended[:n]) == list(rec.drafted[:n]) == appended
        assert len(rec.appended) in (n, n + 1)  # + the correction/bonus unless a stop cut it
        assert len(r.commit.discarded) + len(r.commit.cut) == len(rec.drafted) - n
        if "cut" in statuses:
            assert rec.kind == "stopped" and "rejected" not in statuses
        committed += rec.appended
    assert committed == session.ids
    checked = [
        c.overlap
        for r in session.history
        for c in r.verify.checks
        if c.status in ("accepted", "rejected")
    ]
    s = summarize(session.records)
    assert s.acceptance_rate == pytest.approx(sum(checked) / len(checked) if checked else 0.0)
    rounds = len(session.history)
    n_committed = sum(c.status == "accepted" for r in session.history for c in r.verify.checks)
    assert s.mean_accepted == pytest.approx(n_committed / rounds if rounds else 0.0)
    assert sum(s.accepted_histogram) == rounds


@FAST
@given(data=st.data())
def test_any_sequence_of_steps_keeps_the_trace_consistent(tiny_pair, data):
    ids = st.lists(st.integers(0, 299), min_size=1, max_size=12)
    prompt = data.draw(st.one_of(st.sampled_from(PROMPTS), ids))
    drafter = data.draw(st.sampled_from(DRAFTERS))
    config = SessionConfig(
        gamma=data.draw(st.integers(1, 6)),
        temperature=data.draw(st.sampled_from([0.0, 0.7, 1.5])),
        seed=data.draw(st.integers(0, 2**31)),
        max_new_tokens=data.draw(st.integers(1, 20)),
        draft_method="greedy" if drafter == "greedy-draft" else "probabilistic",
        stop_strings=tuple(data.draw(st.sampled_from([(), ("e",), ("\n",)]))),
    )
    name = "model" if drafter == "greedy-draft" else drafter
    session = SpeculativeSession(tiny_pair, prompt, config, make_named_drafter(tiny_pair, name))
    edited = False
    for step in data.draw(st.lists(st.sampled_from(STEPS), max_size=25)):
        before = _snapshot(session)
        try:
            if step == "round":
                if session.phase == "propose":
                    session.run_round()
            elif step == "edit":
                position = data.draw(st.one_of(st.integers(-1, 8), st.just("2"), st.just(True)))
                token = data.draw(st.one_of(st.integers(-3, 305), st.just(2.0)))
                session.steps.edit_draft(position, token)
                edited = True
            elif step == "wrong":
                session.steps.make_position_wrong(data.draw(st.integers(0, 7)))
                edited = True
            elif step == "agree":
                edited |= bool(session.steps.make_draft_agree())
            else:
                getattr(session, step)()
        except SpecDecError:  # documented: the session is exactly as it was
            assert _snapshot(session) == before
        _check_trace(session)
    if not edited and session.history:  # the fast path makes the same records
        fast = generate(tiny_pair, prompt, config, drafter=make_named_drafter(tiny_pair, name))
        for a, b in zip(fast.records, session.records, strict=False):
            assert (a.drafted, a.statuses, a.appended, a.kind) == (
                b.drafted,
                b.statuses,
                b.appended,
                b.kind,
            )
            assert a.overlaps == pytest.approx(b.overlaps, abs=1e-5)


FLAG_VALUES = {
    "--gamma": ["0", "1", "3", "17", "-3", "x", "2.5"],
    "--temperature": ["0", "0.7", "1.3", "nan", "inf", "-1", "1e9", "abc"],
    "--top-k": ["0", "5", "-3", "100000", "x"],
    "--top-p": ["1", "0.9", "0", "2", "nan"],
    "--seed": ["0", "7", "-1", "99999999999999999999", "x"],
    "--max-new-tokens": ["1", "0", "5", "-2"],
    "--draft-method": ["greedy", "probabilistic", "bogus"],
    "--drafter": ["model", "ngram", "early-exit", "eagle"],
    "--edit": ["1:1=5", "0:1=5", "1:9=5", "1:1=-1", "x", "1:1=99999999", "2:2=3", "1:x=3"],
    "--mode": ["speculative", "autoregressive", "fast"],
    "--prompt": ["", "\n", "ha ha ha ha", "x" * 3000, "你好", "To be"],
}
FLAG = st.sampled_from(sorted(FLAG_VALUES)).flatmap(
    lambda flag: st.tuples(st.just(flag), st.sampled_from(FLAG_VALUES[flag]))
)
FLAGS = st.lists(FLAG, max_size=6)


@FAST
@given(flags=FLAGS)
def test_cli_never_prints_a_traceback(capsys, pair_arg, flags):
    argv = ["run", "--pair", pair_arg, "--prompt", "To be", "--max-new-tokens", "6"]
    argv += [x for pair in flags for x in pair] + ["--json"]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: malformed options
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if rc == 2:
        assert out == "" and (err.startswith("error: ") or "usage:" in err)
        return
    result = json.loads(out)
    checked = [
        c["overlap"]
        for r in result["rounds"]
        for c in r["checks"]
        if c["status"] in ("accepted", "rejected")
    ]
    rate = sum(checked) / len(checked) if checked else 0.0
    assert result["stats"]["acceptance_rate"] == pytest.approx(rate)
    for r in result["rounds"]:
        statuses = [c["status"] for c in r["checks"]]
        assert r["accepted"] == statuses.count("accepted")
        assert len(statuses) == len(r["drafted"])
