"""Unit tests of ``core/penalties.py``, ``core/grammar.py`` and ``core/processors.py``: the
penalties against transformers' processors and the OpenAI / vLLM formula, the no-repeat
n-gram rule, the grammar matcher kept like a cache (sync_to / rollback against a fresh
matcher), the per-prefix rows, and every error code."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor

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
    MAX_NGRAM_SIZE,
    PenaltyConfig,
    apply_penalties,
    banned_ngram_tokens,
    penalty_counts,
)
from specdec_core.core.processors import make_processors

V = 64


def _rows(seed: int, n: int = 40, symbols: int = 5) -> list[tuple[torch.Tensor, list[int]]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(1, 30, (1,), generator=g))
        prefix = torch.randint(0, symbols, (length,), generator=g).tolist()  # repeats likely
        out.append((torch.randn(V, generator=g) * 3, prefix))
    return out


@pytest.mark.parametrize("theta", [0.5, 1.3, 2.0, 7.5])
def test_repetition_penalty_equals_transformers(theta):
    hf = RepetitionPenaltyLogitsProcessor(theta)
    for logits, prefix in _rows(int(theta * 10)):
        ours = apply_penalties(logits, prefix, 1, PenaltyConfig(repetition_penalty=theta))
        ref = hf(torch.tensor([prefix]), logits[None].clone())[0]
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
        seen = sorted(set(prefix))
        assert not torch.equal(ours[seen], logits[seen])  # the penalty did something
        unseen = [t for t in range(V) if t not in seen]
        assert torch.equal(ours[unseen], logits[unseen])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_transformers(n):
    hf = NoRepeatNGramLogitsProcessor(n)
    banned_somewhere = 0
    for logits, prefix in _rows(n, symbols=3):
        ours = apply_penalties(logits, prefix, 1, PenaltyConfig(no_repeat_ngram_size=n))
        ref = hf(torch.tensor([prefix]), logits[None].clone())[0]
        assert torch.equal(torch.isinf(ours), torch.isinf(ref))
        torch.testing.assert_close(ours[~torch.isinf(ours)], ref[~torch.isinf(ref)])
        assert torch.isinf(ours).nonzero().flatten().tolist() == banned_ngram_tokens(prefix, n)
        banned_somewhere += bool(torch.isinf(ours).any())
    assert banned_somewhere >= 5  # the rule was exercised


def test_banned_ngram_tokens_by_hand():
    assert banned_ngram_tokens([1, 2, 3, 1, 2], 3) == [3]  # "1 2" was followed by 3
    assert banned_ngram_tokens([1, 2, 3, 1, 2], 2) == [3]  # "2" was followed by 3
    assert banned_ngram_tokens([1, 2, 1, 4, 1], 2) == [2, 4]
    assert banned_ngram_tokens([5, 6, 5], 1) == [5, 6]
    assert banned_ngram_tokens([1, 2], 3) == []  # shorter than n
    assert banned_ngram_tokens([1, 2, 3], 0) == []


def test_frequency_and_presence_by_hand():
    logits = torch.zeros(8)
    prefix = [1, 2, 3, 3, 4, 3]  # prompt [1, 2], generated 3 ×3, 4 ×1
    cfg = PenaltyConfig(frequency_penalty=0.5, presence_penalty=0.25)
    out = apply_penalties(logits, prefix, 2, cfg)
    expected = torch.zeros(8)
    expected[3] = -(0.5 * 3 + 0.25)
    expected[4] = -(0.5 * 1 + 0.25)
    assert torch.equal(out, expected)  # prompt tokens 1, 2 untouched
    negative = apply_penalties(logits, prefix, 2, PenaltyConfig(frequency_penalty=-1.0))
    assert float(negative[3]) == 3.0 and float(negative[1]) == 0.0


def test_frequency_and_presence_formula_on_random_rows():
    """vLLM's ``apply_penalties``: s − f·count − r·[count > 0] over the output tokens."""
    cfg = PenaltyConfig(frequency_penalty=0.7, presence_penalty=-0.4)
    for i, (logits, prefix) in enumerate(_rows(7)):
        prompt_len = i % (len(prefix) + 1)
        ours = apply_penalties(logits, prefix, prompt_len, cfg)
        ref = logits.clone()
        for t in range(V):
            count = prefix[prompt_len:].count(t)
            ref[t] -= 0.7 * count + (-0.4) * (count > 0)
        torch.testing.assert_close(ours, ref)


def test_penalties_chain_in_the_documented_order():
    logits = torch.tensor([2.0, -1.0, 3.0, 0.5])
    cfg = PenaltyConfig(
        repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.0, no_repeat_ngram_size=2
    )
    out = apply_penalties(logits, [0, 1, 0, 1, 0], 2, cfg)  # generated: 0 1 0
    # token 0: 2/2 − 0.5·2 = 0; token 1: banned ("0 1" seen); token 2, 3: untouched
    assert out.tolist() == [0.0, float("-inf"), 3.0, 0.5]
    assert penalty_counts([0, 1, 0, 1, 0], 2) == {0: (3, 2), 1: (2, 1)}


def test_penalty_config_validation_codes():
    for bad in (
        PenaltyConfig(repetition_penalty=0.0),
        PenaltyConfig(repetition_penalty=float("nan")),
        PenaltyConfig(frequency_penalty=2.5),
        PenaltyConfig(presence_penalty=-3.0),
        PenaltyConfig(presence_penalty=True),  # type: ignore[arg-type]
        PenaltyConfig(no_repeat_ngram_size=-1),
        PenaltyConfig(no_repeat_ngram_size=MAX_NGRAM_SIZE + 1),
        PenaltyConfig(no_repeat_ngram_size=2.0),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError) as info:
            bad.validate()
        assert info.value.code == "bad_penalty"
    assert not PenaltyConfig().active and PenaltyConfig(no_repeat_ngram_size=1).active


# ---------------------------------------------------------------- grammar
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
