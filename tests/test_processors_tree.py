"""History-dependent processors under *tree* speculation (``engine/tree/``): each node's draft
row and target row are processed on that node's own path (committed ids + the path from the
root), the grammar matcher follows the committed ids after every round, greedy tree output
equals the target alone under the same processors (and transformers ``generate`` for the
processors it has), every constrained output matches its grammar, and at T = 1 the first
token follows the *processed* target distribution (χ²; the unprocessed one is rejected)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from scipy.stats import chisquare

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec, GrammarState, compile_grammar
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.penalties import PenaltyConfig, apply_penalties
from specdec_core.core.processors import make_processors
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import ModelDrafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.round import draft_tree, tree_forward, walk
from specdec_core.engine.tree.session import TreeSession

SPEAKERS = ["ROMEO", "JULIET", "First Citizen", "KING HENRY", "NURSE", "HAMLET"]
STARTS = ["", "O ", "What ", "I will ", "Thou art "]
#: 30 prompts (speaker × opening words).
PROMPTS = [f"{who}:\n{start}" for who in SPEAKERS for start in STARTS]
SHAPES = [(2, 2, 1), (3, 1), (1, 1, 1, 1)]


def _grammar(name: str) -> GrammarSpec:
    return GrammarSpec(*GRAMMAR_PRESETS[name])


#: One setting per processor, and grammars (a regex that ends quickly, a longer regex, JSON).
SETTINGS: dict[str, dict] = {
    "repetition": {"repetition_penalty": 1.3},
    "frequency": {"frequency_penalty": 0.8},
    "presence": {"presence_penalty": 0.8},
    "ngram": {"no_repeat_ngram_size": 2},
    "regex_short": {"grammar": _grammar("short_answer")},
    "regex_speaker": {"grammar": _grammar("speaker_line")},
    "json": {"grammar": _grammar("json_person")},
}


def _target_alone(pair, prompt: str, config: SessionConfig) -> list[int]:
    """Greedy decoding with the target alone: each row processed on the whole prefix
    (``Processors.row``), then argmax; stops at end-of-text or ``max_new_tokens``."""
    ids = pair.tokenizer.encode(prompt)
    prompt_len = len(ids)
    processors = make_processors(
        pair.tokenizer, pair.vocab_size, config.penalties, config.grammar, prompt_len, ids
    )
    cache = ModelCache(pair.target)
    while True:
        logits = cache.extend(cache.sync_to(ids))[-1]
        token = int(processors.row(logits, ids).argmax())
        ids.append(token)
        if token == pair.eos_token_id or len(ids) - prompt_len >= config.max_new_tokens:
            return ids[prompt_len:]


def _fresh_matcher(pair, spec: GrammarSpec) -> GrammarState:
    return GrammarState(compile_grammar(pair.tokenizer, pair.vocab_size, spec), pair.vocab_size)


def _assert_valid(pair, spec: GrammarSpec, output: list[int], stop_reason: str) -> None:
    """Every token is one the grammar accepts; ended at end-of-text: the text is a full
    match (regex) or a JSON object with the schema's keys."""
    fresh = _fresh_matcher(pair, spec)
    assert fresh.sync_to(output) == len(output), pair.tokenizer.decode(output)
    if stop_reason == "eos":
        assert output[-1] == pair.eos_token_id and fresh.matcher.is_terminated()
        text = pair.tokenizer.decode(output[:-1])
        if spec.kind == "regex":
            assert re.fullmatch(spec.source, text), text
        else:
            value = json.loads(text)
            assert set(value) == {"name", "age"} and isinstance(value["age"], int), text
            assert isinstance(value["name"], str) and len(value["name"]) <= 12, text
    else:
        assert not fresh.matcher.is_terminated()


def _check_greedy(pair, setting: str, prompts: list[str], max_new: int) -> int:
    """Tree output == target alone for each prompt (shapes in turn); returns how many
    outputs differ from the unprocessed target alone (the processor mattered)."""
    config = SessionConfig(max_new_tokens=max_new, **SETTINGS[setting])
    plain = SessionConfig(max_new_tokens=max_new)
    changed = 0
    for i, prompt in enumerate(prompts):
        expected = _target_alone(pair, prompt, config)
        run = generate_tree(pair, prompt, config, SHAPES[i % len(SHAPES)])
        assert run.output_ids == expected, (setting, prompt, run.text)
        assert run.processor_timing["rows"] >= len(run.records)  # ≥ the root's row a round
        assert (run.processor_timing["grammar_ms"] > 0) == (config.grammar is not None)
        if config.grammar is not None:
            _assert_valid(pair, config.grammar, run.output_ids, run.stop_reason)
        changed += expected != _target_alone(pair, prompt, plain)
    return changed


