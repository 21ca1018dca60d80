"""``compare.py``: every drafter on one prompt, the numbers and the token strip agree; the
CLI's ``--drafter``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_json

from specdec_core.__main__ import main
from specdec_core.bench.compare import compare_drafters, strip_marks
from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.source_compare import compare_sources
from specdec_core.bench.source_results import SOURCE_PROMPTS, SOURCE_TEMPERATURES
from specdec_core.core.records import STRIP_STATES
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.rules.costmodel import expected_tokens_given_drafts

STRINGS = json.loads(
    (Path(__file__).resolve().parents[1] / "assets/strings/drafters.json").read_text("utf-8")
)
REPETITIVE = STRINGS["dr_prompt_repetitive"]["en"]
NOVEL = STRINGS["dr_prompt_novel"]["en"]
COMMITTED_STATES = {"accepted", "correction", "bonus", "committed"}


def check_strip(r) -> None:
    """The strip, the per-round counts and the fast path's stats describe one generation."""
    marks = r.strip
    assert {m.state for m in marks} <= set(STRIP_STATES)
    # the committed marks, in order, are exactly the output
    assert [m.token.id for m in marks if m.state in COMMITTED_STATES] == list(r.output_ids)
    accepted = sum(m.state == "accepted" for m in marks)
    assert accepted == r.accepted == sum(r.accepted_per_round)
    assert (
        r.drafted
        == sum(r.drafted_per_round)
        == sum(m.state in ("accepted", "rejected", "discarded") for m in marks)
    )
    # one rejection per round that did not accept all its drafts
    rejected = sum(a < d for a, d in zip(r.accepted_per_round, r.drafted_per_round, strict=True))
    assert sum(m.state == "rejected" for m in marks) == rejected
    assert sum(m.state == "committed" for m in marks) == sum(d == 0 for d in r.drafted_per_round)
    assert r.empty_rounds <= sum(d == 0 for d in r.drafted_per_round)
    assert len(r.accepted_per_round) == r.rounds
    assert r.mean_accepted == pytest.approx(r.accepted / r.rounds)
    assert r.tokens_per_round == pytest.approx(r.new_tokens / r.rounds)
    assert r.tokens_per_s > 0 and r.verify_ms_per_round > 0 and r.speedup > 0
    assert r.speedup == pytest.approx(r.tokens_per_s / r.baseline.tokens_per_s)


def test_greedy_every_drafter_equals_target_alone(embedded_pair):
    n_layer = embedded_pair.target.config.n_layer
    calls = []
    drafters = [
        ("model", None),
        ("ngram", 1),
        ("ngram", 3),
        ("early-exit", 1),
        ("early-exit", n_layer),
    ]
    results = compare_drafters(
        embedded_pair,
        REPETITIVE,
        SessionConfig(gamma=4, max_new_tokens=32),
        drafters,
        progress=lambda *a: calls.append(a),
    )
    assert [(r.name, r.knob) for r in results] == [
        ("model", None),
        ("ngram", 1),
        ("ngram", 3),
        ("early-exit", 1),
        ("early-exit", n_layer),
    ]
    names = ["model", "ngram", "ngram", "early-exit", "early-exit"]
    steps = names + ["target"] + names  # the strips' sessions, then one timing pass
    assert calls == [(i, 11, what) for i, what in enumerate(steps)] + [(11, 11, "done")]
    base = results[0].baseline
    assert base.new_tokens == 32 and all(r.baseline is base for r in results)
    for r in results:
        assert r.same_as_target and r.output_ids == base.output_ids, r.name  # lossless
        check_strip(r)
    model, ngram1, ngram3, shallow, full = results
    assert model.empty_rounds == 0 and set(model.drafted_per_round[:-1]) == {4}
    assert ngram3.acceptance_rate > 0.5 and ngram3.accepted > 10  # the refrain is copied
    assert ngram3.draft_ms_per_round < model.draft_ms_per_round  # a search, not forwards
    # all layers: the early exit *is* the target, every greedy draft is accepted
    assert full.acceptance_rate == 1.0 and full.accepted_per_round == full.drafted_per_round
    assert {m.state for m in full.strip} == {"accepted", "bonus"}
    assert shallow.acceptance_rate < 1.0


def test_prompt_lookup_shines_on_repetition_and_fails_on_a_novel_prompt(embedded_pair):
    """The page's two presets: on the refrain prompt lookup drafts from round 1 and keeps
    about 2 tokens per round; on the novel prompt half its rounds draft nothing."""
    config = SessionConfig(gamma=4, max_new_tokens=48)
    [rep] = compare_drafters(embedded_pair, REPETITIVE, config, [("ngram", 3)])
    [novel] = compare_drafters(embedded_pair, NOVEL, config, [("ngram", 3)])
    assert rep.drafted_per_round[0] == 4 and novel.drafted_per_round[0] == 0
    assert rep.mean_accepted == pytest.approx(2.0) and rep.empty_rounds == 3
    assert novel.mean_accepted == pytest.approx(18 / 23) and novel.empty_rounds == 11
    check_strip(rep)
    check_strip(novel)


