"""Per-round records and the statistics derived from them (``records.py``): the status
table, the definitions, three once-reported statistics faults as value tests, and the
fast path producing the same records as the step machine."""

from __future__ import annotations

import pytest
from conftest import run_json

from specdec_core.__main__ import BENCH_PROMPT
from specdec_core.bench.runs import ignoring_eos
from specdec_core.core.records import strip_order
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import (
    RoundRecord,
    conditional_acceptance,
    make_record,
    round_statuses,
    strip_states,
    summarize,
)
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.chain.trace import EditTrace

A, R, D, C = "accepted", "rejected", "discarded", "cut"


# ---------------------------------------------------------------- statuses, as a table
@pytest.mark.parametrize(
    ("drafted", "rule_accepted", "appended", "expected"),
    [
        (4, 1, 2, (A, R, D, D)),  # mismatch at position 2: correction appended
        (4, 4, 5, (A, A, A, A)),  # all accepted + bonus
        (4, 0, 1, (R, D, D, D)),  # mismatch at position 1
        (8, 2, 1, (A, C, C, C, C, C, C, C)),  # end-of-text drafted at 1, accepted: stop
        (4, 3, 2, (A, A, C, C)),  # stop on draft 2; the rule also accepted draft 3: cut
        (4, 1, 1, (A, C, C, C)),  # stop on draft 1; draft 2 was rejected: cut, not checked
        (3, 3, 3, (A, A, A)),  # stop on the last draft: no bonus, nothing to cut
        (3, 1, 2, (A, R, D)),  # stop on the correction itself: the rule finished
        (0, 0, 1, ()),  # no drafts: one target token
    ],
)
def test_round_statuses(drafted, rule_accepted, appended, expected):
    statuses = round_statuses(drafted, rule_accepted, appended)
    assert statuses == expected
    committed_drafts = min(appended, rule_accepted)
    assert statuses.count(A) == committed_drafts
    assert len(statuses) == drafted  # accepted + rejected + discarded + cut = drafted


@pytest.mark.parametrize(
    ("drafted", "n", "appended"), [(3, 4, 1), (3, 1, 0), (3, 1, 3), (2, -1, 1)]
)
def test_round_statuses_refuse_inconsistent_counts(drafted, n, appended):
    with pytest.raises(ValueError, match="inconsistent round"):
        round_statuses(drafted, n, appended)


def test_summarize_counts_checked_positions_and_committed_drafts_only():
    records = [
        make_record(4, [1, 2, 3, 4], 1, [0.9, 0.2, 0.7, 0.7], [1, 9], "correction"),
        make_record(4, [5, 6, 7, 8], 4, [0.8, 0.8, 0.8, 0.8], [5, 6, 7, 8, 9], "bonus"),
        make_record(4, [0, 6, 7, 8], 3, [0.5, 0.9, 0.9, 0.9], [0], "bonus"),  # EOS at 1
        make_record(4, [], 0, [], [3], "bonus"),  # prompt lookup found nothing
    ]
    s = summarize(records)
    checked = [0.9, 0.2] + [0.8] * 4 + [0.5]
    assert s.acceptance_rate == pytest.approx(sum(checked) / 7)
    assert (s.rounds, s.drafted, s.checked, s.accepted, s.cut) == (4, 12, 7, 6, 3)
    assert s.mean_accepted == pytest.approx(6 / 4)
    assert s.tokens_per_round == pytest.approx((2 + 5 + 1 + 1) / 4)
    assert s.accepted_histogram == (1, 2, 0, 0, 1)
    # position 1: committed in rounds 1, 2, 3 of 3 that drafted it; 2..4: 1 of 2 (round 3 cut)
    assert s.per_position_acceptance == pytest.approx((1.0, 0.5, 0.5, 0.5))
    assert s.empty_rounds == 1
    assert records[2].kind == "stopped" and records[2].accepted == 1


