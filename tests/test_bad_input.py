"""Everything a classroom can type: a clear message, the session unchanged, never a
traceback. One table, run against the engine and the CLI."""

from __future__ import annotations

import copy
import math

import pytest

from specdec_core.__main__ import main
from specdec_core.core.errors import (
    ConfigError,
    ModelLoadError,
    PhaseError,
    PromptError,
    TokenTextError,
    VocabularyMismatchError,
)
from specdec_core.core.inputs import single_token_id
from specdec_core.core.models import load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession

PROMPT = "First Citizen:\nWe are"


def snapshot(session: SpeculativeSession) -> tuple:
    return (
        list(session.ids),
        session.phase,
        session.steps.drafts,
        session.target.kv_len,
        session.drafter.kv.kv_len,
        session.steps.rng_state(),
        len(session.history),
    )


# (case, how to trigger it on a session in phase "verify", exception, message fragment)
SESSION_CASES = [
    (
        "edit text of zero tokens",
        lambda s: s.steps.edit_draft(1, single_token_id(s.pair, "")),
        TokenTextError,
        "0 tokens",
    ),
    (
        "edit text of several tokens",
        lambda s: s.steps.edit_draft(1, single_token_id(s.pair, " wherefore art thou")),
        TokenTextError,
        "not exactly one",
    ),
    (
        "token id above the vocabulary",
        lambda s: s.steps.edit_draft(1, 10**6),
        ValueError,
        "token id",
    ),
    ("negative token id", lambda s: s.steps.edit_draft(1, -1), ValueError, "token id"),
    ("edit position 0", lambda s: s.steps.edit_draft(0, 5), ValueError, "position"),
    ("edit position beyond γ", lambda s: s.steps.edit_draft(99, 5), ValueError, "position"),
    ("propose twice", lambda s: s.propose(), PhaseError, "phase 'verify'"),
    ("commit before verify", lambda s: s.commit(), PhaseError, "verify the drafts first"),
]


@pytest.mark.parametrize(
    ("case", "trigger", "error", "message"), SESSION_CASES, ids=[c[0] for c in SESSION_CASES]
)
def test_session_errors_leave_state_unchanged(tiny_pair, case, trigger, error, message):
    session = SpeculativeSession(tiny_pair, PROMPT, SessionConfig(gamma=3, temperature=1.0))
    session.propose()
    before = snapshot(session)
    with pytest.raises(error, match=message):
        trigger(session)
    assert snapshot(session) == before
    session.verify()  # and the round still works
    session.commit()


CONFIG_CASES = [
    ("γ 0", {"gamma": 0}, "gamma"),
    ("γ negative", {"gamma": -2}, "gamma"),
    ("γ above max", {"gamma": 17}, "gamma"),
    ("temperature negative", {"temperature": -0.5}, "temperature"),
    ("temperature NaN", {"temperature": math.nan}, "temperature"),
    ("temperature huge", {"temperature": 1e6}, "temperature"),
    ("top-p 0", {"top_p": 0.0}, "top-p"),
    ("top-p negative", {"top_p": -1.0}, "top-p"),
    ("top-p above 1", {"top_p": 1.01}, "top-p"),
    ("top-k negative", {"top_k": -1}, "top-k"),
    ("top-k above vocabulary", {"top_k": 301}, "top-k"),
    ("max new tokens 0", {"max_new_tokens": 0}, "max new tokens"),
    ("seed negative", {"seed": -1}, "seed"),
    ("seed too large", {"seed": 2**64}, "seed"),
]


@pytest.mark.parametrize(
    ("case", "changes", "message"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES]
)
def test_bad_settings(tiny_pair, case, changes, message):
    with pytest.raises(ConfigError, match=message):
        SpeculativeSession(tiny_pair, PROMPT, SessionConfig(**changes))


@pytest.mark.parametrize(
    ("prompt", "code", "message"),
    [
        ("", "prompt_empty", "empty"),
        ("To be, or not to be " * 30, "prompt_too_long", "at most 63 tokens"),
        ("x" * 20_001, "prompt_too_many_chars", "at most 20000"),
        ([], "prompt_empty", "no tokens"),
        ([5] * 64, "prompt_too_long", "at most 63 tokens"),
        ([5, 300], "prompt_bad_id", "0 to 299"),
        ([5, -1], "prompt_bad_id", "0 to 299"),
        ([5, "7"], "prompt_bad_id", "0 to 299"),
        ([True], "prompt_bad_id", "0 to 299"),
    ],
    ids=[
        "empty",
        "longer than the context",
        "over the character limit",
        "no ids",
        "ids longer than the context",
        "id past the vocabulary",
        "negative id",
        "id not a number",
        "bool id",
    ],
)
def test_bad_prompts_say_how_many_tokens_fit(tiny_pair, prompt, code, message):
    with pytest.raises(PromptError, match=message) as info:
        SpeculativeSession(tiny_pair, prompt)
    assert info.value.code == code
    with pytest.raises(PromptError, match=message):  # one validation for both paths
        generate(tiny_pair, prompt, SessionConfig(max_new_tokens=2))