# ------------------------------------------------------------------ greedy equality
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_greedy_tree_equals_target_alone_quick(embedded_pair, setting):
    i = list(SETTINGS).index(setting)
    prompt = PROMPTS[i * 4 + i % 3]
    _check_greedy(embedded_pair, setting, [prompt], max_new=8)
    config = SessionConfig(max_new_tokens=8, **SETTINGS[setting])  # the chain's baseline too
    alone = generate(embedded_pair, prompt, config, mode="autoregressive")
    assert alone.output_ids == _target_alone(embedded_pair, prompt, config)


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_greedy_tree_equals_target_alone_30_prompts(embedded_pair, setting):
    """≥ 30 prompts per processor, the three shapes in turn (slow: tests/conftest.py)."""
    changed = _check_greedy(embedded_pair, setting, PROMPTS, max_new=10)
    assert changed >= 3, f"{setting} changed only {changed} of {len(PROMPTS)} outputs"


@pytest.mark.parametrize("setting", ["repetition", "ngram"])
def test_target_alone_reference_equals_transformers_generate(embedded_pair, setting):
    """The reference loop itself against the outside reference (transformers has these
    two processors with the same semantics)."""
    pair = embedded_pair
    config = SessionConfig(max_new_tokens=10, **SETTINGS[setting])
    kwargs = {
        "repetition_penalty": config.repetition_penalty,
        "no_repeat_ngram_size": config.no_repeat_ngram_size or None,
    }
    for prompt in PROMPTS[1:30:14]:
        ids = pair.tokenizer.encode(prompt)
        with torch.inference_mode():
            out = pair.target.generate(
                torch.tensor([ids]),
                max_new_tokens=10,
                do_sample=False,
                eos_token_id=pair.eos_token_id,
                pad_token_id=pair.eos_token_id,
                **kwargs,
            )[0, len(ids) :].tolist()
        assert _target_alone(pair, prompt, config) == out, prompt


@pytest.mark.parametrize("drafter", ["early-exit", "eagle"])
def test_other_tree_drafters_with_a_grammar_and_a_penalty(embedded_pair, drafter):
    config = SessionConfig(
        max_new_tokens=10, repetition_penalty=1.2, grammar=_grammar("speaker_line")
    )
    for prompt in PROMPTS[2:30:24]:
        run = generate_tree(embedded_pair, prompt, config, (2, 1, 1), drafter=drafter)
        assert run.output_ids == _target_alone(embedded_pair, prompt, config)
        _assert_valid(embedded_pair, config.grammar, run.output_ids, run.stop_reason)


# ------------------------------------------------------------------ sampling: valid outputs
@pytest.mark.parametrize("setting", ["regex_short", "regex_speaker", "json"])
def test_sampled_tree_outputs_match_the_grammar(embedded_pair, setting):
    spec = SETTINGS[setting]["grammar"]
    ended = 0
    for seed in range(4):
        config = SessionConfig(temperature=1.0, seed=seed, max_new_tokens=12, grammar=spec)
        run = generate_tree(embedded_pair, PROMPTS[seed * 3], config, SHAPES[seed % 3])
        _assert_valid(embedded_pair, spec, run.output_ids, run.stop_reason)
        ended += run.stop_reason == "eos"
    if setting == "regex_short":
        assert ended == 4  # " yes." etc. is at most a few tokens: every run ends at EOS


# ------------------------------------------------------------------ rows on their own path
class _Recorder(Drafter):
    """The draft model, recording the context of every ``tree_logits`` call."""

    can_draft_tree = True

    def __init__(self, model) -> None:
        self.inner = ModelDrafter(model)
        self.vocab_size = self.inner.vocab_size
        self.contexts: list[list[int]] = []

    def tree_logits(self, context):
        self.contexts.append(list(context))
        return self.inner.tree_logits(context)


