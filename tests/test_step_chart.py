"""The step-through chart as an ECharts option (``distribution_option``) on real traces of
the embedded pair: the bars are the slice's values at ``shown_indices``, the drafted and
correction ticks carry ▼/★, every tooltip text is ``fmt_prob`` of its value, a log axis
gets no value ≤ 0, absent rows are absent series, the greedy T = 1 context only in greedy,
the option is plain JSON and ``st.echarts_chart`` draws it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import DistSlice, TokenInfo
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.ui.figures.common import COLORS, token_labels
from specdec_core.ui.figures.step import _legend_media, distribution_option
from specdec_core.ui.figures.step_slices import shown_indices

LABELS = {
    k: f"L-{k}"
    for k in (
        "p",
        "q",
        "min",
        "excess",
        "other",
        "probability",
        "token",
        "marked",
        "correction",
        "context",
    )
}
ROWS = (("p", "p"), ("q", "q"), ("min", "min_pq"), ("excess", "excess"))  # key, DistSlice field


def _session(pair, **cfg) -> SpeculativeSession:
    ids = pair.tokenizer.encode("ROMEO:\nBut soft")
    return SpeculativeSession(pair, ids, SessionConfig(gamma=3, **cfg))


@pytest.fixture(scope="module")
def greedy_reject(embedded_pair):
    """Greedy, the first draft made wrong: rejected at position 1 with a correction."""
    s = _session(embedded_pair)
    s.propose()
    s.steps.make_position_wrong(1)
    v = s.verify()
    assert v.accepted == 0 and v.kind == "correction"
    return v


@pytest.fixture(scope="module")
def sampled(embedded_pair):
    """T = 1: the drafts' ``q`` before Verify (``p`` None), then the verified round."""
    s = _session(embedded_pair, temperature=1.0, seed=3)
    s.propose()
    draft = (s.steps.current_draft_dists[0], s.steps.drafts[0])
    return draft, s.verify()


@pytest.fixture(scope="module")
def greedy_bonus(embedded_pair):
    """Greedy, every draft made to agree: all accepted, the bonus position has no ``q``."""
    s = _session(embedded_pair)
    s.propose()
    s.steps.make_draft_agree()
    v = s.verify()
    assert v.kind == "bonus" and v.next_dist.q is None
    return v


def _columns(option: dict) -> dict[str, list]:
    dims = option["dataset"]["dimensions"]
    return {d: [row[i] for row in option["dataset"]["source"]] for i, d in enumerate(dims)}


def _series(option: dict) -> dict[str, dict]:
    return {s["encode"]["y"]: s for s in option["series"]}


def _ticks(option: dict) -> list[str]:
    return [x if isinstance(x, str) else x["value"] for x in option["xAxis"]["data"]]


