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
    assert (s.drafts, s.current_statuses(), s.current_record, s.current_verify) == (
        [],
        None,
        None,
        None,
    )
    assert (s.current_edits, s.current_draft_dists, s.rng_state()) == ((), (), [])
    assert (s.current_propose, s.current_gamma, s.edited_positions) == (None, None, set())
    kv = s.kv_state()
    assert kv.committed_len == len(committed) == len(kv.rows)
    assert {r.state for r in kv.rows} == {"prompt"}

    proposed = s.propose()
    assert s.current_gamma == 3 and s.current_propose is proposed
    assert s.drafts == [t.id for t in proposed.drafted] and len(s.drafts) == 3
    assert s.current_draft_dists == proposed.draft_dists and s.rng_state() != []
    assert [r.state for r in s.kv_state().rows[-3:]] == ["tentative"] * 3
    assert [r.token_id for r in s.kv_state().rows] == committed + s.drafts

    second = s.target_preview(top_n=2)[1][1].id
    assert second != s.drafts[1]
    edit = s.edit_draft(2, second)
    assert s.current_edits == (edit,) and s.current_draft_dists == edit.draft_dists
    assert s.edited_positions == {2} and s.drafts[1] == second

    verified = s.verify()
    assert s.current_verify is verified and s.phase == "commit"
    statuses = ["accepted", "rejected", "discarded"]
    assert s.current_statuses() == statuses
    assert s.current_record is not None and list(s.current_record.statuses) == statuses
    assert [r.state for r in s.kv_state(statuses).rows[-3:]] == statuses
    assert [c.edited for c in verified.checks] == [False, True, False]

    done = s.commit()
    assert done.discarded == tuple(s.token(t) for t in s.history[0].record.drafted[1:])
    assert done.cut == () and done.kind == "correction"
    assert (s.drafts, s.current_statuses(), s.current_edits, s.rng_state()) == ([], None, (), [])
    assert s.records == (s.history[0].record,)
    assert s.ids == committed + [s.history[0].record.drafted[0], verified.next_token.id]
    assert s.generated_ids == s.ids[len(committed) :]
