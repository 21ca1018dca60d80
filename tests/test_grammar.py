"""Unit tests of ``core/grammar.py``: the matcher kept like a cache (sync_to / rollback
against a fresh matcher), its mask against xgrammar's own, the presets, the schema keywords
the engine would ignore, and every compile error code."""

from __future__ import annotations

import json

import pytest
import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import (
    GRAMMAR_PRESETS,
    MAX_GRAMMAR_CHARS,
    GrammarSpec,
    GrammarState,
    compile_grammar,
    unsupported_schema_keyword,
)
from specdec_core.core.penalties import (
    PenaltyConfig,
)
from specdec_core.core.processors import make_processors


@pytest.fixture(scope="module")
def tok(embedded_pair):
    return embedded_pair.tokenizer


def _state(tok, kind: str, source: str) -> GrammarState:
    return GrammarState(compile_grammar(tok, 4096, GrammarSpec(kind, source)), 4096)  # type: ignore[arg-type]


def test_grammar_sync_to_and_rollback_equal_a_fresh_matcher(tok):
    kind, source = GRAMMAR_PRESETS["speaker_line"]
    ids = tok.encode("JULIET: O Romeo, Romeo!\n", add_special_tokens=False)
    state = _state(tok, kind, source)
    assert state.sync_to(ids) == len(ids)
    assert state.view().completed and not state.view().terminated
    eos_ok = state.allowed()
    assert bool(eos_ok[0]) and int(eos_ok.sum()) == 1  # only the end of text after "\n"
    for cut in (len(ids) - 1, 3, 1, 0):
        state.sync_to(ids[:cut])  # a rollback
        fresh = _state(tok, kind, source)
        fresh.sync_to(ids[:cut])
        assert state.ids == fresh.ids == ids[:cut]
        assert torch.equal(state.allowed(), fresh.allowed())
        assert state.view() == fresh.view()
    # a different branch: roll back to the common prefix, accept the rest
    other = tok.encode("JULIET: Ay me!\n", add_special_tokens=False)
    state.sync_to(ids)
    assert state.sync_to(other) == len(other) and state.ids == other
    # terminate, then roll back: un-terminated
    state.sync_to(other + [0])
    assert state.view().terminated and state.view().allowed_next == 0
    assert not bool(state.allowed().any())
    state.sync_to(other)
    assert not state.view().terminated and state.view().allowed_next == 1


def test_grammar_refuses_a_token_and_stops_there(tok):
    state = _state(tok, "regex", r" (yes|no)[.!]")
    good = tok.encode(" yes", add_special_tokens=False)
    bad = tok.encode(" maybe", add_special_tokens=False)
    assert state.sync_to(good + bad + good) == len(good)
    assert state.ids == good


def test_compile_error_codes(tok, monkeypatch):
    def code(spec: GrammarSpec) -> str:
        with pytest.raises(ConfigError) as info:
            make_processors(tok, 4096, PenaltyConfig(), spec, 1, [5])
        return info.value.code

    assert code(GrammarSpec("regex", "a(")) == "grammar_bad"
    assert code(GrammarSpec("regex", "   ")) == "grammar_bad"
    assert code(GrammarSpec("json_schema", "{not json")) == "grammar_bad"
    assert code(GrammarSpec("json_schema", '{"enum": []}')) == "grammar_bad"
    assert code(GrammarSpec("regex", "x" * (MAX_GRAMMAR_CHARS + 1))) == "grammar_too_long"
    assert code(GrammarSpec("regex", "(x){0}")) == "grammar_empty"
    with pytest.raises(ConfigError) as info:
        compile_grammar(tok, 4096, GrammarSpec("regex", "a("))
    assert "parenthesis" in str(info.value) and ".cc:" not in info.value.params["reason"]
    # the text already generated breaks the grammar (a continued lesson)
    spec = GrammarSpec("regex", r" (yes|no)[.!]")
    ids = tok.encode("Q: yes", add_special_tokens=False)
    ok = make_processors(tok, 4096, PenaltyConfig(), spec, 2, ids)
    assert ok.grammar is not None and ok.grammar.ids == ids[2:]
    with pytest.raises(ConfigError) as info:
        make_processors(tok, 4096, PenaltyConfig(), spec, 1, ids)
    assert info.value.code == "grammar_prompt"