@pytest.mark.parametrize("name", ["model", "ngram", "early-exit"])
def test_sampled_strip_replays_the_fast_path(tiny_pair, name):
    """At temperature > 0 the strip (from a session) and the numbers (from generate) come
    from two runs; same seed and draw order make them the same generation."""
    config = SessionConfig(gamma=3, temperature=0.9, top_k=30, seed=5, max_new_tokens=24)
    [r] = compare_drafters(tiny_pair, "First Citizen:\nWe are", config, [(name, 1)])
    check_strip(r)


def test_a_round_without_drafts_commits_one_target_token(tiny_pair):
    ids = tiny_pair.tokenizer.encode("First Citizen:")
    assert len(set(ids)) == len(ids)  # nothing to look up
    session = SpeculativeSession(
        tiny_pair, ids, SessionConfig(gamma=4), drafter=NgramDrafter(tiny_pair.vocab_size, 3)
    )
    r = session.run_round()
    assert r.verify.checks == () and r.verify.accepted == 0 and len(r.commit.appended) == 1
    [mark] = strip_marks(session.records, session.token)
    assert mark.state == "committed" and mark.token == r.commit.appended[0]


def test_bad_requests_fail_before_running(tiny_pair):
    calls = []
    config = SessionConfig(max_new_tokens=4)
    for drafters, match in [
        ([], "at least one"),
        ([("ngram", 0)], "n-gram size"),
        ([("model", None), ("early-exit", 3)], "between 1 and 2"),
        ([("medusa", None)], "unknown drafter"),
    ]:
        with pytest.raises(ValueError, match=match):
            compare_drafters(tiny_pair, "We are", config, drafters, progress=calls.append)
    assert calls == []


@pytest.mark.parametrize("drafter", ["ngram", "early-exit"])
def test_cli_drafter_option(capsys, pair_arg, drafter):
    common = (
        "--pair",
        pair_arg,
        "--prompt",
        "KING:\nWe are, we are",
        "--max-new-tokens",
        "16",
        "--json",
    )
    out = run_json(capsys, "run", *common, "--gamma", "3", "--drafter", drafter)
    ar = run_json(capsys, "run", *common, "--mode", "autoregressive")
    assert out["output_ids"] == ar["output_ids"]  # greedy: lossless with any drafter
    rounds = out["rounds"]
    assert sum(len(r["appended"]) for r in rounds) == 16
    assert all(r["appended"][: r["accepted"]] == r["drafted"][: r["accepted"]] for r in rounds)
    if drafter == "ngram":  # no model: no forwards, no cache, one-hot q
        assert out["stats"]["draft_forwards"] == 0
        assert all(r["draft_kv_len"] == 0 for r in rounds)
        assert all(c["q"] == 1.0 for r in rounds for c in r["checks"])
    else:  # the first layer of the target, with its own cache
        assert out["stats"]["draft_forwards"] > 0
        assert all(0 < r["draft_kv_len"] < r["committed_len"] for r in rounds)
    with pytest.raises(SystemExit):
        main(["run", *common, "--drafter", "medusa"])
    assert main(["run", *common, "--drafter", "eagle"]) == 2  # the tiny pair has no head
    assert "has no EAGLE draft head" in capsys.readouterr().err


# ------------------------------------------------------------------ every source
#: Draft forwards per round a source runs whatever it drafts (prompt lookup: none; the
#: block drafter: one for the whole block; the MTP heads: none, they are not a model forward).
FIXED_FORWARDS = {"ngram": 0.0, "mtp": 0.0, "block": 1.0}