def test_conditional_acceptance_counts_a_position_only_after_an_accepted_prefix():
    records = [
        make_record(3, [1, 2, 3], 3, [0.9, 0.8, 0.7], [1, 2, 3, 4], "bonus"),
        make_record(3, [1, 2, 3], 1, [0.6, 0.4, 0.2], [1, 9], "correction"),
        make_record(2, [5, 6], 0, [0.2, 0.9], [7], "correction"),  # 0.9: discarded
        make_record(3, [], 0, [], [3], "bonus"),  # no draft
        make_record(3, [0, 6, 7], 3, [0.5, 0.4, 0.4], [0], "bonus"),  # EOS at 1: 2, 3 cut
    ]
    # α_1 over rounds 1, 2, 3, 5; α_2 over rounds 1, 2 (round 3 rejected 1, round 5 cut 2);
    # α_3 over round 1 (round 2 rejected 2)
    assert conditional_acceptance(records) == pytest.approx(
        ((0.9 + 0.6 + 0.2 + 0.5) / 4, (0.8 + 0.4) / 2, 0.7)
    )
    # greedy (0 / 1 overlaps): the share accepted given the prefix, not among all rounds
    greedy = [
        make_record(2, [1, 2], 2, [1.0, 1.0], [1, 2, 3], "bonus"),
        make_record(2, [1, 2], 2, [1.0, 1.0], [1, 2, 3], "bonus"),
        make_record(2, [1, 2], 0, [0.0, 1.0], [4], "correction"),
        make_record(2, [1, 2], 1, [1.0, 0.0], [1, 5], "correction"),
    ]
    assert conditional_acceptance(greedy) == pytest.approx((3 / 4, 2 / 3))
    assert summarize(greedy).per_position_acceptance == pytest.approx((3 / 4, 2 / 4))
    assert conditional_acceptance([records[3]]) == ()
    # summarize carries them with every other statistic
    assert summarize(greedy).conditional_acceptance == pytest.approx((3 / 4, 2 / 3))
    assert summarize(records).conditional_acceptance == pytest.approx(
        ((0.9 + 0.6 + 0.2 + 0.5) / 4, (0.8 + 0.4) / 2, 0.7)
    )
    assert summarize([records[3]]).conditional_acceptance == ()


def test_strip_order_puts_the_target_token_after_the_checked_drafts():
    record = make_record(4, [1, 2, 3, 4], 1, [1, 0, 0, 0], [1, 9], "correction")
    assert strip_order(record.statuses, True) == [0, 1, None, 2, 3]
    assert strip_states(record) == [(1, A), (2, R), (9, "correction"), (3, D), (4, D)]
    stopped = make_record(3, [0, 5, 6], 3, [1, 1, 1], [0], "bonus")
    assert strip_states(stopped) == [(0, A), (5, C), (6, C)]
    assert strip_states(make_record(4, [], 0, [], [7], "bonus")) == [(7, "committed")]


# ------------------------------------------------ statistics faults once reported, as values
def _checked_mean(out: dict) -> float:
    checked = [c["overlap"] for r in out["rounds"] for c in r["checks"] if c["status"] in (A, R)]
    return sum(checked) / len(checked)


def test_end_of_text_accepted_first_cuts_the_round(capsys, embedded_pair):
    """γ = 8, T = 1, seed 7 on the bench prompt: the first draft is end-of-text and is
    accepted, the rule also accepts the second; the output is that one token."""
    out = run_json(
        capsys,
        "run",
        "--pair",
        "embedded",
        "--prompt",
        BENCH_PROMPT,
        "--gamma",
        "8",
        "--temperature",
        "1",
        "--seed",
        "7",
        "--json",
    )
    [r] = out["rounds"]
    eos = embedded_pair.eos_token_id
    assert out["output_ids"] == [eos] and out["stop_reason"] == "eos"
    assert r["drafted"][0] == eos and r["appended"] == [eos] and r["kind"] == "stopped"
    assert r["accepted"] == 1 and out["stats"]["mean_accepted"] == 1.0
    statuses = [c["status"] for c in r["checks"]]
    assert statuses == [A] + [C] * 7
    assert r["checks"][1]["u"] < r["checks"][1]["accept_prob"]  # the rule accepted it: still cut
    assert out["stats"]["acceptance_rate"] == pytest.approx(r["checks"][0]["overlap"])
    assert out["stats"]["acceptance_rate"] == pytest.approx(_checked_mean(out))


