"""The step chart under block verification: at the position where the next token was
resampled, the excess row is the block residual ``r_τ = norm([p′_τ · p − q]+)`` the rule
drew from (labelled with its weight, en and zh), not token-wise's ``[p − q]+``; anywhere
else, and in a token-wise round, the chart is unchanged. The live class's frame of that
position carries the same residual and weight."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import open_app

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.link import LessonState, encode
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.step import distribution_option
from specdec_core.ui.i18n import in_language
from specdec_core.ui.live.frame_cache import dist_from_json
from specdec_core.ui.live.frames import chain_frame
from specdec_core.ui.step.block_checks import residual_chart
from specdec_core.ui.step.view import _labels

PROMPT = "ROMEO:"


def _second_round(pair, verification: str) -> SpeculativeSession:
    """Seed 26, γ = 4, T = 1: round 1 verified (block: τ = 1 kept, p′_1 ≈ 0.951 < 1 with
    the int8 draft model; 0.939 with its float32 weights)."""
    config = SessionConfig(
        gamma=4, temperature=1.0, seed=26, max_new_tokens=16, verification=verification
    )
    session = SpeculativeSession(pair, PROMPT, config)
    session.propose()
    session.verify()
    session.commit()
    session.propose()
    session.verify()
    return session


def _column(option: dict, key: str) -> dict[str, float]:
    """The option's bars of series ``key``: token label → value."""
    dims = option["dataset"]["dimensions"]
    col = dims.index(key)
    return {row[1]: row[col] for row in option["dataset"]["source"]}


@pytest.fixture(scope="module")
def block_session(embedded_pair):
    return _second_round(embedded_pair, "block")


def test_the_chart_draws_the_block_residual_at_the_resampled_position(block_session):
    shown = block_session.steps.current_verify
    block = shown.block
    assert block is not None and block.kept == 1 and block.resample_position == 2
    weight = block.weights[0]
    assert weight == pytest.approx(0.9513, abs=1e-4)  # p′_τ < 1: r_τ is not token-wise's
    pos, correction = 2, shown.next_token.id
    c = shown.checks[pos - 1]
    with in_language("en"):
        labels = _labels()
        dist, words, keep = residual_chart(c.dist, labels, block, pos, correction)
    # the drawn row is the record's residual: its top tokens with their probabilities
    assert keep == block.residual_ids
    drawn = dict(zip(dist.token_ids.tolist(), dist.excess.tolist(), strict=True))
    for tid, prob in zip(block.residual_ids, block.residual_probs, strict=True):
        assert drawn[tid] == pytest.approx(prob, abs=1e-5)
    assert dist.excess_other == pytest.approx(1.0 - float(dist.excess.astype(float).sum()))
    # … and not token-wise's normalised residual norm([p − q]+)
    tw = c.dist.excess.astype(float) / (c.dist.excess.astype(float).sum() + c.dist.excess_other)
    assert float(np.abs(tw - dist.excess.astype(float)).max()) > 0.02
    assert words["excess"] == "r = norm([p′·p − q]+) — block residual, p′ = 0.9513"
    option = distribution_option(
        dist, words, "t", marked_id=c.token.id, correction_id=correction, keep_ids=keep
    )
    bars = _column(option, "excess")
    shown = [block_session.token(i) for i in block.residual_ids]
    assert [bars[visible_token(x)] for x in shown] == pytest.approx(block.residual_probs, abs=1e-5)
    assert words["excess"] in [s["name"] for s in option["series"]]
    assert (
        "r = " in option["title"][0]["subtext"]
        and "[p − q]+ =" not in option["title"][0]["subtext"]
    )
    with in_language("zh"):
        _, zh, _ = residual_chart(c.dist, _labels(), block, pos, correction)
    assert zh["excess"] == "r = norm([p′·p − q]+) — 块残差，p′ = 0.9513"


def test_other_positions_are_unchanged(block_session):
    shown = block_session.steps.current_verify
    c = shown.checks[0]  # the kept draft: no resample there
    labels = _labels()
    assert residual_chart(c.dist, labels, shown.block, 1, None) == (c.dist, labels, ())
    dist, _, keep = residual_chart(c.dist, labels, shown.block, 1, shown.next_token.id)
    assert dist is c.dist and keep == ()  # a correction id at a position that is not τ + 1


