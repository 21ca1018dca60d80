"""``engine/chain/edits.py``: previews and quick edits on plain data (the pair, committed
ids, drafts, ``q`` rows, sampling), checked against a fresh forward of the target, and the
session's quick edits on the embedded pair: greedy verification accepts every draft after
"make the drafts agree" and rejects exactly the position "make it wrong" changed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from specdec_core.core.errors import InputError, PhaseError
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, one_hot
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain import edits
from specdec_core.engine.chain.round import Checked
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.rules.acceptance import Verdict

PROMPT = "ROMEO:\nBut soft, what light"


def fresh_logits(pair, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return pair.target(input_ids=torch.tensor([ids])).logits[0].float()


def test_edits_imports_no_session():
    tree = ast.parse(Path(edits.__file__).read_text(encoding="utf-8"))
    modules = [
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    ]
    # the round's records and traces only (its ``Checked`` for annotations): no round,
    # session, state or machine at run time
    engine = {m for m in modules if m.startswith("specdec_core.engine")}
    chain = "specdec_core.engine.chain."
    assert engine == {chain + "records", chain + "trace", chain + "round"}
    runtime = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("specdec_core.engine")
    ]
    assert sorted(runtime) == [chain + "records", chain + "trace"]


@pytest.mark.parametrize("bad", [0, 4, -1, True, 1.0, "2", None])
def test_check_position_refuses_all_but_1_to_gamma(bad):
    with pytest.raises(InputError) as err:
        edits.check_position(bad, 3)
    assert err.value.code == "edit_position" and err.value.params == {"gamma": 3}


@pytest.mark.parametrize("bad", [-1, 50, True, 2.0, "7"])
def test_check_token_id_refuses_all_but_0_to_vocab(bad):
    with pytest.raises(InputError) as err:
        edits.check_token_id(bad, 50)
    assert err.value.code == "edit_token_id" and err.value.params == {"vocab": 50}
    edits.check_token_id(0, 50)
    edits.check_token_id(49, 50)


def test_target_top_ids_are_the_fresh_forwards_topk(embedded_pair):
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    drafts = [pair.tokenizer.encode(" is")[0], pair.tokenizer.encode(" the")[0], 5]
    top = edits.target_top_ids(pair, committed, drafts, top_n=3)
    logits = fresh_logits(pair, committed + drafts)
    # row i: the target's prediction for draft i+1, made at the token before it
    want = [torch.topk(logits[len(committed) - 1 + i], 3).indices.tolist() for i in range(3)]
    assert top == want
    assert edits.target_top_ids(pair, committed, [], top_n=3) == []


def test_accept_preview_is_min_1_p_over_q(embedded_pair):
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    drafts = [7, 11]
    vocab = pair.vocab_size
    q_rows = torch.full((2, vocab), 1.0 / vocab)
    q_rows[1] = one_hot(torch.tensor([11]), vocab)[0]  # an edited position: a = p(y)
    sampling = SamplingConfig(temperature=1.0)
    got = edits.accept_preview(pair, committed, drafts, q_rows, sampling)
    p = logits_to_probs(fresh_logits(pair, committed + drafts), sampling)
    p1, p2 = float(p[len(committed) - 1, 7]), float(p[len(committed), 11])
    assert got == pytest.approx([min(1.0, p1 * vocab), p2], rel=1e-5, abs=1e-7)
    assert edits.accept_preview(pair, committed, [], q_rows[:0], sampling) == []


def test_first_mismatch_names_the_first_disagreeing_position():
    assert edits.first_mismatch([[4], [5], [6]], [4, 9, 8]) == (2, 5)
    assert edits.first_mismatch([[4], [5]], [4, 5]) is None
    assert edits.first_mismatch([], []) is None


def test_verify_slices_pick_the_rejected_row_or_the_bonus_row():
    calls = []

    def slicer(p, q, extra):
        calls.append((None if p is None else p.tolist(), q, extra))
        return ("slice", tuple(extra))

    checks = tuple(type("C", (), {"dist": f"check{i}"})() for i in range(2))
    p_rows = torch.tensor([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]])
    rejected = Verdict(1, 0, "correction", (1.0, 0.0), ())
    checked = Checked(rejected, (), 0, p_rows)
    assert edits.verify_slices([1, 1], checked, checks, slicer) == ("check1", ())
    bonus = Verdict(2, 0, "bonus", (1.0, 1.0), ())
    raw = torch.tensor([[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]])
    checked = Checked(bonus, (), 0, p_rows, raw)
    next_dist, contexts = edits.verify_slices([1, 1], checked, checks, slicer)
    assert next_dist == ("slice", (0,))
    assert contexts == (("slice", (1,)), ("slice", (1,)), ("slice", (0,)))
    assert calls[0] == ([1.0, 0.0], None, [0])  # the bonus row p_{γ+1}


def test_quick_edits_steer_greedy_verification(embedded_pair):
    config = SessionConfig(gamma=4, max_new_tokens=24, temperature=0.0)
    session = SpeculativeSession(embedded_pair, PROMPT, config)
    with pytest.raises(PhaseError):
        session.steps.target_preview()
    session.propose()
    kv = (session.target.kv_len, len(session.drafter.cached_ids() or []))
    preview = session.steps.target_preview(top_n=2)
    assert (session.target.kv_len, len(session.drafter.cached_ids() or [])) == kv
    assert [len(row) for row in preview] == [2] * len(session.steps.drafts)
    session.steps.make_draft_agree()
    greedy = [row[0].id for row in session.steps.target_preview(top_n=1)]
    assert session.steps.drafts == greedy
    verified = session.verify()
    assert verified.accepted == len(session.steps.drafts) == 4 and verified.kind == "bonus"
    session.commit()

    session.propose()
    session.steps.make_draft_agree()  # position 1 now agrees with the target's argmax
    second = session.steps.target_preview(top_n=2)[1][1].id
    trace = session.steps.make_position_wrong(2)
    assert trace.position == 2 and trace.new_token.id == second
    assert session.steps.drafts[1] == second and 2 in session.steps.edited_positions
    statuses = [c.status for c in session.verify().checks]
    assert statuses == ["accepted", "rejected"] + ["discarded"] * (len(statuses) - 2)
    with pytest.raises(InputError):
        session.steps.make_position_wrong(9)
