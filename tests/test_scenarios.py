"""The scenario search (issue 24.13: "Find the scenarios" took 21–27 s). Its cost is
counted in model forwards (a time belongs in benchmarks/scenario_search.py); what it finds
is checked by tests/test_lesson_link.py::test_every_scenario_is_found_and_replays_its_outcome.
"""

from __future__ import annotations

import torch
from transformers import GPT2LMHeadModel

from specdec_core.core.inputs import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.lessons.scenarios import SCENARIOS, find_scenarios


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
