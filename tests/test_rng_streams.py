"""An edit never reaches backwards. Each round draws from two seeded streams of
its own (``rounds.round_stream``): drafting (and re-drafting after an edit) and
verification (each ``u_i``, the correction/bonus draw; the tree walk), so an edit at
position ``k`` leaves ``u_1..u_{k−1}`` and their verdicts as they were."""

from __future__ import annotations

import pytest
import torch
from conftest import run_json

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.rounds import STREAM_KEYS, round_stream, stream_seed
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LINK_VERSION, LessonState, decode, encode
from specdec_core.lessons.replay import replay, timeless_json

PROMPT = "ROMEO:\nBut soft, what light"
GAMMA = 5
SEEDS = (0, 1, 7, 12)


def _checks(session: SpeculativeSession) -> list[tuple[float | None, str]]:
    return [(c.u, c.status) for c in session.verify().checks]


def _edited_round(pair, config: SessionConfig, k: int | None) -> list[tuple[float | None, str]]:
    """Round 1's checks, with position ``k`` edited (or not)."""
    session = SpeculativeSession(pair, PROMPT, config)
    session.propose()
    if k is not None:
        session.steps.edit_draft(k, (session.steps.drafts[k - 1] + 1) % pair.vocab_size)
    return _checks(session)


@pytest.mark.parametrize("pair_name", ["embedded_pair", "tiny_pair"])
@pytest.mark.parametrize("seed", SEEDS)
def test_an_edit_at_k_leaves_the_draws_and_verdicts_before_k(request, pair_name, seed):
    pair = request.getfixturevalue(pair_name)
    config = SessionConfig(gamma=GAMMA, temperature=1.0, seed=seed, max_new_tokens=30)
    plain = _edited_round(pair, config, None)
    assert len(plain) == GAMMA and plain[0][0] is not None  # u_1 is always drawn
    for k in range(1, GAMMA + 1):
        edited = _edited_round(pair, config, k)
        assert edited[: k - 1] == plain[: k - 1], f"an edit at {k} changed an earlier check"
        assert edited[0][0] == plain[0][0]  # u_1 never moves (k = 1 edits position 1 itself)


def test_the_cli_edit_of_the_issue_leaves_position_1(capsys, embedded_pair):
    """`--edit 1:3=12` re-drafts position 4; it changed round 1 position 1's u from 0.6361
    to 0.3049 while one generator served every draw."""
    args = (
        "run",
        "--pair",
        "embedded",
        "--prompt",
        "ROMEO:\nBut soft",
        "--temperature",
        "0.8",
        "--top-k",
        "50",
        "--top-p",
        "0.95",
        "--seed",
        "1",
        "--json",
    )
    plain = run_json(capsys, *args)["rounds"][0]
    edited = run_json(capsys, *args, "--edit", "1:3=12")["rounds"][0]
    assert edited["drafted"][:2] == plain["drafted"][:2] and edited["drafted"][2] == 12
    assert edited["drafted"][3] != plain["drafted"][3]  # re-drafted from the edit
    assert edited["checks"][0]["u"] == plain["checks"][0]["u"] == pytest.approx(0.5967, abs=1e-4)
    assert edited["checks"][0]["status"] == plain["checks"][0]["status"] == "rejected"


def test_streams_are_derived_from_seed_round_and_name():
    # the documented mix: fixed numbers (a change would change every sampled replay)
    assert stream_seed(0, 0, "draft") == 2558736989570252433
    assert stream_seed(0, 0, "verify") == 3400964856525257824
    assert STREAM_KEYS == {"draft": 0, "verify": 1}
    seeds = {stream_seed(s, r, n) for s in range(4) for r in range(50) for n in STREAM_KEYS}
    assert len(seeds) == 4 * 50 * 2  # every (seed, round, stream) its own stream
    a, b = round_stream(3, 2, "verify"), round_stream(3, 2, "verify")
    assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b))
    with pytest.raises(KeyError):
        round_stream(0, 0, "bonus")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        round_stream(-1, 0, "draft")


def _first_u(seed: int, round_index: int) -> float:
    return torch.rand((), generator=round_stream(seed, round_index, "verify")).item()