def test_a_huge_prompt_is_refused_before_tokenizing(tiny_pair, monkeypatch):
    calls = []
    monkeypatch.setattr(tiny_pair.tokenizer, "encode", lambda *a, **k: calls.append(a) or [1])
    with pytest.raises(PromptError, match="characters"):
        SpeculativeSession(tiny_pair, "ha " * 3_000_000)
    assert calls == []


@pytest.mark.parametrize("prompt", ["\n", " ", "  \n\t "])
def test_whitespace_is_a_prompt(tiny_pair, prompt):
    ids = tiny_pair.tokenizer.encode(prompt, add_special_tokens=False)
    assert len(ids) >= 1
    session = SpeculativeSession(tiny_pair, prompt, SessionConfig(max_new_tokens=3))
    assert session.ids == ids
    session.run()
    fast = generate(tiny_pair, prompt, SessionConfig(max_new_tokens=3))
    assert fast.output_ids == session.generated_ids and len(fast.output_ids) == 3


def test_prompt_reaching_context_mid_round_stops_with_own_reason(tiny_pair):
    ids = tiny_pair.tokenizer.encode("To be, or not to be " * 30)[:60]  # 4 positions left
    session = SpeculativeSession(tiny_pair, ids, SessionConfig(gamma=8, max_new_tokens=50))
    session.run()
    assert session.stop_reason == "context_limit" and len(session.ids) == 64


LOAD_CASES = [
    ("unknown pair name", lambda d: load_pair("gpt-17"), ModelLoadError, "unknown model pair"),
    (
        "weights missing",
        lambda d: load_pair((d["target"].parent / "gone", d["draft"]), allow_custom=True),
        ModelLoadError,
        "not found",
    ),
    (
        "custom path not enabled",
        lambda d: load_pair((d["target"], d["draft"]), allow_custom=False),
        ModelLoadError,
        "SPECDEC_ALLOW_CUSTOM_MODELS",
    ),
    (
        "different vocabularies",
        lambda d: load_pair((d["target"], d["odd_vocab"]), allow_custom=True),
        VocabularyMismatchError,
        "307 tokens",
    ),
    ("hub unreachable", lambda d: load_pair("gpt2-xl"), ModelLoadError, "Hub is unreachable"),
]


@pytest.mark.parametrize(
    ("case", "load", "error", "message"), LOAD_CASES, ids=[c[0] for c in LOAD_CASES]
)
def test_load_errors(tiny_dirs, case, load, error, message):
    with pytest.raises(error, match=message):
        load(tiny_dirs)


@pytest.mark.parametrize(
    "args",
    [
        ["--prompt", ""],
        ["--prompt", "x", "--gamma", "-1"],
        ["--prompt", "x", "--temperature", "nan"],
        ["--prompt", "x", "--top-k", "-3"],
        ["--prompt", "x", "--top-p", "2"],
        ["--prompt", "x", "--edit", "1:1=-5"],
        ["--prompt", "x", "--edit", "1:1=5000000"],
        ["--prompt", "x", "--edit", "1:9=5"],
        ["--prompt", "x" * 2000],
        ["--pair", "nope", "--prompt", "x"],
    ],
)
def test_cli_exits_nonzero_with_one_line(tiny_dirs, monkeypatch, capsys, args):
    monkeypatch.setenv("SPECDEC_ALLOW_CUSTOM_MODELS", "1")
    pair = ["--pair", f"{tiny_dirs['target']},{tiny_dirs['draft']}"] if "--pair" not in args else []
    assert main(["run", *pair, *args, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_shared_model_is_never_mutated(tiny_pair):
    before = copy.deepcopy(tiny_pair.target.config.to_dict())
    weights = tiny_pair.target.transformer.h[0].attn.c_attn.weight.clone()
    session = SpeculativeSession(tiny_pair, PROMPT, SessionConfig(gamma=4, temperature=0.7))
    session.run(max_rounds=3)
    assert tiny_pair.target.config.to_dict() == before
    assert (tiny_pair.target.transformer.h[0].attn.c_attn.weight == weights).all()
