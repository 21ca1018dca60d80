"""The drafters comparison's two prompts are what their labels say (UI string
``src_intro``): on each shipped pair the repetitive one gives prompt lookup a match from
the first round (γ drafts copied), the novel one none (its first round drafts nothing).
Neither is called lookup's best case: how much of a copy is accepted depends on the model."""

from __future__ import annotations

import pytest

from specdec_core.bench.source_results import source_prompts
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.ui.i18n import tr


@pytest.mark.parametrize("fixture", ["embedded_pair", "zh_pair"])
def test_the_repetitive_prompt_gives_lookup_a_match_the_novel_one_none(fixture, request):
    pair = request.getfixturevalue(fixture)
    config = SessionConfig(gamma=4, max_new_tokens=8, temperature=0.0)
    first = {}
    for kind, prompt in source_prompts(pair.name).items():
        run = generate(pair, prompt, config, "speculative", make_named_drafter(pair, "ngram"))
        first[kind] = len(run.records[0].drafted)
    assert first == {"repetitive": 4, "novel": 0}


def test_the_label_claims_no_best_case():
    for lang in ("en", "zh"):
        intro = tr("src_intro", lang)
        assert "best case" not in intro and "最擅长" not in intro
    assert "something to copy from the first round on" in tr("src_intro", "en")