def test_the_fast_path_uses_the_same_streams(embedded_pair):
    config = SessionConfig(gamma=4, temperature=0.9, top_k=40, seed=3, max_new_tokens=24)
    session = SpeculativeSession(embedded_pair, PROMPT, config)
    session.run_round()
    session.propose()
    assert session.verify().checks[0].u == _first_u(3, 1)  # u_1: the stream's first draw
    session.commit()
    session.run()
    run = generate(embedded_pair, PROMPT, config)
    assert run.records == session.records and run.output_ids == session.generated_ids


def test_tree_rounds_use_the_same_streams(embedded_pair):
    config = SessionConfig(temperature=1.0, seed=4, max_new_tokens=16)
    session = TreeSession(embedded_pair, PROMPT, config, None, (2, 2, 1))
    session.run_round()
    session.propose()
    view = session.verify().tree
    assert view.nodes[0].u == _first_u(4, 1)  # the walk's first draw: the root's 1st child
    session.commit()
    session.run()
    run = generate_tree(embedded_pair, PROMPT, config, (2, 2, 1))
    assert run.records == session.records


def test_greedy_makes_no_draw(embedded_pair):
    """Temperature 0 draws nothing (so a v=1 greedy link replays the same moment): the
    seed changes nothing, edits and tree rounds included."""

    def chain(seed: int) -> str:
        config = SessionConfig(gamma=4, temperature=0.0, seed=seed, max_new_tokens=20)
        session = SpeculativeSession(embedded_pair, PROMPT, config)
        session.run_round()
        session.propose()
        session.steps.edit_draft(2, 12)
        session.verify()
        session.commit()
        session.run()
        return timeless_json(session.history)

    def tree(seed: int):
        config = SessionConfig(temperature=0.0, seed=seed, max_new_tokens=12)
        return generate_tree(embedded_pair, PROMPT, config, (2, 1)).records

    assert chain(0) == chain(987_654_321)
    assert tree(0) == tree(55)


def _v1(state: LessonState) -> dict[str, str]:
    return {**encode(state), "v": "1"}


def test_old_links_open_greedy_ones_as_they_were(embedded_pair):
    assert LINK_VERSION == 2 and encode(LessonState())["v"] == "2"
    greedy = LessonState(prompt=PROMPT, round=2, phase="commit", edits=((2, 1, 12),))
    state, problems = decode(_v1(greedy), ["embedded"])
    assert (state, problems) == (greedy, [])
    assert timeless_json(replay(embedded_pair, state).session.history) == timeless_json(
        replay(embedded_pair, greedy).session.history
    )


def test_an_old_sampled_link_opens_with_one_message():
    sampled = LessonState(prompt=PROMPT, temperature=1.0, seed=3, round=1, phase="verify")
    state, problems = decode(_v1(sampled), ["embedded"])
    assert state == sampled and [p.code for p in problems] == ["old_rng"]
    assert decode(encode(sampled), ["embedded"]) == (sampled, [])  # a v=2 link: no message
    state, problems = decode({**encode(sampled), "v": "3"}, ["embedded"])
    assert [p.code for p in problems] == ["version"]


def test_a_failed_re_draft_leaves_the_drafting_stream_as_it_was(embedded_pair, monkeypatch):
    config = SessionConfig(gamma=4, temperature=1.0, seed=6, max_new_tokens=20)
    reference = SpeculativeSession(embedded_pair, PROMPT, config)
    reference.propose()
    expected = reference.steps.edit_draft(2, 12).drafted
    session = SpeculativeSession(embedded_pair, PROMPT, config)
    session.propose()
    before = session.steps.rng_state()
    assert before  # the pending round keeps its drafting stream

    def draw_then_fail(context, gamma, sampling, method, generator, processors=None, conf=None):
        torch.rand(7, generator=generator)  # the stream moves, then the drafter fails
        raise RuntimeError("drafter failed")

    monkeypatch.setattr(session.drafter, "propose", draw_then_fail)
    with pytest.raises(RuntimeError):
        session.steps.edit_draft(2, 12)
    monkeypatch.undo()
    assert session.steps.rng_state() == before
    assert session.steps.edit_draft(2, 12).drafted == expected  # the same re-draft as untouched
