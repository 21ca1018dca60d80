"""``engine/chain/state.py``: the chain session's views at each phase of a round on the
self pair (draft == target, greedy: every unedited draft is accepted), with an edit at
position 2 to the target's second choice, so the statuses are known exactly."""

from __future__ import annotations

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession

PROMPT = "First Citizen:\nWe are"


def test_views_through_one_round(self_pair):
    s = SpeculativeSession(self_pair, PROMPT, SessionConfig(gamma=3, max_new_tokens=20))
    committed = list(s.ids)
    assert (
        s.steps.drafts,
        s.steps.current_statuses(),
        s.current_record,
        s.steps.current_verify,
    ) == (
        [],
        None,
        None,
        None,
    )
    assert (s.steps.current_edits, s.steps.current_draft_dists, s.steps.rng_state()) == ((), (), [])
    assert (s.steps.current_propose, s.steps.current_gamma, s.steps.edited_positions) == (
        None,
        None,
        set(),
    )
    kv = s.kv_state()
    assert kv.committed_len == len(committed) == len(kv.rows)
    assert {r.state for r in kv.rows} == {"prompt"}

    proposed = s.propose()
    assert s.steps.current_gamma == 3 and s.steps.current_propose is proposed
    assert s.steps.drafts == [t.id for t in proposed.drafted] and len(s.steps.drafts) == 3
    assert s.steps.current_draft_dists == proposed.draft_dists and s.steps.rng_state() != []
    assert [r.state for r in s.kv_state().rows[-3:]] == ["tentative"] * 3
    assert [r.token_id for r in s.kv_state().rows] == committed + s.steps.drafts

    second = s.steps.target_preview(top_n=2)[1][1].id
    assert second != s.steps.drafts[1]
    edit = s.steps.edit_draft(2, second)
    assert s.steps.current_edits == (edit,) and s.steps.current_draft_dists == edit.draft_dists
    assert s.steps.edited_positions == {2} and s.steps.drafts[1] == second

    verified = s.verify()
    assert s.steps.current_verify is verified and s.phase == "commit"
    statuses = ["accepted", "rejected", "discarded"]
    assert s.steps.current_statuses() == statuses
    assert s.current_record is not None and list(s.current_record.statuses) == statuses
    assert [r.state for r in s.kv_state(statuses).rows[-3:]] == statuses
    assert [c.edited for c in verified.checks] == [False, True, False]

    done = s.commit()
    assert done.discarded == tuple(s.token(t) for t in s.history[0].record.drafted[1:])
    assert done.cut == () and done.kind == "correction"
    assert (
        s.steps.drafts,
        s.steps.current_statuses(),
        s.steps.current_edits,
        s.steps.rng_state(),
    ) == ([], None, (), [])
    assert s.records == (s.history[0].record,)
    assert s.ids == committed + [s.history[0].record.drafted[0], verified.next_token.id]
    assert s.generated_ids == s.ids[len(committed) :]
