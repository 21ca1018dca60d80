"""Unit tests of ``core/processors.py``: each row processed on its own candidate prefix (a
fresh processor per row agrees; the grammar's mask holds), and the grammar winning when the
no-repeat n-gram ban would leave no token."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.grammar import (
    GRAMMAR_PRESETS,
    GrammarSpec,
    GrammarState,
    compile_grammar,
)
from specdec_core.core.penalties import (
    PenaltyConfig,
    apply_penalties,
)
from specdec_core.core.processors import make_processors


@pytest.fixture(scope="module")
def tok(embedded_pair):
    return embedded_pair.tokenizer


def _state(tok, kind: str, source: str) -> GrammarState:
    return GrammarState(compile_grammar(tok, 4096, GrammarSpec(kind, source)), 4096)  # type: ignore[arg-type]


def test_processors_rows_use_each_rows_own_prefix(tok):
    cfg = PenaltyConfig(repetition_penalty=1.7, no_repeat_ngram_size=2)
    spec = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
    prompt = tok.encode("ROMEO:\n", add_special_tokens=False)
    procs = make_processors(tok, 4096, cfg, spec, len(prompt), prompt)
    drafts = tok.encode("NURSE: Ay, ay", add_special_tokens=False)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(len(drafts) + 1, 4096, generator=g)
    rows = procs.rows(logits, prompt, drafts)
    assert procs.ids == prompt + drafts  # advanced through the drafts
    for j in range(len(drafts) + 1):
        fresh = make_processors(tok, 4096, cfg, spec, len(prompt), prompt)
        alone = fresh.row(logits[j], prompt + drafts[:j])
        assert torch.equal(rows[j], alone)
        allowed = _state(tok, *GRAMMAR_PRESETS["speaker_line"])
        allowed.sync_to(drafts[:j])
        finite = torch.isfinite(rows[j])
        assert bool(finite.any()) and not bool(finite[~allowed.allowed()].any())
    # a broadcast row (penalty from the committed prefix only) differs at position 2+
    broadcast = apply_penalties(logits[2], prompt, len(prompt), cfg)
    assert not torch.equal(broadcast, apply_penalties(logits[2], prompt + drafts[:2], 2, cfg))
    assert procs.timing["rows"] == len(drafts) + 1 and procs.timing["grammar_ms"] > 0
    procs.sync_to(prompt)
    assert procs.grammar is not None and procs.grammar.ids == []


def test_grammar_wins_when_the_ngram_ban_leaves_nothing(tok):
    """The JSON grammar allows one token first (``{``); a prompt holding it with n = 1
    (every prompt token banned) would leave no finite logit: the row drops the ban."""
    spec = GrammarSpec(*GRAMMAR_PRESETS["json_person"])
    allowed = _state(tok, *GRAMMAR_PRESETS["json_person"]).allowed()
    prompt = tok.encode("say", add_special_tokens=False) + allowed.nonzero().flatten().tolist()
    cfg = PenaltyConfig(no_repeat_ngram_size=1, repetition_penalty=2.0)
    procs = make_processors(tok, 4096, cfg, spec, len(prompt), prompt)
    logits = torch.randn(4096, generator=torch.Generator().manual_seed(1))
    row = procs.row(logits, prompt)
    assert torch.equal(torch.isfinite(row), allowed)
    relaxed = apply_penalties(logits, prompt, len(prompt), PenaltyConfig(repetition_penalty=2.0))
    assert torch.equal(row[allowed], relaxed[allowed])  # the repetition penalty stays