def test_a_token_wise_round_still_draws_p_minus_q(embedded_pair):
    session = _second_round(embedded_pair, "token")
    shown = session.steps.current_verify
    assert shown.block is None and shown.kind == "correction"
    pos = shown.accepted + 1
    c = shown.checks[pos - 1]
    labels = _labels()
    dist, words, keep = residual_chart(c.dist, labels, None, pos, shown.next_token.id)
    assert dist is c.dist and words is labels and keep == ()
    option = distribution_option(dist, words, "t", correction_id=shown.next_token.id)
    assert "[p − q]+ — residual before normalising" in [s["name"] for s in option["series"]]
    bars = _column(option, "excess")
    excess = {visible_token(x): float(v) for x, v in zip(c.dist.tokens, c.dist.excess, strict=True)}
    assert len(bars) >= 8 and max(bars.values()) > 0
    assert bars == pytest.approx({name: excess[name] for name in bars})  # [p − q]+ as traced


def test_the_live_frame_carries_the_residual(block_session):
    shown = block_session.steps.current_verify
    block = shown.block
    frame = chain_frame(block_session, selected=2)
    chart = frame["chart"]
    assert chart["pos"] == 2 and chart["residual_weight"] == pytest.approx(block.weights[0])
    dist = dist_from_json(chart["dist"])
    drawn = dict(zip(dist.token_ids.tolist(), dist.excess.tolist(), strict=True))
    assert drawn[block.residual_ids[0]] == pytest.approx(block.residual_probs[0], abs=1e-5)
    assert chain_frame(block_session, selected=1)["chart"]["residual_weight"] is None


@pytest.mark.parametrize(
    ("lang", "legend", "says"),
    [
        ("en", "block residual, p′ = 0.9513", "drawn from the block residual norm([p′·p − q]+)"),
        ("zh", "块残差，p′ = 0.9513", "从块残差 norm([p′·p − q]+) 中抽取"),
    ],
)
def test_the_step_page_says_where_the_correction_came_from(embedded_pair, lang, legend, says):
    """The page of that round (a lesson link): the chart's legend names the block residual
    and its weight, and the verdict line says the token came from it (en and zh)."""
    state = LessonState(
        lang=lang,
        temperature=1.0,
        seed=26,
        max_new_tokens=16,
        prompt=PROMPT,
        round=1,
        phase="commit",
        verification="block",
    )
    at = open_app(encode(state), lang=lang)
    charts = at.get("echarts_chart")
    names = [s["name"] for c in charts for s in json.loads(c.proto.spec)["series"]]
    assert any(name.endswith(legend) for name in names), names
    assert any(says in w.value for w in at.warning), [w.value for w in at.warning]
    # the line under the chart is the block test (p′, h, u), token-wise's a beside it
    rule = {"en": "(block rule: the longest prefix whose u < h is kept", "zh": "（块验证：保留满足"}
    lines = [m.value for m in at.markdown if m.value.startswith("p(y) = ")]
    assert lines and all(rule[lang] in line and "h = " in line for line in lines), lines
    # τ = 1 of γ = 4: positions 3 and 4 are discarded, their u tested by the backward test
    from conftest import html_tables

    verdicts = list(html_tables(at, "checks-table")[0].iloc[:, -1])
    tested = {"en": "discarded (after the kept prefix: its u was tested", "zh": "它的 u 已检验"}
    assert [tested[lang] in v for v in verdicts] == [False, False, True, True], verdicts


def _follower_chart(frame_text: str) -> None:
    import json

    from specdec_core.ui.live import frame_view

    frame_view._chart(json.loads(frame_text))


def test_the_follower_names_the_block_residual(block_session):
    """A follower draws the frame's residual row under the block residual's name."""
    from streamlit.testing.v1 import AppTest

    frame = chain_frame(block_session, selected=2)
    at = AppTest.from_function(_follower_chart, args=(json.dumps(frame),), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    [chart] = at.get("echarts_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["series"][-1]["name"] == "r = norm([p′·p − q]+) — block residual, p′ = 0.9513"
    block = block_session.steps.current_verify.block
    drawn = {row[1] for row in spec["dataset"]["source"]}
    assert {visible_token(block_session.token(i)) for i in block.residual_ids} <= drawn