@torch.inference_mode()
def _chain_logits(model, ids: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_node_row_is_processed_on_its_own_path(embedded_pair, temperature):
    """q at every expanded node and p at every node the walk checks equal a chain forward
    over committed + that node's path, processed on that prefix (independent formulas);
    processing on the committed ids alone gives different rows (the test can fail)."""
    pair = embedded_pair
    penalties = PenaltyConfig(frequency_penalty=1.5, no_repeat_ngram_size=2)
    sampling = SamplingConfig(temperature)
    ids = pair.tokenizer.encode("ROMEO:\nO Romeo, Romeo, O")
    processors = make_processors(pair.tokenizer, pair.vocab_size, penalties, None, 0, ids)
    # prompt_len 0: every id counts as generated, so frequency sees the whole prefix
    drafter = _Recorder(pair.draft)
    tree, _ = draft_tree(
        drafter, ids, (2, 2, 2), sampling, torch.Generator().manual_seed(3), 12, processors
    )
    differs = 0
    for parent, q in tree.child_q.items():
        path = [tree.tokens[i] for i in tree.path(parent)] if parent >= 0 else []
        raw = _chain_logits(pair.draft, ids + path)
        want = logits_to_probs(apply_penalties(raw, ids + path, 0, penalties), sampling)
        assert torch.allclose(q, want, atol=1e-5), parent
        if path:  # the committed ids alone would give another row
            right = apply_penalties(raw, ids + path, 0, penalties)
            differs += not torch.equal(apply_penalties(raw, ids, 0, penalties), right)
    assert differs >= 1
    assert sorted(len(c) - len(ids) for c in drafter.contexts) == sorted(
        len(tree.path(p)) if p >= 0 else 0 for p in tree.child_q
    )
    target = ModelCache(pair.target)
    logits, _ = tree_forward(target, ids, tree)
    verdict = walk(tree, logits, sampling, torch.Generator().manual_seed(4), processors, ids)
    path_so_far: list[int] = []
    checked_parents = {tree.parents[c.node] for c in verdict.checks}
    for parent in sorted(checked_parents, key=lambda j: tree.depths[j] if j >= 0 else 0):
        path_so_far = [tree.tokens[i] for i in tree.path(parent)] if parent >= 0 else []
        raw = _chain_logits(pair.target, ids + path_so_far)
        p = logits_to_probs(apply_penalties(raw, ids + path_so_far, 0, penalties), sampling)
        for c in verdict.checks:
            if tree.parents[c.node] == parent:
                assert abs(c.p - float(p[tree.tokens[c.node]])) < 1e-5, c
    path_tokens = [tree.tokens[i] for i in verdict.path]
    assert processors.ids == ids + path_tokens  # the walk leaves them on its path


# ------------------------------------------------------------------ the step machine's states
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_session_matcher_equals_a_fresh_one_after_every_round(embedded_pair, temperature):
    pair = embedded_pair
    spec = _grammar("speaker_line")
    config = SessionConfig(
        temperature=temperature,
        seed=5,
        max_new_tokens=18,
        repetition_penalty=1.2,
        grammar=spec,
    )
    session = TreeSession(pair, PROMPTS[7], config, shape=(2, 2, 1))
    rejected = 0
    while session.phase == "propose":
        committed = list(session.ids)
        session.propose()
        before = session.kv_state().processors  # before verify: on the committed ids
        assert session.processors.ids == committed
        assert before.length == len(committed)
        assert before.grammar.accepted_tokens == len(session.generated_ids)
        session.verify()
        record = session.current_record
        path = [record.tokens[i] for i in record.path]
        assert session.processors.ids == committed + path  # after verify: along the walk
        assert session.processors.grammar.ids == session.generated_ids + path
        session.commit()
        rejected += record.states.count("rejected")
        fresh = _fresh_matcher(pair, spec)
        assert fresh.sync_to(session.generated_ids) == len(session.generated_ids)
        mine = session.processors.grammar
        assert mine.ids == session.generated_ids and session.processors.ids == session.ids
        assert torch.equal(mine.allowed(), fresh.allowed())
        assert mine.matcher.is_terminated() == fresh.matcher.is_terminated()
        trace = session.history[-1]
        assert trace.propose.kv_before.processors == before
        assert trace.verify.kv_after.processors.length == len(committed) + len(path)
        assert trace.commit.kv_after.processors.length == len(session.ids)
        assert trace.commit.kv_after.processors.grammar == fresh.view()
    assert rejected >= 1  # some rounds rolled the matcher back past rejected nodes
    _assert_valid(pair, spec, session.generated_ids, session.stop_reason)
    plain = generate_tree(pair, PROMPTS[7], config, (2, 2, 1))
    assert plain.output_ids == session.generated_ids  # fast path == step machine


def test_no_processor_leaves_the_states_without_processors(embedded_pair):
    assert (
        generate_tree(
            embedded_pair, PROMPTS[0], SessionConfig(max_new_tokens=4), (2, 1)
        ).processor_timing
        == {}
    )
    session = TreeSession(embedded_pair, PROMPTS[0], SessionConfig(max_new_tokens=4))
    session.run()
    assert all(
        t.propose.kv_before.processors is None
        and t.verify.kv_after.processors is None
        and t.commit.kv_after.processors is None
        for t in session.history
    )


def test_prompt_lookup_tree_with_a_grammar_or_a_penalty_is_refused(embedded_pair):
    """Fast path and step machine refuse with the same code: a grammar with prompt lookup
    (``grammar_ngram``, before compiling anything); a penalty alone: prompt lookup cannot
    draft a tree (``tree_no_ngram``, the session at ``propose``, unchanged)."""
    config = SessionConfig(grammar=_grammar("speaker_line"), repetition_penalty=1.2)
    for run in (
        lambda: generate_tree(embedded_pair, PROMPTS[0], config, (2, 1), drafter="ngram"),
        lambda: TreeSession(embedded_pair, PROMPTS[0], config, drafter="ngram", shape=(2, 1)),
    ):
        with pytest.raises(ConfigError) as err:
            run()
        assert err.value.code == "grammar_ngram"
    config = SessionConfig(repetition_penalty=1.2)
    with pytest.raises(ConfigError) as err:
        generate_tree(embedded_pair, PROMPTS[0], config, (2, 1), drafter="ngram")
    assert err.value.code == "tree_no_ngram"
    session = TreeSession(embedded_pair, PROMPTS[0], config, drafter="ngram", shape=(2, 1))
    ids = list(session.processors.ids)
    with pytest.raises(ConfigError) as err:
        session.propose()
    assert err.value.code == "tree_no_ngram"
    assert session.phase == "propose" and session.processors.ids == ids == session.ids


# ------------------------------------------------------------------ χ² at T = 1
class _FixedRow(Drafter):
    """A drafter whose row after the prompt is fixed (the draft model's, computed once):
    thousands of one-level trees in seconds, through the real draft_tree and walk."""

    can_draft_tree = True

    def __init__(self, row: torch.Tensor) -> None:
        self.row = row
        self.vocab_size = row.shape[-1]

    def tree_logits(self, context):
        return self.row.clone()


def _chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """χ² goodness of fit; tokens expected < 5 times share one bin."""
    n = float(counts.sum())
    expected = probs.double() * n
    keep = expected >= 5
    obs = torch.cat([counts[keep].double(), counts[~keep].double().sum().reshape(1)])
    exp = torch.cat([expected[keep], expected[~keep].sum().reshape(1)])
    obs, exp = obs[exp > 0], exp[exp > 0]
    exp = exp * obs.sum() / exp.sum()
    return float(chisquare(obs.numpy(), exp.numpy()).pvalue)


@pytest.mark.parametrize("setting", ["repetition", "grammar"])
def test_first_token_follows_the_processed_target_chi2(embedded_pair, setting):
    pair = embedded_pair
    ids = pair.tokenizer.encode("ROMEO:\nBut soft, what light")
    penalties = PenaltyConfig(repetition_penalty=1.5 if setting == "repetition" else 1.0)
    spec = _grammar("speaker_line") if setting == "grammar" else None
    raw_p = _chain_logits(pair.target, ids)
    raw_q = _chain_logits(pair.draft, ids)
    # the exact processed target distribution, from the formulas (not through Processors)
    expected_logits = apply_penalties(raw_p, ids, len(ids), penalties)
    if spec is not None:
        allowed = _fresh_matcher(pair, spec).allowed()
        expected_logits = expected_logits.masked_fill(~allowed, float("-inf"))
    processed = torch.softmax(expected_logits, -1)
    unprocessed = torch.softmax(raw_p, -1)
    assert 0.5 * float((processed - unprocessed).abs().sum()) > 0.1
    processors = make_processors(pair.tokenizer, pair.vocab_size, penalties, spec, len(ids), ids)
    sampling, drafter = SamplingConfig(1.0), _FixedRow(raw_q)
    draft_rng, verify_rng = torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)
    counts = torch.zeros(pair.vocab_size)
    for _ in range(3000):
        tree, _ = draft_tree(drafter, ids, (3,), sampling, draft_rng, 12, processors)
        rows = raw_p.expand(1 + len(tree.tokens), -1)  # rows past the root: 2nd token only
        verdict = walk(tree, rows, sampling, verify_rng, processors, ids)
        first = tree.tokens[verdict.path[0]] if verdict.path else verdict.next_token
        counts[first] += 1
        processors.sync_to(ids)
    if spec is not None:
        assert counts[~allowed].sum() == 0
    assert _chi2_pvalue(counts, processed) > 1e-3
    assert _chi2_pvalue(counts, unprocessed) < 1e-9


@pytest.mark.parametrize("rule", ["typical", "threshold"])
def test_a_lossy_rule_is_refused_by_the_tree_not_run_as_exact(embedded_pair, rule):
    """The lossy rules verify chains only: a tree given one refuses (code acceptance_mode)
    in both the step machine and the fast path, instead of silently running the exact
    rule."""
    config = SessionConfig(temperature=1.0, acceptance=rule, max_new_tokens=4)
    with pytest.raises(ConfigError) as caught:
        TreeSession(embedded_pair, "ROMEO:", config, shape=(2, 1))
    assert caught.value.code == "acceptance_mode"
    assert caught.value.params["rule"] == rule
    with pytest.raises(ConfigError) as caught:
        generate_tree(embedded_pair, "ROMEO:", config, (2, 1))
    assert caught.value.code == "acceptance_mode"
    exact = generate_tree(embedded_pair, "ROMEO:", SessionConfig(max_new_tokens=4), (2, 1))
    assert len(exact.output_ids) == 4