def test_default_bench_rate_is_over_checked_positions(embedded_pair):
    """The default bench (model drafter, γ = 4, 64 tokens, greedy, end-of-text ignored):
    0.576 over checked positions, where the old all-positions mean said 0.649 (the int8
    draft model's drafts; 0.603 / 0.673 with its float32 weights)."""
    pair = ignoring_eos(embedded_pair)
    config = SessionConfig(gamma=4, max_new_tokens=64)
    fast = generate(pair, BENCH_PROMPT, config)
    session = SpeculativeSession(pair, BENCH_PROMPT, config)
    session.run()
    checks = [c for r in session.history for c in r.verify.checks]
    checked = [c.overlap for c in checks if c.status in (A, R)]
    every = [c.overlap for c in checks]
    assert fast.stats.acceptance_rate == pytest.approx(sum(checked) / len(checked))
    assert fast.stats.acceptance_rate == pytest.approx(34 / 59)  # 0.576
    assert sum(every) / len(every) == pytest.approx(74 / 114)  # 0.649, the old definition
    assert summarize(session.records) == summarize(fast.records)


def test_editing_a_prompt_lookup_draft_never_crashes(capsys, pair_arg, embedded_pair):
    out = run_json(
        capsys,
        "run",
        "--pair",
        "embedded",
        "--prompt",
        "ha ha ha ha ha ha",
        "--drafter",
        "ngram",
        "--gamma",
        "2",
        "--edit",
        "1:1=42",
        "--json",
    )
    first = out["rounds"][0]
    assert first["drafted"][0] == 42 and first["checks"][0]["status"] == R
    session = SpeculativeSession(
        embedded_pair,
        "ha ha ha ha ha ha",
        SessionConfig(gamma=2),
        drafter=make_named_drafter(embedded_pair, "ngram"),
    )
    assert len(session.propose().drafted) == 2
    edit = session.steps.edit_draft(1, 42)
    assert isinstance(edit, EditTrace) and edit.drafted[0].id == 42
    assert len(edit.drafted) == len(edit.draft_dists) == len(session.steps.drafts) <= 2
    session.verify()
    session.commit()
    assert session.history[-1].record.drafted[0] == 42


# ---------------------------------------------------------------- one round, two drivers
@pytest.mark.parametrize("drafter", ["model", "ngram", "early-exit", "greedy-draft"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_fast_path_and_step_machine_make_equal_records(tiny_pair, drafter, temperature):
    name = "model" if drafter == "greedy-draft" else drafter
    method = "greedy" if drafter == "greedy-draft" else "probabilistic"
    prompt = "First Citizen:\nWe are accounted poor citizens, the patricians good. We are"
    config = SessionConfig(
        gamma=3, temperature=temperature, top_k=40, seed=7, max_new_tokens=30, draft_method=method
    )
    fast = generate(tiny_pair, prompt, config, drafter=make_named_drafter(tiny_pair, name))
    session = SpeculativeSession(tiny_pair, prompt, config, make_named_drafter(tiny_pair, name))
    session.run()
    assert len(fast.records) == len(session.records) > 3
    for a, b in zip(fast.records, session.records, strict=True):
        assert (a.gamma, a.drafted, a.statuses, a.appended, a.kind) == (
            b.gamma,
            b.drafted,
            b.statuses,
            b.appended,
            b.kind,
        )
        assert a.overlaps == pytest.approx(b.overlaps, abs=1e-5)
    assert fast.output_ids == session.generated_ids
    assert fast.stats.acceptance_rate == pytest.approx(summarize(session.records).acceptance_rate)


def test_records_round_trip_through_json(tiny_pair):
    from specdec_core.core.trace_json import from_jsonable, to_jsonable
    from specdec_core.engine.chain.trace import RoundTrace

    session = SpeculativeSession(tiny_pair, "To be", SessionConfig(temperature=1.0, seed=3))
    session.run(max_rounds=2)
    back = [from_jsonable(RoundTrace, to_jsonable(r)) for r in session.history]
    assert [r.record for r in back] == list(session.records)
    assert isinstance(back[0].record, RoundRecord)