def _plain(value) -> bool:
    """Only JSON's own types (a NumPy float64 would pass ``json.dumps``: check types)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return type(value) in (str, int, float, bool, type(None))


def _check_values(option: dict, dist: DistSlice, keep: list[int], log_y: bool = False) -> None:
    """Each drawn row equals the slice at ``keep``; its texts are ``fmt_prob`` of it."""
    cols, series = _columns(option), _series(option)
    assert cols["token"] == token_labels([dist.tokens[i] for i in keep])
    for key, field in ROWS:
        row = getattr(dist, field)
        if row is None:
            assert key not in series and key not in cols
            continue
        values = [float(row[i]) for i in keep]
        expected = [None if log_y and v <= 0 else v for v in values]
        assert cols[key] == expected
        assert cols[key + "_text"] == [fmt_prob(v) for v in values]
        s = series[key]
        assert s["name"] == LABELS[key] and s["itemStyle"]["color"] == COLORS[key]
        assert s["encode"] == {"x": "tick", "y": key}
        assert "{@" + key + "_text}" in s["tooltip"]["formatter"]


def test_sampled_bars_are_the_slice_at_shown_indices(sampled):
    _, v = sampled
    c = v.checks[0]
    correction = v.next_token.id if v.accepted == 0 else None
    option = distribution_option(c.dist, LABELS, "T", c.token.id, correction)
    keep = shown_indices(c.dist, (c.token.id, correction))
    _check_values(option, c.dist, keep)
    assert [s["type"] for s in option["series"]] == ["bar"] * 4
    assert list(_series(option)) == ["p", "q", "min", "excess"]  # no greedy context
    assert all("context" not in s["name"] for s in option["series"])
    assert option["animation"] is False
    title = option["title"][0]
    assert title["text"] == "T"
    assert title["subtext"] == (
        f"L-other: p = {fmt_prob(c.dist.p_other)}, q = {fmt_prob(c.dist.q_other)}, "
        f"min(p, q) = {fmt_prob(c.dist.min_other)}, [p − q]+ = {fmt_prob(c.dist.excess_other)}"
    )
    peak = max(float(np.max(getattr(c.dist, f)[keep])) for _, f in ROWS)
    assert option["yAxis"]["type"] == "value" and option["yAxis"]["min"] == 0
    assert option["yAxis"]["max"] == pytest.approx(max(peak * 1.1, 0.05))
    assert option["yAxis"]["name"] == "L-probability"
    assert option["legend"]["bottom"] == 0 and option["grid"]["outerBoundsMode"] == "same"


def test_marked_and_correction_ticks(greedy_reject):
    v = greedy_reject
    c = v.checks[0]
    marked, correction = c.token.id, v.next_token.id
    assert marked != correction
    option = distribution_option(
        c.dist, LABELS, "T", marked, correction, context=v.context_dists[0]
    )
    ticks, names = _ticks(option), _columns(option)["token"]
    tokens = {t.id: t for t in (*c.dist.tokens, *v.context_dists[0].tokens)}
    i, j = (names.index(token_labels([tokens[tid]])[0]) for tid in (marked, correction))
    assert ticks[i] == f"▼ {names[i]}" and ticks[j] == f"★ {names[j]}"
    assert all(t == n for k, (t, n) in enumerate(zip(ticks, names, strict=True)) if k not in (i, j))
    assert _columns(option)["tick"] == ticks  # the bars stand on the marked ticks
    styled = [k for k, x in enumerate(option["xAxis"]["data"]) if isinstance(x, dict)]
    assert sorted(styled) == sorted([i, j])
    assert option["title"][1]["text"] == "▼ L-marked · ★ L-correction"


def test_greedy_context_series_only_in_greedy(greedy_reject, sampled):
    v = greedy_reject
    c, ctx = v.checks[0], v.context_dists[0]
    option = distribution_option(c.dist, LABELS, "T", c.token.id, context=ctx)
    first = option["series"][0]
    assert first["encode"]["y"] == "context" and first["name"] == "L-context"
    assert first["itemStyle"] == {
        "color": "rgba(31,119,180,0.22)",
        "borderColor": "#1f77b4",
        "borderWidth": 1,
    }
    cols = _columns(option)
    assert len(cols["token"]) > 2  # the context brings its top tokens onto the axis
    p_at = dict(zip(ctx.token_ids.tolist(), ctx.p.astype(float).tolist(), strict=True))
    names = {token_labels([t])[0]: t.id for t in (*c.dist.tokens, *ctx.tokens)}
    assert cols["context"] == [p_at.get(names[n], 0.0) for n in cols["token"]]
    assert cols["context_text"] == [fmt_prob(x) for x in cols["context"]]
    # greedy p is one-hot: 1 at the argmax, exact 0 elsewhere ("0", not "0.0000")
    assert sorted(set(cols["p"])) == [0.0, 1.0] and "0" in cols["p_text"]
    _, sv = sampled
    plain = distribution_option(sv.checks[0].dist, LABELS, "T", sv.checks[0].token.id)
    assert "context" not in _series(plain) and "context" not in _columns(plain)
    assert sv.context_dists == ()


def test_absent_rows_are_absent_series(sampled, greedy_bonus):
    (draft, draft_id), _ = sampled
    assert draft.p is None and draft.min_pq is None  # before Verify: only q
    option = distribution_option(draft, LABELS, "T", draft_id)
    assert list(_series(option)) == ["q"]
    assert option["title"][1]["text"] == "▼ L-marked"
    _check_values(option, draft, shown_indices(draft, (draft_id,)))
    assert option["title"][0]["subtext"] == f"L-other: q = {fmt_prob(draft.q_other)}"

    v = greedy_bonus
    bonus = distribution_option(
        v.next_dist, LABELS, "T", v.next_token.id, context=v.context_dists[-1]
    )
    assert list(_series(bonus)) == ["context", "p"]  # q, min, excess: None at γ + 1
    assert all(s["name"] not in ("L-q", "L-min", "L-excess") for s in bonus["series"])


def test_log_axis_gets_no_value_at_or_below_zero(greedy_reject, sampled, greedy_bonus):
    v = greedy_reject
    (draft, draft_id), sv = sampled
    cases = [
        (
            v.checks[0].dist,
            dict(
                marked_id=v.checks[0].token.id,
                correction_id=v.next_token.id,
                context=v.context_dists[0],
            ),
        ),
        (sv.checks[0].dist, dict(marked_id=sv.checks[0].token.id)),
        (draft, dict(marked_id=draft_id)),
        (greedy_bonus.next_dist, dict(marked_id=greedy_bonus.next_token.id)),
    ]
    for dist, kw in cases:
        option = distribution_option(dist, LABELS, "T", log_y=True, **kw)
        y = option["yAxis"]
        assert y["type"] == "log" and 0 < y["min"] < 1 < y["max"] < 1.2
        assert y["startValue"] == y["min"]  # bars rise from the bottom, not hang from 1
        cols, keys = _columns(option), list(_series(option))
        values = [x for key in keys for x in cols[key]]
        assert all(x is None or x > 0 for x in values)
        positive = [x for x in values if x is not None]
        assert positive and y["min"] <= min(positive)
        # a value the axis cannot show keeps its text ("0") for the record
        for key in keys:
            for x, text in zip(cols[key], cols[key + "_text"], strict=True):
                assert (x is None) == (text == "0")
        if "context" not in kw:
            keep = shown_indices(dist, (kw.get("marked_id"), kw.get("correction_id")))
            _check_values(option, dist, keep, log_y=True)


def test_tiny_values_and_html_in_tokens():
    """A value under 10⁻³ is written in scientific notation (never 0.0000); token text is
    data (escaped by Streamlit in tooltips), numeric-looking tokens stay strings."""
    toks = tuple(TokenInfo(id=i, text=t, piece=t) for i, t in enumerate(["1", "<b>", " 3"]))
    p = np.array([0.5, 1.04e-5, 0.0], dtype=np.float32)
    q = np.array([0.3, 0.2, 0.1], dtype=np.float32)
    dist = DistSlice(
        np.arange(3), toks, p, q, np.minimum(p, q), np.maximum(p - q, 0.0), 0.2, 0.4, 0.1, 0.1
    )
    option = distribution_option(dist, LABELS, "T", marked_id=2, correction_id=0)
    cols = _columns(option)
    assert cols["token"] == ["1", "<b>", "␣3"]
    assert cols["p_text"] == ["0.5000", "1.04e-5", "0"]
    assert "0.0000" not in cols["p_text"] + cols["min_text"] + cols["excess_text"]
    assert _ticks(option) == ["★ 1", "<b>", "▼ ␣3"]
    log = distribution_option(dist, LABELS, "T", log_y=True)
    assert _columns(log)["p"][2] is None and log["yAxis"]["min"] == pytest.approx(1e-6)


def test_option_is_plain_json(greedy_reject, sampled, greedy_bonus):
    v = greedy_reject
    for log_y in (False, True):
        for option in (
            distribution_option(
                v.checks[0].dist,
                LABELS,
                "T",
                v.checks[0].token.id,
                v.next_token.id,
                log_y=log_y,
                context=v.context_dists[0],
            ),
            distribution_option(sampled[1].checks[0].dist, LABELS, "T", log_y=log_y),
            distribution_option(greedy_bonus.next_dist, LABELS, "T", log_y=log_y),
        ):
            assert _plain(option)
            assert json.loads(json.dumps(option, allow_nan=False)) == option


def test_legend_media_raise_the_grid_as_the_chart_narrows():
    names = [
        "p at T = 1 (context only: the greedy rule does not use it)",
        "p (target)",
        "q (draft)",
        "min(p, q) — accept path",
        "[p − q]+ — residual before normalising",
    ]
    zh = [
        "T = 1 时的 p（仅作参考：贪心规则不使用它）",
        "p（目标）",
        "q（草稿）",
        "min(p, q) — 接受路径",
        "[p − q]+ — 归一化前的残差",
    ]
    for labels in (names, zh):
        media = _legend_media(labels)
        assert "query" not in media[0]  # the default: restored when the chart widens
        widths = [m["query"]["maxWidth"] for m in media[1:]]
        bottoms = [m["option"]["grid"]["bottom"] for m in media]
        assert widths == sorted(widths, reverse=True) and len(widths) >= 2
        assert bottoms == sorted(bottoms) and len(set(bottoms)) == len(bottoms)
    assert _legend_media(["q (draft)"]) == [{"option": {"grid": {"bottom": 36}}}]


def _chart_app(option_json: str) -> None:
    import json

    import streamlit as st

    st.echarts_chart(json.loads(option_json), height=360, key="dist_chart")


def test_st_echarts_chart_draws_the_option(greedy_reject):
    from streamlit.testing.v1 import AppTest

    v = greedy_reject
    option = distribution_option(
        v.checks[0].dist,
        LABELS,
        "T",
        v.checks[0].token.id,
        v.next_token.id,
        context=v.context_dists[0],
    )
    at = AppTest.from_function(_chart_app, args=(json.dumps(option),), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    [chart] = at.get("echarts_chart")
    spec = json.loads(chart.proto.spec)
    assert [s["name"] for s in spec["series"]] == [s["name"] for s in option["series"]]
    assert spec["dataset"]["source"] == option["dataset"]["source"]


def test_presenter_mode_makes_the_chart_text_projector_sized():
    """In presenter mode the axis and legend text stayed ≈ 10–12 px."""
    toks = tuple(TokenInfo(id=i, text=t, piece=t) for i, t in enumerate(["a", "b", "c"]))
    p = np.array([0.5, 0.3, 0.2], dtype=np.float32)
    q = np.array([0.2, 0.5, 0.3], dtype=np.float32)
    dist = DistSlice(
        np.arange(3), toks, p, q, np.minimum(p, q), np.maximum(p - q, 0.0), 0.0, 0.0, 0.0, 0.0
    )

    def sizes(option: dict) -> dict[str, int]:
        return {
            "x ticks": option["xAxis"]["axisLabel"]["fontSize"],
            "y ticks": option["yAxis"]["axisLabel"]["fontSize"],
            "y name": option["yAxis"]["nameTextStyle"]["fontSize"],
            "legend": option["legend"]["textStyle"]["fontSize"],
            "title": option["title"][0]["textStyle"]["fontSize"],
        }

    normal = sizes(distribution_option(dist, LABELS, "T", marked_id=1))
    big = distribution_option(dist, LABELS, "T", marked_id=1, presenter=True)
    assert normal == {"x ticks": 12, "y ticks": 12, "y name": 12, "legend": 12, "title": 15}
    assert sizes(big) == {"x ticks": 16, "y ticks": 16, "y name": 16, "legend": 16, "title": 20}
    assert big["title"][1]["textStyle"]["fontSize"] >= 16  # "▼ drafted · ★ correction"
    # the grid leaves room for the larger legend: more space under the bars
    assert big["grid"]["bottom"] > distribution_option(dist, LABELS, "T")["grid"]["bottom"]
    json.dumps(big)
