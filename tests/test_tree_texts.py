"""Tree mode says what the engine does: the help and introduction
describe i.i.d. siblings with the first-accepted rule (not "the top-k" and "the longest
path"), the worked bias figure is the engine's own number, a round cut by a stop draws
its cut path and its never-appended ★ as cut (with the rule's verdict in the label), the
"the appended ★ token has no KV" caption is not shown when no round follows, and lessons
chapter 5 no longer says tree drafts are "not yet" in this app."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import TEXTBOOK, click_button, start_app, strip_parts
from streamlit.testing.v1 import AppTest

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.tree.session import TreeSession
from specdec_core.rules.acceptance import node_output_distribution
from specdec_core.ui.figures.tree import STATE_COLORS, STATE_STYLE, tree_figure

REPO = Path(__file__).resolve().parents[1]
TREE = json.loads((REPO / "assets/strings/tree.json").read_text(encoding="utf-8"))
LESSONS = json.loads((REPO / "assets/strings/lessons.json").read_text(encoding="utf-8"))
WRONG = {  # claims of another algorithm (the draft's top-k at T > 0, the longest path)
    "en": ("top-k of the draft", "longest accepted", "top candidates at each node"),
    "zh": ("草稿的前 k 个", "最长的被接受", "每个节点取最可能的几个候选"),
}
LABELS = {
    k: k
    for k in [
        *STATE_STYLE,
        "root",
        "node",
        "position",
        "accept",
        "not_checked",
        "next_correction",
        "next_bonus",
    ]
}
LABELS.update(depth="d{d} p{pos}", root_tick="root {pos}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tree_strings_describe_iid_siblings_and_the_first_accepted_child(lang):
    for key, entry in TREE.items():
        for claim in WRONG[lang]:
            assert claim not in entry[lang], (key, claim)
    help_text, body = TREE["tree_mode_help"][lang], TREE["tree_rule_body"][lang]
    replacement = {"en": "with replacement", "zh": "有放回"}[lang]
    first = {"en": "first child accepted", "zh": "第一个对照当前残差分布被接受"}[lang]
    assert replacement in help_text and first in help_text
    assert replacement in body and "norm([pᵢ − q]+)" in body


def test_the_top2_bias_figure_is_the_engines_number():
    """The body's worked example: top-2 siblings under the residual rule on the textbook
    row emit [0.4, 0.6, 0] (TV 0.30), whereas i.i.d. siblings from q emit p exactly."""
    case = TEXTBOOK["distribution_cases"][0]
    p = torch.tensor(case["p"], dtype=torch.float64)
    q = torch.tensor(case["q"], dtype=torch.float64)
    top2 = torch.topk(q, 2).indices.tolist()
    out = node_output_distribution(p, q, top2)
    assert out.tolist() == pytest.approx([0.4, 0.6, 0.0], abs=1e-12)
    tv = 0.5 * float((out - p).abs().sum())
    assert tv == pytest.approx(0.30, abs=1e-12)
    iid = sum(
        q[a] * q[b] * node_output_distribution(p, q, [a, b]) for a in range(3) for b in range(3)
    )
    assert iid.tolist() == pytest.approx(case["p"], abs=1e-12)
    for lang in ("en", "zh"):
        body = TREE["tree_rule_body"][lang]
        assert f"p = {case['p']}".replace("'", "") in body
        assert f"q = {case['q']}" in body
        assert "[0.4, 0.6, 0]" in body and f"{tv:.2f}" in body


def _stopped_round(pair) -> TreeSession:
    """ROMEO: greedy, shape 2,2,1,1: the accepted path is "\\n", "I", "'ll", " be" and the
    leaf's bonus; the stop string "I'll" ends the text after the path's third node."""
    config = SessionConfig(stop_strings=("I'll",))
    session = TreeSession(pair, "ROMEO:", config, "model", (2, 2, 1, 1), 12)
    session.propose()
    session.verify()
    return session


