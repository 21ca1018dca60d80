"""The scenario search ("Find the scenarios" took 21–27 s). Its cost is
counted in model forwards (a time belongs in benchmarks/scenario_search.py); what it finds
is checked by tests/test_lesson_link.py::test_every_scenario_is_found_and_replays_its_outcome.
"""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2LMHeadModel

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.lessons.replay import replay
from specdec_core.lessons.scenarios import PROMPTS, REPETITIVE, SCENARIOS, find_scenarios


def test_the_search_runs_few_forwards(embedded_pair):
    """One run serves the three greedy scenarios, a run stops at the round it was looking
    for, a sampled seed is screened for 6 rounds: 131 forwards where 551 ran before."""
    forwards: list[int] = []

    def count(module, *_):
        if isinstance(module, GPT2LMHeadModel):
            forwards.append(1)

    handle = torch.nn.modules.module.register_module_forward_hook(count)
    try:
        found = {f.key: f.state for f in find_scenarios(embedded_pair)}
    finally:
        handle.remove()
    assert list(found) == list(SCENARIOS) and all(found.values())
    assert len(forwards) <= 150
    # the greedy group is found in one run of the first prompt, as three searches did
    assert [(found[k].seed, found[k].round) for k in SCENARIOS[:3]] == [(0, 1), (0, 4), (0, 2)]


def test_until_ends_a_run_after_the_round_it_names(embedded_pair):
    config = SessionConfig(gamma=4, temperature=1.0, seed=5, max_new_tokens=30)
    full = generate(embedded_pair, "ROMEO:\nBut soft", config)
    assert len(full.records) > 3
    seen: list[int] = []
    part = generate(
        embedded_pair, "ROMEO:\nBut soft", config, until=lambda r: seen.append(1) or len(seen) == 3
    )
    assert part.stop_reason == "until" and part.records == full.records[:3]
    assert part.output_ids == full.output_ids[: len(part.output_ids)]


@pytest.fixture(scope="module")
def found(embedded_pair) -> dict:
    return {f.key: f.state for f in find_scenarios(embedded_pair)}


A, R, D, C = "accepted", "rejected", "discarded", "cut"
# key → (prompt, seed, round, γ, statuses after Verify, the record's kind, tokens appended):
# what each scenario is for, as the embedded pair gives it
OUTCOMES = {
    "first_error_3": (PROMPTS[0], 0, 1, 4, (A, A, R, D), "correction", 3),
    "first_error_1": (PROMPTS[0], 0, 4, 4, (R, D, D, D), "correction", 1),
    "all_accepted": (PROMPTS[0], 0, 2, 4, (A, A, A, A), "bonus", 5),
    "sampled_rejection": (PROMPTS[0], 0, 2, 4, (A, R, D, D), "correction", 2),
    "one_hot_edit": (PROMPTS[0], 0, 0, 4, (A, C, C, C), "stopped", 1),
    "eos_cut": (PROMPTS[0], 6, 3, 6, (A, A, A, A, C, C), "stopped", 4),
    "lookup_run": (REPETITIVE[1], 0, 6, 6, (A,) * 6, "bonus", 7),
}


@pytest.mark.parametrize("key", SCENARIOS)
def test_a_found_scenario_replays_to_its_outcome(embedded_pair, found, key):
    """The found state, replayed from a fresh session, stops after Verify of the round it
    names, with the outcome the scenario describes; Commit appends what the record says."""
    prompt, seed, round_index, gamma, statuses, kind, appended = OUTCOMES[key]
    state = found[key]
    assert (state.prompt, state.seed, state.round, state.gamma) == (
        prompt,
        seed,
        round_index,
        gamma,
    )
    assert state.phase == "commit" and state.pair == "embedded"
    out = replay(embedded_pair, state)
    assert out.problems == [] and out.session.phase == "commit"
    assert out.session.round_index == round_index
    assert tuple(c.status for c in out.session.steps.current_verify.checks) == statuses
    record = out.session.current_record
    assert record.statuses == statuses and record.kind == kind
    assert len(record.appended) == appended
    before = len(out.session.ids)
    out.session.commit()
    assert len(out.session.ids) == before + appended
    if key == "one_hot_edit":  # position 1 replaced by the target's top choice, accepted
        [(edit_round, position, token)] = state.edits
        check = out.session.history[-1].verify.checks[0]
        assert (edit_round, position, check.token.id) == (0, 1, token) and check.edited
        assert check.q == 1.0 and check.accept_prob == pytest.approx(check.p)
        assert check.p < 1.0
    if key == "eos_cut":  # the accepted draft is the end of text: the rest is cut
        assert out.session.history[-1].record.appended[-1] == embedded_pair.eos_token_id
    if key == "lookup_run":
        assert state.drafter == "ngram" and state.temperature == 0.0
