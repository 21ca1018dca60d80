"""The history-dependent processors under speculation, chain shape: greedy
speculative output equals the target alone with the same processors (and transformers'
``generate`` where it has the processor), the grammar matcher equals a fresh one fed the
committed tokens after every round, every constrained output matches its grammar, a
rejected drafted end-of-text leaves the matcher un-terminated, sampling stays exact (χ²
against the exact processed target; the broadcast / unprocessed alternative is rejected
by the same test), atomic steps, the ``grammar_ngram`` refusal and the traces' views.

Runs single-threaded (two cores shared by many processes: ≈ 8× faster than two threads).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import pytest
import torch
from scipy.stats import chi2
from transformers import GenerationConfig

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec, GrammarState, compile_grammar
from specdec_core.core.penalties import PenaltyConfig, apply_penalties
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain import session as session_module
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.rounds import check_grammar_drafter, grammar_refusal

PROMPTS = [
    "KING:\nWe",
    "ROMEO:\nBut soft",
    "JULIET:\nO Romeo",
    "First Citizen:\nBefore we proceed",
    "MENENIUS:\nWhat work",
    "NURSE:\nFaith, I",
    "GLOUCESTER:\nNow is",
    "HAMLET:\nTo be",
    "LADY CAPULET:\nWell, think",
    "BRUTUS:\nThe",
    "QUEEN:\nAlas, poor",
    "DUKE VINCENTIO:\nGood",
    "Second Citizen:\nWould you",
    "CORIOLANUS:\nWhat",
    "MERCUTIO:\nNay, I",
    "FRIAR LAURENCE:\nHoly",
    "KING RICHARD II:\nNo, not",
    "TYBALT:\nWhat, drawn",
    "BENVOLIO:\nHere were",
    "PETRUCHIO:\nGood morrow, Kate",
    "ISABELLA:\nI am",
    "LEONTES:\nToo hot",
    "PROSPERO:\nNow does",
    "ANGELO:\nWe must not",
    "LUCIO:\nWhy, how now",
    "ESCALUS:\nWell, sir",
    "CLAUDIO:\nThe miserable",
    "POMPEY:\nYes, sir",
    "PAULINA:\nGood queen",
    "BIONDELLO:\nMaster",
]
NEW_TOKENS = 12
SPEAKER = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
JSON_PERSON = GrammarSpec(*GRAMMAR_PRESETS["json_person"])
#: Each processor alone, and the two grammars (SessionConfig fields).
SETTINGS = {
    "repetition": {"repetition_penalty": 1.4},
    "frequency_presence": {"frequency_penalty": 0.9, "presence_penalty": 0.6},
    "no_repeat_ngram": {"no_repeat_ngram_size": 2},
    "regex": {"grammar": SPEAKER},
    "json_schema": {"grammar": JSON_PERSON},
}
#: The processors transformers' generate has (the outside reference).
HF_KWARGS = {
    "repetition": {"repetition_penalty": 1.4},
    "no_repeat_ngram": {"no_repeat_ngram_size": 2},
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pair(embedded_pair):
    return embedded_pair


def _fresh(pair, spec: GrammarSpec, generated: list[int]) -> GrammarState:
    state = GrammarState(compile_grammar(pair.tokenizer, pair.vocab_size, spec), pair.vocab_size)
    state.sync_to(generated)
    return state


def _check_valid(pair, spec: GrammarSpec, ids: list[int], stop: str) -> None:
    """Stopped at EOS: the text fully matches (regex) / is the schema's object; otherwise
    an accepted prefix of the grammar."""
    fresh = _fresh(pair, spec, ids)
    assert fresh.ids == ids, "a token outside the grammar was generated"
    if stop == "eos":
        assert ids[-1] == pair.eos_token_id and fresh.view().terminated
        text = pair.tokenizer.decode(ids[:-1])
        if spec.kind == "regex":
            assert re.fullmatch(spec.source, text), text
        else:
            obj = json.loads(text)
            schema = json.loads(spec.source)
            assert set(obj) == set(schema["properties"]) and isinstance(obj["age"], int)


# ---------------------------------------------------------------- greedy equality
@pytest.mark.parametrize("name", list(SETTINGS))
def test_greedy_speculative_equals_target_alone(pair, name):
    """Fast path, γ 1 / 4 / 8, 30 prompts: the same ids as the target alone with the same
    processors; transformers' generate agrees where it has the processor; the processor
    changes the output on most prompts (so the equality is not the plain one)."""
    changed = 0
    for prompt in PROMPTS:
        config = SessionConfig(max_new_tokens=NEW_TOKENS, **SETTINGS[name])
        alone = generate(pair, prompt, config, mode="autoregressive")
        plain = generate(pair, prompt, SessionConfig(max_new_tokens=NEW_TOKENS), "autoregressive")
        changed += alone.output_ids != plain.output_ids
        for gamma in (1, 4, 8):
            spec = generate(pair, prompt, replace(config, gamma=gamma))
            assert spec.output_ids == alone.output_ids, (name, prompt, gamma)
        if name in HF_KWARGS:
            ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
            gc = GenerationConfig(
                do_sample=False,
                max_new_tokens=NEW_TOKENS,
                eos_token_id=pair.eos_token_id,
                pad_token_id=pair.eos_token_id,
                **HF_KWARGS[name],
            )
            mask = torch.ones(1, len(ids), dtype=torch.long)
            with torch.inference_mode():
                out = pair.target.generate(
                    torch.tensor([ids]), generation_config=gc, attention_mask=mask
                )
            assert out[0, len(ids) :].tolist() == alone.output_ids, (name, prompt)
        if "grammar" in SETTINGS[name]:
            _check_valid(pair, SETTINGS[name]["grammar"], alone.output_ids, alone.stop_reason)
    assert changed >= 20, f"{name} changed only {changed} of {len(PROMPTS)} outputs"


@pytest.mark.parametrize("name", list(SETTINGS))
def test_step_machine_equals_fast_path(pair, name):
    """The step machine (γ 4) gives the fast path's ids, greedy and at T = 1 (same round
    streams, same records)."""
    for i, prompt in enumerate(PROMPTS[:4]):
        for temperature in (0.0, 1.0):
            config = SessionConfig(
                max_new_tokens=NEW_TOKENS, temperature=temperature, seed=i, **SETTINGS[name]
            )
            session = SpeculativeSession(pair, prompt, config)
            session.run()
            fast = generate(pair, prompt, config)
            assert session.generated_ids == fast.output_ids, (name, prompt, temperature)
            assert session.records == fast.records


# ---------------------------------------------------------------- the matcher per round
@pytest.mark.parametrize("spec", [SPEAKER, JSON_PERSON], ids=["regex", "json_schema"])
def test_matcher_equals_a_fresh_one_after_every_round(pair, spec):
    """After every commit: the session's matcher has accepted exactly the committed
    generated tokens and allows exactly what a fresh matcher fed them allows; before
    verify it stands on the committed text, after verify on it + the drafts."""
    rounds = 0
    for i, prompt in enumerate(PROMPTS[:6]):
        for temperature in (0.0, 1.0):
            config = SessionConfig(
                max_new_tokens=NEW_TOKENS + 8, temperature=temperature, seed=i, grammar=spec
            )
            session = SpeculativeSession(pair, prompt, config)
            while session.phase == "propose":
                before = list(session.generated_ids)
                trace = session.run_round()
                rounds += 1
                grammar = session.processors.grammar
                assert grammar is not None
                fresh = _fresh(pair, spec, session.generated_ids)
                assert grammar.ids == fresh.ids == session.generated_ids
                assert torch.equal(grammar.allowed(), fresh.allowed())
                assert trace.commit.kv_after.processors.grammar == fresh.view()
                at_start = _fresh(pair, spec, before).view()
                assert trace.verify.kv_before.processors.grammar == at_start
                drafted = list(trace.record.drafted)
                stop = drafted.index(0) + 1 if 0 in drafted else len(drafted)
                after = trace.verify.kv_after.processors
                assert after.grammar == _fresh(pair, spec, before + drafted[:stop]).view()
                assert after.length == session.prompt_len + len(before) + len(drafted)
            _check_valid(pair, spec, session.generated_ids, session.stop_reason)
    assert rounds >= 30


def test_every_sampled_constrained_output_is_valid(pair):
    for i, prompt in enumerate(PROMPTS[:10]):
        for spec in (SPEAKER, JSON_PERSON, GrammarSpec(*GRAMMAR_PRESETS["short_answer"])):
            config = SessionConfig(max_new_tokens=30, temperature=1.0, seed=i, grammar=spec)
            result = generate(pair, prompt, config)
            _check_valid(pair, spec, result.output_ids, result.stop_reason)


def test_a_rejected_drafted_end_of_text_leaves_the_matcher_open(pair):
    """A draft of end-of-text where the grammar allows it: the matcher is terminated
    after the verify forward (advanced through the drafts) and, once the target rejects
    it, open again after commit."""
    spec = GrammarSpec("regex", r"[A-Za-z ,.\n]{1,40}")
    session = SpeculativeSession(pair, "KING:\nWe", SessionConfig(gamma=4, grammar=spec))
    session.propose()
    session.steps.make_draft_agree()
    target_next = session.steps.target_preview(1)[1][0].id
    assert target_next != pair.eos_token_id  # so the target rejects an EOS there
    session.steps.edit_draft(2, pair.eos_token_id)
    verify = session.verify()
    assert [c.status for c in verify.checks[:2]] == ["accepted", "rejected"]
    assert verify.checks[1].p == 0.0 and verify.next_token.id == target_next
    assert verify.kv_after.processors.grammar.terminated
    assert not verify.kv_before.processors.grammar.terminated
    commit = session.commit()
    assert not commit.kv_after.processors.grammar.terminated
    assert commit.kv_after.processors.grammar.accepted_tokens == 2
    fresh = _fresh(pair, spec, session.generated_ids)
    assert torch.equal(session.processors.grammar.allowed(), fresh.allowed())
    session.run()
    _check_valid(pair, spec, session.generated_ids, session.stop_reason)


def test_an_edit_outside_the_grammar_is_rejected_not_a_crash(pair):
    session = SpeculativeSession(pair, "KING:\nWe", SessionConfig(gamma=3, grammar=SPEAKER))
    session.propose()
    allowed = session.processors.grammar.allowed()
    outside = int((~allowed).nonzero()[5])
    edit = session.steps.edit_draft(1, outside)
    assert edit.drafted[0].id == outside and edit.reproposed
    verify = session.verify()
    assert verify.checks[0].status == "rejected" and verify.checks[0].p == 0.0
    assert bool(allowed[verify.next_token.id])
    session.commit()
    assert session.processors.grammar.ids == session.generated_ids
    session.run()
    _check_valid(pair, SPEAKER, session.generated_ids, session.stop_reason)


# ---------------------------------------------------------------- sampling stays exact
N_SAMPLES = 600
#: The bins: outcomes the exact distribution expects ≥ 5 times (the rest: one bin).
MIN_P = 5 / N_SAMPLES


def _chi2_p(counts: Counter, bins: list[tuple[int, ...]], probs: dict, n: int) -> float:
    """Pearson χ² p-value of ``counts`` against a hypothesis giving ``probs[bin]`` for each
    of ``bins`` (fixed before sampling: the exact distribution's likely outcomes); bins
    the hypothesis expects < 5 times are merged into one, everything else is "other". A
    cell the hypothesis gives no mass but the counts hit gives p = 0."""
    expected = [probs[k] * n for k in bins]
    observed = [counts.get(k, 0) for k in bins]
    small = [i for i, e in enumerate(expected) if e < 5]
    cells = [
        (e, o) for i, (e, o) in enumerate(zip(expected, observed, strict=True)) if i not in small
    ]
    if small:
        cells.append((sum(expected[i] for i in small), sum(observed[i] for i in small)))
    cells.append((n - sum(expected), n - sum(observed)))
    if any(e <= 1e-9 and o > 0 for e, o in cells):
        return 0.0
    cells = [(e, o) for e, o in cells if e > 1e-9]
    stat = sum((o - e) ** 2 / e for e, o in cells)
    return float(chi2.sf(stat, len(cells) - 1))


@torch.inference_mode()
def _exact(pair, prompt_ids, row, keys=None) -> dict[tuple[int, ...], float]:
    """Exact ``P(t1, t2)`` of the first two generated tokens when every row is
    ``softmax(row(logits, prefix))`` (T = 1): ``p(t1 | prompt) · p(t2 | prompt + t1)``
    (an end-of-text ``t1`` ends the text: key ``(t1,)``), for ``keys``, or (``None``)
    for every outcome with probability ≥ :data:`MIN_P`. One batched forward for the
    second position."""
    logits = pair.target(torch.tensor([prompt_ids])).logits[0, -1]
    p1 = torch.softmax(row(logits, prompt_ids), -1)
    eos = pair.eos_token_id
    if keys is None:
        firsts = [t for t in (p1 >= MIN_P).nonzero().flatten().tolist() if t != eos]
        wanted_eos = float(p1[eos]) >= MIN_P
    else:
        firsts = sorted({k[0] for k in keys if len(k) == 2})
        wanted_eos = (eos,) in keys
    out: dict[tuple[int, ...], float] = {(eos,): float(p1[eos])} if wanted_eos else {}
    if not firsts:
        return out
    second = pair.target(torch.tensor([prompt_ids + [t] for t in firsts])).logits[:, -1]
    for j, t1 in enumerate(firsts):
        joint = p1[t1] * torch.softmax(row(second[j], prompt_ids + [t1]), -1)
        if keys is None:
            seconds = (joint >= MIN_P).nonzero().flatten().tolist()
        else:
            seconds = [k[1] for k in keys if len(k) == 2 and k[0] == t1]
        for t2 in seconds:
            out[(t1, t2)] = float(joint[t2])
    return out


def _tv(a: dict, b: dict) -> float:
    """Total variation over the listed outcomes (a lower bound of the true TV)."""
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def _sample_pairs(pair, prompt: str, settings: dict) -> Counter:
    """The first two tokens of speculative decoding (fast path, γ = 2, T = 1), one run
    per seed ``0..N_SAMPLES − 1``."""
    counts: Counter = Counter()
    for seed in range(N_SAMPLES):
        config = SessionConfig(gamma=2, max_new_tokens=3, temperature=1.0, seed=seed, **settings)
        counts[tuple(generate(pair, prompt, config).output_ids[:2])] += 1
    return counts


def test_chi2_repetition_penalty_per_prefix_not_broadcast(pair):
    """T = 1, γ = 2, repetition penalty 0.2 (< 1 favours repeats: a strong per-prefix
    effect): the first two tokens of speculative decoding follow the exact per-prefix
    processed target (p-value > 1e-3); the broadcast penalty (one vector from the prompt at
    both positions) and no penalty are rejected by the same counts (p < 1e-6)."""
    prompt = "KING:\nWe"
    ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
    cfg = PenaltyConfig(repetition_penalty=0.2)

    def per_prefix(logits, prefix):
        return apply_penalties(logits, prefix, len(ids), cfg)

    def broadcast(logits, prefix):
        return apply_penalties(logits, ids, len(ids), cfg)

    right = _exact(pair, ids, per_prefix)
    bins = sorted(right)
    wrong = _exact(pair, ids, broadcast, bins)
    none = _exact(pair, ids, lambda logits, prefix: logits.float(), bins)
    assert _tv(right, wrong) > 0.2 and _tv(right, none) > 0.2  # the case shows the difference
    counts = _sample_pairs(pair, prompt, {"repetition_penalty": 0.2})
    assert _chi2_p(counts, bins, right, N_SAMPLES) > 1e-3
    assert _chi2_p(counts, bins, wrong, N_SAMPLES) < 1e-6
    assert _chi2_p(counts, bins, none, N_SAMPLES) < 1e-6


def test_chi2_grammar_mask_per_prefix(pair):
    """T = 1, γ = 2, the speaker-line grammar: the first two tokens follow the exact
    masked target (each row's mask after its own prefix); the unmasked target and a stale
    mask (the first position's mask at both positions) are rejected."""
    prompt = "KING:\nWe"
    ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
    n = len(ids)

    def masked(logits, prefix):
        state = _fresh(pair, SPEAKER, prefix[n:])
        return logits.float().masked_fill(~state.allowed(), float("-inf"))

    right = _exact(pair, ids, masked)
    bins = sorted(right)
    stale = _exact(pair, ids, lambda logits, prefix: masked(logits, prefix[:n]), bins)
    none = _exact(pair, ids, lambda logits, prefix: logits.float(), bins)
    assert _tv(right, stale) > 0.2 and _tv(right, none) > 0.2
    counts = _sample_pairs(pair, prompt, {"grammar": SPEAKER})
    assert _chi2_p(counts, bins, right, N_SAMPLES) > 1e-3
    assert _chi2_p(counts, bins, stale, N_SAMPLES) < 1e-6
    assert _chi2_p(counts, bins, none, N_SAMPLES) < 1e-6


# ---------------------------------------------------------------- atomic, refusal, views
def test_a_failing_verify_leaves_the_processors_as_they_were(pair, monkeypatch):
    config = SessionConfig(gamma=4, grammar=SPEAKER, repetition_penalty=1.3)
    session = SpeculativeSession(pair, "KING:\nWe", config)
    session.run_round()
    session.propose()
    ids_before = list(session.processors.ids)
    grammar_before = list(session.processors.grammar.ids)
    allowed_before = session.processors.grammar.allowed()
    target_len = session.target.kv_len

    def boom(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(session_module, "verify_trace", boom)  # after the forward and rule
    with pytest.raises(RuntimeError, match="injected"):
        session.verify()
    assert session.processors.ids == ids_before == session.ids
    assert session.processors.grammar.ids == grammar_before == session.generated_ids
    assert torch.equal(session.processors.grammar.allowed(), allowed_before)
    assert session.target.kv_len == target_len and session.phase == "verify"
    monkeypatch.undo()
    session.verify()
    session.commit()
    clean = SpeculativeSession(pair, "KING:\nWe", config)
    clean.run(max_rounds=2)
    assert session.generated_ids == clean.generated_ids


def test_grammar_with_prompt_lookup_is_refused(pair):
    ngram = make_named_drafter(pair, "ngram")
    assert grammar_refusal("ngram", SPEAKER) == "grammar_ngram"
    assert grammar_refusal(ngram, SPEAKER) == "grammar_ngram"
    assert grammar_refusal("model", SPEAKER) is None and grammar_refusal("ngram", None) is None
    assert grammar_refusal(None, SPEAKER) is None
    for call in (
        lambda: SpeculativeSession(pair, "KING:", SessionConfig(grammar=SPEAKER), ngram),
        lambda: generate(pair, "KING:", SessionConfig(grammar=SPEAKER), drafter=ngram),
        lambda: check_grammar_drafter("ngram", SPEAKER),
    ):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.code == "grammar_ngram"
    # penalties with prompt lookup: allowed, and still the target alone at T = 0
    config = SessionConfig(max_new_tokens=NEW_TOKENS, repetition_penalty=1.4)
    for prompt in PROMPTS[:5]:
        twice = prompt + " " + prompt  # something to look up
        fast = generate(pair, twice, config, drafter=make_named_drafter(pair, "ngram"))
        alone = generate(pair, twice, config, mode="autoregressive")
        assert fast.output_ids == alone.output_ids


def test_a_continued_text_that_breaks_the_grammar_is_refused(pair):
    ids = pair.tokenizer.encode("KING:\nWe are", add_special_tokens=False)
    with pytest.raises(ConfigError) as info:
        SpeculativeSession(pair, ids, SessionConfig(grammar=SPEAKER), prompt_len=3)
    assert info.value.code == "grammar_prompt"


def test_unprocessed_dists_show_p_before_the_processors(pair):
    prompt = "KING:\nWe"
    config = SessionConfig(gamma=3, temperature=1.0, top_k=50, grammar=SPEAKER)
    session = SpeculativeSession(pair, prompt, config)
    session.propose()
    drafts = session.steps.drafts
    verify = session.verify()
    assert len(verify.unprocessed_dists) == len(drafts) + 1
    with torch.inference_mode():
        logits = pair.target(torch.tensor([session.ids + drafts])).logits[0, -(len(drafts) + 1) :]
    before = logits_to_probs(logits, SamplingConfig(1.0, 50, 1.0))
    masked_mass = 0.0
    for i, dist in enumerate(verify.unprocessed_dists):
        ids = dist.token_ids.tolist()
        torch.testing.assert_close(torch.tensor(dist.p), before[i, ids], rtol=1e-4, atol=1e-5)
        if i < len(verify.checks):
            assert set(verify.checks[i].dist.token_ids.tolist()) <= set(ids)
        state = _fresh(pair, SPEAKER, drafts[:i])
        masked_mass += float(before[i][~state.allowed()].sum())
    assert masked_mass > 0.5  # the mask removed real mass: visible in the chart
    # no processor: empty; at T = 0: the T = 1 softmax of the raw logits
    plain = SpeculativeSession(pair, prompt, SessionConfig(gamma=3))
    assert plain.run_round().verify.unprocessed_dists == ()
    greedy = SpeculativeSession(pair, prompt, SessionConfig(gamma=3, repetition_penalty=2.0))
    trace = greedy.run_round().verify
    with torch.inference_mode():
        ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
        raw = torch.softmax(pair.target(torch.tensor([ids])).logits[0, -1], -1)
    first = trace.unprocessed_dists[0]
    torch.testing.assert_close(torch.tensor(first.p), raw[first.token_ids.tolist()])
    assert set(trace.context_dists[0].token_ids.tolist()) <= set(first.token_ids.tolist())


def test_trace_file_and_replay_keep_the_processors(pair):
    """A trace file of a session with processors round-trips (the processors' views and
    unprocessed slices included); a lesson state with a grammar replays to the same text;
    a grammar that cannot run with the state's drafter is dropped alone."""
    from specdec_core.core.trace_json import to_jsonable
    from specdec_core.lessons.link import LessonState
    from specdec_core.lessons.replay import replay, state_of
    from specdec_core.lessons.tracefile import export_json, parse

    config = SessionConfig(gamma=3, temperature=1.0, seed=4, grammar=SPEAKER, presence_penalty=0.5)
    session = SpeculativeSession(pair, "KING:\nWe", config)
    session.run(max_rounds=3)
    state = state_of(session, LessonState(), "KING:\nWe")
    assert state.grammar == (SPEAKER.kind, SPEAKER.source) and state.presence_penalty == 0.5
    parsed = parse(export_json(session, state).encode("utf-8"))
    assert to_jsonable(parsed.rounds) == to_jsonable(tuple(session.history))
    assert parsed.rounds[0].verify.kv_after.processors.grammar.accepted_tokens > 0
    assert len(parsed.rounds[0].verify.unprocessed_dists) == parsed.rounds[0].propose.gamma + 1
    again = replay(pair, state)
    assert again.problems == [] and again.session.generated_ids == session.generated_ids
    lookup = replace(state, drafter="ngram")
    dropped = replay(pair, lookup)
    assert [p.code for p in dropped.problems] == ["bad_value"]
    assert dropped.problems[0].params == {"name": "grammar"}
    assert dropped.state.grammar == () and dropped.session.config.grammar is None
    assert dropped.session.config.presence_penalty == 0.5  # the rest of the settings stay
