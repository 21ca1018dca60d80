"""``engine/session.py``: the one session class chain and tree share. Phase errors (one hint
table, the shape's word), ``run_until`` / ``run_through`` (the page's "advance to a phase"),
and the atomic step: a step that raises after it touched both caches and the drafting
stream leaves all three as they were, and running it again gives the round it would have
given."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.session import STEPS, Session
from specdec_core.engine.tree.session import TreeSession

PROMPT = "ROMEO:\nBut soft, what light"
SAMPLED = SessionConfig(gamma=3, temperature=1.0, seed=7, max_new_tokens=12)


def caches(session) -> tuple[int, int, int]:
    """Target rows as the cache itself counts them, the session's count, draft rows."""
    return (
        session.target.cache.get_seq_length(),
        session.target.kv_len,
        len(session.drafter.cached_ids() or []),
    )


def test_both_shapes_are_step_machines(embedded_pair):
    chain = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    tree = TreeSession(embedded_pair, PROMPT, SAMPLED, None, (2, 1))
    assert type(chain) is Session and type(tree) is Session  # one class, two shapes
    assert (chain.unit, tree.unit) == ("drafts", "tree")
    assert type(chain.steps).__name__ == "ChainSteps" and type(tree.steps).__name__ == "TreeSteps"
    assert chain.steps.session is chain and tree.steps.session is tree
    # a shape's own members live on its shape object, never on the session
    assert hasattr(chain.steps, "edit_draft") and not hasattr(tree.steps, "edit_draft")
    assert hasattr(tree.steps, "tree_view") and not hasattr(chain.steps, "tree_view")
    for own in ("edit_draft", "current_propose", "tree_view", "shape", "summary"):
        assert not hasattr(chain, own) and not hasattr(tree, own)
    assert chain.steps.drafts == tree.steps.drafts == []  # between rounds; a tree lists none
    assert STEPS == ("propose", "verify", "commit")
    for bad in (0, 99, 1.5, True):
        with pytest.raises(InputError):
            SpeculativeSession(embedded_pair, PROMPT, SAMPLED, prompt_len=bad)
        with pytest.raises(InputError):
            TreeSession(embedded_pair, PROMPT, SAMPLED, None, (2, 1), prompt_len=bad)


@pytest.mark.parametrize(
    ("make", "word"),
    [
        (lambda p: SpeculativeSession(p, PROMPT, SAMPLED), "drafts"),
        (lambda p: TreeSession(p, PROMPT, SAMPLED, None, (2, 1)), "tree"),
    ],
)
def test_phase_errors_name_what_comes_first(embedded_pair, make, word):
    s = make(embedded_pair)
    with pytest.raises(PhaseError, match=r"cannot verify in phase 'propose': propose first"):
        s.verify()
    with pytest.raises(PhaseError, match=r"cannot commit in phase 'propose': propose first"):
        s.commit()
    s.propose()
    with pytest.raises(PhaseError, match=rf"cannot propose in phase 'verify': verify the {word}"):
        s.propose()
    s.verify()
    with pytest.raises(PhaseError, match=r"phase 'commit': commit the verified round first"):
        s.verify()
    s.run_until("finished")
    reference = make(embedded_pair)
    reference.run()
    assert s.phase == reference.phase == "finished" and s.records == reference.records
    assert s.stop_reason == reference.stop_reason and s.stop_reason is not None
    with pytest.raises(PhaseError, match=r"generation has finished \(reset to start again\)"):
        s.propose()


