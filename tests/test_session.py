"""The step machine: greedy equality with the target alone, phases, edits, stops, replay."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from specdec_core.core.errors import ConfigError, InputError, PhaseError, PromptError
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import from_jsonable, to_jsonable
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.chain.trace import RoundTrace

PROMPTS = ["First Citizen:\nWe are", "ROMEO:\nBut soft", "KING"]


def hf_greedy(pair, prompt: str, n: int) -> list[int]:
    ids = torch.tensor([pair.tokenizer.encode(prompt)])
    out = pair.target.generate(
        ids,
        do_sample=False,
        max_new_tokens=n,
        min_new_tokens=n,
        attention_mask=torch.ones_like(ids),
        pad_token_id=pair.eos_token_id,
    )
    return out[0, ids.shape[1] :].tolist()


@pytest.mark.parametrize("gamma", [1, 3, 8])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_target_greedy(tiny_pair, gamma, prompt):
    n = 24
    session = SpeculativeSession(
        tiny_pair, prompt, SessionConfig(gamma=gamma, max_new_tokens=n, temperature=0.0)
    )
    session.run()
    want = hf_greedy(tiny_pair, prompt, n)
    if tiny_pair.eos_token_id in want:
        want = want[: want.index(tiny_pair.eos_token_id) + 1]
    assert session.generated_ids == want
    accepted = [r.verify.accepted for r in session.history]
    if gamma > 1:
        assert 0 in accepted  # rounds where the first draft is rejected occur


def test_greedy_all_accepted_when_draft_is_target(self_pair):
    session = SpeculativeSession(self_pair, PROMPTS[0], SessionConfig(gamma=4, max_new_tokens=20))
    rounds = session.run()
    assert [r.verify.accepted for r in rounds] == [4, 4, 4, 4]
    assert [r.commit.kind for r in rounds] == ["bonus"] * 4
    assert session.generated_ids == hf_greedy(self_pair, PROMPTS[0], 20)[:20]


def test_phase_errors_change_nothing(tiny_pair):
    session = SpeculativeSession(tiny_pair, PROMPTS[0], SessionConfig(gamma=3))
    before = (list(session.ids), session.target.kv_len, session.phase)
    for call in (session.verify, session.commit, lambda: session.steps.edit_draft(1, 5)):
        with pytest.raises(PhaseError, match="phase 'propose'"):
            call()
    assert (list(session.ids), session.target.kv_len, session.phase) == before
    session.propose()
    with pytest.raises(PhaseError):
        session.propose()
    with pytest.raises(PhaseError):
        session.commit()
    with pytest.raises(ValueError, match="position"):
        session.steps.edit_draft(4, 5)
    with pytest.raises(ValueError, match="token id"):
        session.steps.edit_draft(1, tiny_pair.vocab_size)
    assert session.phase == "verify"
    session.verify()
    with pytest.raises(PhaseError):
        session.steps.edit_draft(1, 5)
    session.commit()
    assert session.phase == "propose"


def test_make_position_one_wrong_discards_gamma_minus_one(self_pair):
    gamma = 5
    session = SpeculativeSession(self_pair, PROMPTS[1], SessionConfig(gamma=gamma))
    proposed = session.propose()
    y1 = proposed.drafted[0].id
    wrong = (y1 + 1) % self_pair.vocab_size
    edit = session.steps.edit_draft(1, wrong)
    assert edit.drafted[0].id == wrong and edit.edited_positions == (1,)
    assert edit.reproposed and edit.draft_forwards == gamma - 1
    verify = session.verify()
    assert verify.accepted == 0 and verify.kind == "correction"
    assert verify.next_token.id == y1  # the target's argmax replaces the wrong token
    assert [c.status for c in verify.checks] == ["rejected"] + ["discarded"] * (gamma - 1)
    assert verify.checks[0].edited
    commit = session.commit()
    assert len(commit.discarded) == gamma and [t.id for t in commit.appended] == [y1]
    assert sum(r.state == "discarded" for r in commit.kv_before.rows) == gamma - 1


def test_edited_token_is_one_hot_and_accepted_with_p(tiny_pair):
    config = SessionConfig(gamma=3, temperature=1.0, seed=3)
    session = SpeculativeSession(tiny_pair, PROMPTS[0], config)
    session.propose()
    session.steps.edit_draft(1, 42)
    verify = session.verify()
    check = verify.checks[0]
    assert check.q == 1.0 and check.accept_prob == pytest.approx(check.p, abs=1e-7)


def test_edit_without_repropose_keeps_later_drafts(tiny_pair):
    config = SessionConfig(gamma=4, temperature=1.0, seed=5, repropose_after_edit=False)
    session = SpeculativeSession(tiny_pair, PROMPTS[0], config)
    proposed = [t.id for t in session.propose().drafted]
    edit = session.steps.edit_draft(2, 7)
    assert [t.id for t in edit.drafted] == [proposed[0], 7, *proposed[2:]]
    assert edit.draft_forwards == 0
    assert edit.kv_after.draft_kv_len == len(session.ids) + 1  # cropped to the kept prefix


def test_same_seed_same_trace(tiny_pair):
    config = SessionConfig(gamma=4, temperature=0.9, top_k=50, top_p=0.95, seed=11)

    def run():
        s = SpeculativeSession(tiny_pair, PROMPTS[0], config)
        s.run(max_rounds=6)
        return s

    a, b = run(), run()
    assert a.ids == b.ids
    for ra, rb in zip(a.history, b.history, strict=True):
        assert [c.u for c in ra.verify.checks] == [c.u for c in rb.verify.checks]
        assert ra.commit.appended == rb.commit.appended
    other = SpeculativeSession(tiny_pair, PROMPTS[0], dataclasses.replace(config, seed=12))
    other.run(max_rounds=6)
    assert other.ids != a.ids


def test_trace_json_round_trip(tiny_pair):
    session = SpeculativeSession(tiny_pair, PROMPTS[0], SessionConfig(gamma=3, temperature=1.0))
    session.propose()
    session.steps.edit_draft(2, 9)
    session.verify()
    session.commit()
    trace = session.history[0]
    data = json.loads(json.dumps(to_jsonable(trace)))
    back = from_jsonable(RoundTrace, data)
    assert back.commit == trace.commit and back.propose.kv_after == trace.propose.kv_after
    assert back.verify.checks[0].dist.p.tolist() == pytest.approx(
        trace.verify.checks[0].dist.p.tolist()
    )
    assert back.edits[0].new_token.id == 9


def test_verify_trace_values(tiny_pair):
    session = SpeculativeSession(
        tiny_pair, PROMPTS[0], SessionConfig(gamma=4, temperature=1.0, seed=2)
    )
    prompt_len = len(session.ids)
    propose = session.propose()
    assert propose.kv_before.target_kv_len == 0 and propose.kv_after.draft_kv_len == prompt_len + 3
    verify = session.verify()
    assert verify.target_forward_tokens == prompt_len + 4  # whole prompt + γ drafts at once
    assert verify.kv_after.target_kv_len == prompt_len + 4
    for c in verify.checks:
        if c.status != "discarded":
            assert c.u is not None
            assert (c.status == "accepted") == (c.u < c.accept_prob)
        assert c.accept_prob == pytest.approx(min(1.0, c.p / c.q), rel=1e-6)
        d = c.dist
        assert d.p.sum() + d.p_other == pytest.approx(1.0, abs=1e-5)
        assert d.min_pq.sum() + d.min_other == pytest.approx(c.overlap, abs=1e-5)
        assert c.token.id in d.token_ids.tolist()
    commit = session.commit()
    after = commit.kv_after
    assert after.committed_len == prompt_len + verify.accepted + 1
    assert after.target_kv_len == after.committed_len - 1
    assert commit.rolled_back_target == 4 - verify.accepted


def test_commit_starts_from_the_verified_kv_table_and_one_context(tiny_pair):
    # commit's kv_before is verify's kv_after: the table at phase commit, computed afresh
    config = SessionConfig(gamma=3, temperature=1.0, seed=5, repetition_penalty=1.3)
    session = SpeculativeSession(tiny_pair, PROMPTS[0], config)
    ctx = session.steps.ctx
    for _ in range(3):
        session.propose()
        verify = session.verify()
        fresh = session.kv_state(list(session.current_record.statuses))
        assert fresh == verify.kv_after
        statuses = list(session.current_record.statuses)
        assert [r.state for r in fresh.rows][-len(statuses) :] == statuses
        assert session.commit().kv_before == fresh
    assert session.steps.ctx is ctx  # built once, read by every step of every round
    assert ctx.target is session.target and ctx.processors is session.processors


@pytest.mark.parametrize(("prompt", "message"), [("", "empty"), ("To be " * 40, "at most 23")])
def test_bad_prompts(tiny_dirs, prompt, message):
    from specdec_core.core.models import load_pair

    pair = load_pair((tiny_dirs["short"], tiny_dirs["draft"]), allow_custom=True)
    with pytest.raises(PromptError, match=message):
        SpeculativeSession(pair, prompt)


@pytest.mark.parametrize(
    "changes",
    [
        {"gamma": 0},
        {"gamma": -1},
        {"gamma": 17},
        {"temperature": -1.0},
        {"top_p": 0.0},
        {"top_k": 10**6},
        {"max_new_tokens": 0},
        {"draft_method": "beam"},
    ],
)
def test_bad_config(tiny_pair, changes):
    with pytest.raises(ConfigError):
        SpeculativeSession(tiny_pair, PROMPTS[0], SessionConfig(**changes))


def test_stop_at_max_new_tokens_inside_a_round(self_pair):
    session = SpeculativeSession(self_pair, PROMPTS[0], SessionConfig(gamma=4, max_new_tokens=7))
    rounds = session.run()
    assert len(session.generated_ids) == 7 and session.stop_reason == "max_new_tokens"
    assert [r.propose.gamma for r in rounds] == [4, 1]  # γ shrinks to what is left


def test_stop_at_context_limit(tiny_dirs):
    from specdec_core.core.models import load_pair

    pair = load_pair((tiny_dirs["short"], tiny_dirs["short"]), allow_custom=True)
    session = SpeculativeSession(pair, PROMPTS[0], SessionConfig(gamma=8, max_new_tokens=100))
    session.run()
    assert session.stop_reason == "context_limit" and len(session.ids) == pair.context_length
    assert session.phase == "finished"
    with pytest.raises(PhaseError, match="finished"):
        session.propose()


def test_stop_string_and_eos_cut_commit(self_pair):
    plain = SpeculativeSession(self_pair, PROMPTS[0], SessionConfig(gamma=6, max_new_tokens=12))
    plain.run()
    target_ids = plain.generated_ids
    stop_text = self_pair.tokenizer.decode(target_ids[:3])
    s = SpeculativeSession(
        self_pair, PROMPTS[0], SessionConfig(gamma=6, max_new_tokens=12, stop_strings=(stop_text,))
    )
    first = s.run_round()
    assert s.stop_reason == "stop_string" and first.commit.kind == "stopped"
    assert stop_text in s.text and len(s.generated_ids) <= 3
    # EOS: pretend the 2nd generated token is the end-of-text token
    eos_pair = dataclasses.replace(self_pair, eos_token_id=target_ids[1])
    s2 = SpeculativeSession(eos_pair, PROMPTS[0], SessionConfig(gamma=6, max_new_tokens=12))
    s2.run()
    assert s2.stop_reason == "eos" and s2.generated_ids == target_ids[:2]


def test_a_continued_session_keeps_the_original_prompt_boundary(tiny_pair):
    first = SpeculativeSession(tiny_pair, "First Citizen:", SessionConfig(max_new_tokens=12))
    first.run(max_rounds=2)
    done = len(first.generated_ids)
    again = SpeculativeSession(
        tiny_pair, first.ids, SessionConfig(gamma=2, max_new_tokens=12), prompt_len=first.prompt_len
    )
    assert again.generated_ids == first.generated_ids and again.prompt_len == first.prompt_len
    again.run()
    assert len(again.generated_ids) == 12 and again.ids[: len(first.ids)] == first.ids
    assert done < 12
    for bad in (0, len(first.ids) + 1, "3", True):
        with pytest.raises(InputError):
            SpeculativeSession(tiny_pair, first.ids, prompt_len=bad)