def test_a_stopped_round_draws_its_cut_path_and_star_as_cut(embedded_pair):
    session = _stopped_round(embedded_pair)
    view, record = session.steps.tree_view(), session.current_record
    assert record.kind == "stopped" and view.next_kind == "bonus" and not view.next_appended
    cut = [i for i in view.path if view.nodes[i].state == "cut"]
    kept = [i for i in view.path if view.nodes[i].state == "accepted"]
    assert len(kept) == 3 and len(cut) == 1 and len(record.appended) == 3
    fig = tree_figure(view, session.token(session.ids[-1]), LABELS)
    lines = [tr for tr in fig.data if tr.mode == "lines"]
    green = [tr for tr in lines if tr.line.color == "#16a34a"]
    [path_edges] = green
    assert list(path_edges.x).count(None) == len(kept)  # one segment per committed node
    [dashed] = [tr for tr in lines if tr.line.dash == "dash"]
    assert list(dashed.x).count(None) == len(cut)
    assert dashed.x[1] == view.nodes[cut[0]].depth
    [star] = [a for a in fig.layout.annotations if a.text.lstrip("<b>").startswith("★")]
    fill, border, _ = STATE_COLORS["cut"]
    assert (star.bgcolor, star.bordercolor) == (fill, border)
    assert not star.text.startswith("<b>")  # bold only for an appended ★
    legend = [tr.name for tr in fig.data if tr.showlegend is not False and tr.name]
    assert "bonus_cut" in legend and "bonus" not in legend and "correction" not in legend
    hover = next(tr for tr in fig.data if tr.mode == "markers" and tr.hovertext).hovertext
    assert "next_bonus" in hover[-1] and "bonus_cut" in hover[-1]


def test_an_appended_star_keeps_its_verdicts_kind(embedded_pair):
    session = TreeSession(embedded_pair, "ROMEO:", SessionConfig(), "model", (2, 2, 1, 1), 12)
    session.propose()
    view = session.verify().tree
    assert view.kind == view.next_kind == "bonus" and view.next_appended
    fig = tree_figure(view, session.token(session.ids[-1]), LABELS)
    [star] = [a for a in fig.layout.annotations if a.text.startswith("<b>★")]
    assert star.bgcolor == STATE_COLORS["bonus"][0]
    assert not [tr for tr in fig.data if tr.mode == "lines" and tr.line.dash == "dash"]
    # the same verdict as a correction (a rejected last child) is labelled a correction
    fig = tree_figure(
        replace(view, kind="correction", next_kind="correction"),
        session.token(session.ids[-1]),
        LABELS,
    )
    [star] = [a for a in fig.layout.annotations if a.text.startswith("<b>★")]
    assert star.bgcolor == STATE_COLORS["correction"][0]


def test_a_stopped_tree_round_on_the_page_says_what_was_not_appended(embedded_pair, monkeypatch):
    from specdec_core.ui import sidebar
    from specdec_core.ui.step import actions, panel, tree_lesson

    def with_stop(pair):
        return replace(sidebar.current_config(pair), stop_strings=("I'll",))

    monkeypatch.setattr(panel, "current_config", with_stop)
    monkeypatch.setattr(tree_lesson, "current_config", with_stop)
    monkeypatch.setattr(actions, "current_config", with_stop)
    at = start_app("en")
    at.text_area[0].set_value("ROMEO:").run()
    at.segmented_control(key="step_mode_en").set_value("tree").run()
    click_button(at, "① Propose tree")
    click_button(at, "② Verify (one target forward)")
    [info] = strip_parts(at, "sd-alert sd-info")  # before the commit: the stop is named already
    assert "A stop (stop string) on the accepted path" in info and "was not appended" in info
    click_button(at, "③ Commit & compact")
    session = at.session_state["tree_lesson"].session
    assert session.stop_reason == "stop_string" and session.history[-1].record.kind == "stopped"
    [info] = strip_parts(at, "sd-alert sd-info")  # the committed round's outcome
    assert "was not appended" in info and "bonus token" in info
    captions = " ".join(c.value for c in at.caption)
    assert "the appended ★ token has no KV" not in captions
    assert re.search(
        r"has ended \(stop string\); the last committed token “`'ll`” has no KV", captions
    ), captions


def test_chapter_5_lists_tree_drafts_as_in_this_app(embedded_pair):
    for lang in ("en", "zh"):
        here = LESSONS["ls_c5_here_tree"][lang]
        assert "not yet" not in here and "暂无" not in here
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.session_state["lang"] = "zh"
    at.query_params["chapter"] = "5"
    at.switch_page("pages/lessons.py").run()
    at.radio(key="ls_in_c5_source_zh").set_value("lookup")
    next(b for b in at.button if b.key == "ls_btn_c5_source").click().run()
    assert not at.exception, at.exception
    [table] = [d.value for d in at.dataframe if "在本应用中" in getattr(d.value, "columns", [])]
    row = table[table["来源"] == LESSONS["ls_c5_src_tree"]["zh"]]
    assert row["在本应用中"].tolist() == ["有（逐步演示一轮页面：验证方式 → 树）"]