@pytest.mark.parametrize("tree", [False, True])
def test_run_until_stands_at_the_phase(embedded_pair, tree):
    config = replace(SAMPLED, seed=8)  # a text long enough for three rounds of both shapes

    def make():
        if tree:
            return TreeSession(embedded_pair, PROMPT, config, None, (2, 1))
        return SpeculativeSession(embedded_pair, PROMPT, config)

    s = make()
    s.run_until("propose")  # already there: nothing runs
    assert (s.phase, s.round_index, s.history) == ("propose", 0, [])
    s.run_until("commit")
    assert (s.phase, s.round_index) == ("commit", 0)
    s.run_until("verify")  # finishes round 1, proposes round 2
    assert (s.phase, s.round_index, len(s.history)) == ("verify", 1, 1)
    s.run_until("propose")
    assert (s.phase, s.round_index) == ("propose", 2)
    with pytest.raises(ValueError, match="unknown phase"):
        s.run_until("edit")  # type: ignore[arg-type]
    s.run_until("finished")
    reference = make()
    reference.run()
    assert s.records == reference.records and s.generated_ids == reference.generated_ids
    s.run_until("verify")  # finished: nothing runs
    assert s.phase == "finished"


def test_run_through_is_the_step_button(embedded_pair):
    s = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    s.run_through("verify")  # a click on Verify in phase propose: propose + verify
    assert (s.phase, s.round_index) == ("commit", 0)
    s.run_through("verify")  # already past verify: nothing
    assert (s.phase, s.round_index) == ("commit", 0)
    s.run_through("commit")
    assert (s.phase, s.round_index) == ("propose", 1)
    s.run_through("commit")  # a whole round from propose
    assert (s.phase, s.round_index) == ("propose", 2)
    with pytest.raises(ValueError, match="unknown step"):
        s.run_through("finished")  # type: ignore[arg-type]


def test_a_failed_verify_restores_both_caches_and_reruns_the_same(embedded_pair, monkeypatch):
    reference = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    reference.run_round()
    reference.propose()
    want = reference.verify()

    s = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    s.run_round()
    s.propose()
    before, rng = caches(s), s.steps.rng_state()

    def boom(*args, **kwargs):
        raise RuntimeError("rule failed")

    monkeypatch.setattr("specdec_core.engine.chain.session.decide_round", boom)
    with pytest.raises(RuntimeError, match="rule failed"):
        s.verify()  # the target's forward ran, then the commit decision raised
    monkeypatch.undo()
    assert caches(s) == before and s.steps.rng_state() == rng and s.phase == "verify"
    got = s.verify()
    assert (got.accepted, got.next_token, got.kind) == (want.accepted, want.next_token, want.kind)
    assert [c.u for c in got.checks] == [c.u for c in want.checks]


def test_a_failed_edit_restores_the_draft_cache_and_stream(embedded_pair, monkeypatch):
    s = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    s.propose()
    drafts, before, rng = s.steps.drafts, caches(s), s.steps.rng_state()

    def boom(*args, **kwargs):
        raise RuntimeError("slices failed")

    # after the re-draft drew and ran
    monkeypatch.setattr("specdec_core.engine.chain.session.draft_slices", boom)
    with pytest.raises(RuntimeError, match="slices failed"):
        s.steps.edit_draft(1, 5)
    monkeypatch.undo()
    assert (s.steps.drafts, caches(s), s.steps.rng_state()) == (drafts, before, rng)
    first = s.steps.edit_draft(1, 5)
    again = SpeculativeSession(embedded_pair, PROMPT, SAMPLED)
    again.propose()
    assert [t.id for t in again.steps.edit_draft(1, 5).drafted] == [t.id for t in first.drafted]


def test_a_failed_tree_verify_cuts_the_tree_rows(embedded_pair, monkeypatch):
    s = TreeSession(embedded_pair, PROMPT, SAMPLED, None, (2, 2))
    s.propose()
    before = caches(s)

    def boom(*args, **kwargs):
        raise RuntimeError("walk failed")

    monkeypatch.setattr("specdec_core.engine.tree.session.walk", boom)
    with pytest.raises(RuntimeError):
        s.verify()  # the forward over every node ran first
    monkeypatch.undo()
    assert caches(s) == before and s.phase == "verify"