def test_compare_sources_every_source_real_values(embedded_pair):
    """Every ``drafters_for`` source on both prompts, greedy and T = 1: each row's
    acceptance numbers are ``records.summarize`` of the same run made again, its draft
    forwards the run's own count (0 for prompt lookup and the MTP heads, 1 for the block
    drafter), its predictions the cost model's formulas over its measured α and c."""
    pair = embedded_pair
    names = drafters_for(pair)
    calls = []
    config = SessionConfig(gamma=4, seed=3, max_new_tokens=8)
    comp = compare_sources(pair, config, repeats=2, progress=lambda *a: calls.append(a))
    assert comp.sources == names
    settings = [(p, temp) for p in SOURCE_PROMPTS for temp in SOURCE_TEMPERATURES]
    assert list(comp.settings) == settings and len(comp.rows) == len(settings) * len(names)
    total = 1 + len(names) + 2 * len(settings) * (1 + len(names))
    assert calls[0] == (0, total, "target") and calls[-1] == (total, total, "done")
    assert len(calls) == total + 1
    timed = ignoring_eos(pair)
    for prompt, temp in settings:
        target = comp.target(prompt, temp)
        assert target.new_tokens == 8 and target.ms_per_token.n == 2 and target.step_ms > 0
        alone = generate(
            timed, SOURCE_PROMPTS[prompt], replace(config, temperature=temp), "autoregressive"
        )
        for row in comp.rows_for(prompt, temp):
            drafter = make_named_drafter(pair, row.name)
            assert row.gamma == min(4, drafter.max_gamma or 4)
            run = generate(
                timed,
                SOURCE_PROMPTS[prompt],
                replace(config, temperature=temp, gamma=row.gamma),
                drafter=drafter,
            )
            summary = summarize(run.records)
            assert 0.0 <= row.acceptance_rate <= 1.0
            assert row.acceptance_rate == summary.acceptance_rate
            assert row.accepted_per_round == summary.mean_accepted
            assert row.tokens_per_round == summary.tokens_per_round
            assert (row.rounds, row.drafted, row.accepted) == (
                summary.rounds,
                summary.drafted,
                summary.accepted,
            )
            assert row.new_tokens == 8
            drafting = sum(1 for r in run.records if r.gamma > 0)  # not a budget-cut round
            forwards = run.stats.draft_forwards / drafting
            assert row.draft_forwards_per_round == pytest.approx(forwards)
            if row.name in FIXED_FORWARDS:
                assert row.draft_forwards_per_round == FIXED_FORWARDS[row.name], row.name
            if row.name == "mtp":  # no model forward; one head evaluation per draft
                assert run.stats.draft_forwards == 0
                assert row.head_evaluations_per_round == pytest.approx(row.drafted / drafting)
                assert row.head_evaluations_per_round > 0
            else:
                assert row.head_evaluations_per_round is None, row.name
            if (
                row.name not in FIXED_FORWARDS
            ):  # a model (or the EAGLE head) drafts with forwards of its own
                assert row.draft_forwards_per_round > 0, row.name
            assert row.target_forwards_per_round == pytest.approx(
                run.stats.target_forwards / summary.rounds
            )
            if row.name != "eagle":  # the EAGLE head's first round: one prefill more
                assert row.extra_target_forwards_per_round == 0.0, row.name
            drafts = [len(r.drafted) for r in run.records]
            expected = expected_tokens_given_drafts(row.acceptance_rate, drafts)
            assert row.predicted_tokens_per_round == pytest.approx(expected)
            assert row.cost_ratio == pytest.approx(row.draft_ms_per_round / target.step_ms)
            assert row.predicted_speedup == pytest.approx(expected / (row.cost_ratio + 1.0))
            assert row.ms_per_token.n == 2 and row.ms_per_token.median > 0
            assert row.speedup.n == 2 and row.speedup.median > 0
            assert row.same_as_target == (run.output_ids == alone.output_ids)
            if temp == 0.0:
                assert row.same_as_target, row.name  # greedy: lossless
    ngram = {p: comp.rows_for(p, 0.0)[names.index("ngram")] for p in SOURCE_PROMPTS}
    assert ngram["repetitive"].accepted > ngram["novel"].accepted  # a copy needs a source
    data = json.loads(json.dumps(comp.to_json()))
    assert [r["name"] for r in data["rows"]] == [r.name for r in comp.rows]
    assert data["rows"][0]["ms_per_token"]["n"] == 2 and data["how"]["repeats"] == 2


def test_compare_sources_refuses_before_running(tiny_pair):
    calls = []
    config = SessionConfig(max_new_tokens=4)
    short = {"short": "We are"}  # the tiny pair's context holds 64 tokens
    for kwargs, match in [
        ({"drafters": []}, "at least one"),
        ({"drafters": ["medusa"], "prompts": short}, "unknown drafter"),
        ({"drafters": ["ngram", "eagle"], "prompts": short}, "no EAGLE draft head"),
        ({"drafters": ["ngram"], "prompts": {}}, "at least one prompt"),
        ({"drafters": ["ngram"], "prompts": short, "temperatures": ()}, "at least one prompt"),
        ({"drafters": ["ngram"]}, "at most 63 tokens"),  # the pages' prompts: too long here
    ]:
        with pytest.raises(ValueError, match=match):
            compare_sources(tiny_pair, config, progress=calls.append, **kwargs)
    assert calls == []


def test_compare_drafters_caps_gamma_at_what_a_source_can_propose(embedded_pair):
    """A session γ above a source's ``max_gamma`` (the MTP heads: K) runs that source at
    its own maximum instead of refusing the whole comparison; the others keep γ."""
    capped = [
        n for n in drafters_for(embedded_pair) if make_named_drafter(embedded_pair, n).max_gamma
    ]
    config = SessionConfig(gamma=8, max_new_tokens=12)
    chosen = [("model", None)] + [(n, None) for n in capped]
    results = compare_drafters(embedded_pair, NOVEL, config, chosen)
    for r in results:
        cap = make_named_drafter(embedded_pair, r.name).max_gamma
        assert r.gamma == min(8, cap or 8), r.name
        assert max(r.drafted_per_round) <= r.gamma and r.same_as_target, r.name