def test_presets_compile_and_constrain(tok):
    for name, (kind, source) in GRAMMAR_PRESETS.items():
        state = _state(tok, kind, source)
        assert 0 < state.view().allowed_next < 4096, name
    schema = json.loads(GRAMMAR_PRESETS["json_person"][1])
    state = _state(tok, *GRAMMAR_PRESETS["json_person"])
    text = '{"name": "Romeo", "age": 16}'
    ids = tok.encode(text, add_special_tokens=False)
    assert state.sync_to(ids) == len(ids) and state.view().completed
    assert set(json.loads(text)) == set(schema["required"])
    spaced = tok.encode('{ "name": "Romeo", "age": 16}', add_special_tokens=False)
    assert _state(tok, *GRAMMAR_PRESETS["json_person"]).sync_to(spaced) < len(spaced)


def test_allowed_equals_xgrammars_own_mask(tok):
    """The unpacked bitmask is the one xgrammar applies itself (its
    ``apply_token_bitmask_inplace``), at several points of a text."""
    import xgrammar as xgr

    for name, text in (("speaker_line", "NURSE: Ay, ay.\n"), ("json_person", '{"name": "Al"')):
        state = _state(tok, *GRAMMAR_PRESETS[name])
        ids = tok.encode(text, add_special_tokens=False)
        for cut in range(len(ids) + 1):
            state.sync_to(ids[:cut])
            logits = torch.zeros(1, 4096)
            state.matcher.fill_next_token_bitmask(state._bitmask)
            xgr.apply_token_bitmask_inplace(logits, state._bitmask)
            assert torch.equal(state.allowed(), torch.isfinite(logits[0])), (name, cut)


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"not": {}}, "not"),  # xgrammar let "-3" through for a schema that accepts nothing
        ({"allOf": [{"type": "integer"}, {"minimum": 5}]}, "allOf"),
        ({"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 9}]}, "oneOf"),
        ({"if": {"type": "integer"}, "then": {"minimum": 5}}, "if"),
        ({"type": "object", "properties": {"a": {"not": {"const": 1}}}}, "not"),
        (
            {"type": "array", "items": [{"type": "string", "contentMediaType": "x"}]},
            "contentMediaType",
        ),
        ({"$ref": "https://example.org/schema.json"}, "$ref"),
    ],
)
def test_schema_keywords_the_engine_would_ignore_are_refused(tok, schema, keyword):
    spec = GrammarSpec("json_schema", json.dumps(schema))
    with pytest.raises(ConfigError) as caught:
        compile_grammar(tok, 4096, spec)
    assert caught.value.code == "grammar_unsupported"
    assert caught.value.params == {"keyword": keyword}


def test_schema_names_and_data_that_look_like_keywords_are_fine(tok):
    """A property called "not", an enum value "oneOf" and a local $ref are not keywords the
    engine ignores: the schema compiles and its mask is enforced."""
    schema = {
        "type": "object",
        "properties": {"not": {"$ref": "#/$defs/small"}, "if": {"enum": ["oneOf", "allOf"]}},
        "required": ["not", "if"],
        "additionalProperties": False,
        "$defs": {"small": {"type": "integer", "minimum": 0, "maximum": 9}},
    }
    assert unsupported_schema_keyword(schema) is None
    state = GrammarState(
        compile_grammar(tok, 4096, GrammarSpec("json_schema", json.dumps(schema))), 4096
    )
    ids = tok.encode('{"not": 7, "if": "oneOf"}', add_special_tokens=False)
    assert state.sync_to(ids) == len(ids) and state.matcher.is_completed()
    bad = tok.encode('{"not": 12', add_special_tokens=False)  # 12 > maximum 9
    assert state.sync_to(bad) < len(bad)
