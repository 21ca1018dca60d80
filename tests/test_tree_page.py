"""The step-through page's tree mode under AppTest, on the embedded pair: the
mode control, propose / verify / commit against a :class:`TreeSession` run directly, the
node states, the mask grid and the KV compaction tables on screen, the hand-over of the
committed text between the chain and the tree, Chinese, prompt lookup refused with one
message, and the "chain vs tree" measurement against the fast paths."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest
from conftest import click_button, html_tables, open_app, start_app

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.session import TreeSession
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.tree import STATE_COLORS, STATE_STYLE, tree_figure, tree_layout
from specdec_core.ui.i18n import tr
from specdec_core.ui.render import STYLES

LABELS = {
    "en": {
        "tree": "a tree",
        "chain": "a chain",
        "propose": "① Propose tree",
        "verify": "② Verify (one target forward)",
        "commit": "③ Commit & compact",
        "round": "Run one round",
        "accepted": "accepted path",
        "rejected": "rejected",
        "unchecked": "never checked",
        "dropped": "dropped",
        "chain_propose": "① Propose",
        "chain_round": "Run one round",
    },
    "zh": {
        "tree": "树",
        "chain": "链",
        "propose": "① 提议一棵树",
        "verify": "② 验证（一次目标模型前向）",
        "commit": "③ 提交并压缩",
        "round": "运行一轮",
        "accepted": "被接受的路径",
        "rejected": "被拒绝",
        "unchecked": "从未检查",
        "dropped": "删除",
        "chain_propose": "① 提议",
        "chain_round": "运行一轮",
    },
}
SHAPE = (2, 2, 1, 1)


def to_tree(at, lang: str = "en") -> None:
    control = at.segmented_control(key=f"step_mode_{lang}")
    assert control.options == [LABELS[lang]["chain"], LABELS[lang]["tree"]]
    control.set_value("tree").run()
    assert not at.exception, at.exception


def tree_session(at) -> TreeSession:
    return at.session_state["tree_lesson"].session


def mask_html(at) -> str:
    """The mask grid (its element also holds the title and the caption)."""
    [element] = [h.value for h in at.get("html") if 'class="tree-mask"' in h.value]
    return re.search(r'<div class="tree-mask".*?</table></div>', element, re.S).group(0)


def strip_chips(at) -> list[tuple[str, str]]:
    """(state, shown text) of each token chip in the token strip."""
    strip = next(h.value for h in at.get("html") if 'class="strip"' in h.value)
    return re.findall(r'<span class="tok tok-([\w-]+)"[^>]*>([^<]*)</span>', strip)


def table_column(df, name: str) -> list[str]:
    return [str(v) for v in df[name]]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tree_round_step_by_step_equals_tree_session(embedded_pair, lang):
    lab = LABELS[lang]
    at = start_app(lang)
    prompt = at.text_area[0].value
    config = at.session_state["config"]
    to_tree(at, lang)
    assert at.selectbox(key="tree_shape").value == "2,2,1,1"
    assert [b.disabled for b in at.button if b.label in (lab["verify"], lab["commit"])] == [
        True,
        True,
    ]

    direct = TreeSession(embedded_pair, prompt, config, "model", SHAPE, 12)
    direct.propose()
    click_button(at, lab["propose"])
    session = tree_session(at)
    assert session.phase == "verify"
    assert [n.token.id for n in session.steps.tree_view().nodes] == [
        n.token.id for n in direct.steps.tree_view().nodes
    ]
    assert len(session.steps.tree_view().nodes) == 12  # 2,2,1,1 under the 12-node budget
    assert len(at.get("plotly_chart")) == 1  # the tree
    grid = mask_html(at)
    assert grid.count("✓") == int(direct.steps.attention_mask().grid.sum())

    direct.verify()
    click_button(at, lab["verify"])
    view, want = tree_session(at).steps.tree_view(), direct.steps.tree_view()
    assert [n.state for n in view.nodes] == [n.state for n in want.nodes]
    assert view.path == want.path and view.next_token == want.next_token
    # the KV table before the compaction shows every node's state and what the commit does
    [before] = html_tables(at, "tree-kv-before")
    states = table_column(before, before.columns[2])
    actions = table_column(before, before.columns[3])
    record = direct.current_record
    assert states.count(lab["accepted"]) == record.accepted
    assert states.count(lab["rejected"]) == record.states.count("rejected")
    assert states.count(lab["unchecked"]) == record.states.count("unchecked")
    assert actions.count(lab["dropped"]) == record.nodes - record.accepted
    [after] = html_tables(at, "tree-kv-after")
    assert table_column(after, after.columns[2]).count(lab["accepted"]) == record.accepted
    # the strip shows what the commit will append, as the chain's: the path, then the ★ token
    chips = strip_chips(at)
    path = [html.escape(visible_token(direct.token(tok))) for tok in record.appended]
    assert record.kind == ("bonus" if record.accepted == 4 else "correction")  # depth 4
    assert chips[direct.prompt_len :] == [
        *[("accepted", text) for text in path[:-1]],
        (record.kind, path[-1]),
    ]

    direct.commit()
    click_button(at, lab["commit"])
    session = tree_session(at)
    assert session.ids == direct.ids and session.text == direct.text
    assert session.phase == "propose" and len(session.history) == 1
    assert session.steps.summary() == direct.steps.summary()
    strip = next(h.value for h in at.get("html") if 'class="strip"' in h.value)
    assert strip.count("tok-accepted") == record.accepted
    assert strip.count("tok-correction") + strip.count("tok-bonus") == 1
    text = " ".join(m.value for m in at.markdown)
    assert f"{direct.steps.summary().tokens_per_target_forward:.2f}" in text


def test_chain_and_tree_hand_over_the_committed_text(embedded_pair):
    lab = LABELS["en"]
    at = start_app("en")
    click_button(at, lab["chain_round"])  # one chain round first
    chain = at.session_state["step_session"]
    assert len(chain.history) == 1
    to_tree(at)
    tree = tree_session(at)
    assert tree.ids == chain.ids and tree.prompt_len == chain.prompt_len
    assert any("continues from the chain" in i.value for i in at.info)
    click_button(at, lab["round"])
    tree = tree_session(at)
    assert len(tree.history) == 1 and len(tree.ids) > len(chain.ids)
    # back to the chain: it continues from the tree's committed text, same prompt boundary
    at.segmented_control(key="step_mode_en").set_value("chain").run()
    assert not at.exception, at.exception
    chain = at.session_state["step_session"]
    assert chain.ids == tree.ids and chain.prompt_len == tree.prompt_len
    assert chain.phase == "propose"
    click_button(at, lab["chain_propose"])  # the chain page works as before
    assert at.session_state["step_session"].phase == "verify"


def test_settings_change_in_tree_mode_continues_from_the_committed_text(embedded_pair):
    lab = LABELS["en"]
    at = start_app("en")
    to_tree(at)
    click_button(at, lab["round"])
    ids = list(tree_session(at).ids)
    at.selectbox(key="tree_shape").set_value("4,1,1,1").run()
    assert not at.exception, at.exception
    session = tree_session(at)
    assert session.ids == ids and session.steps.shape == (4, 1, 1, 1) and not session.history
    click_button(at, lab["propose"])
    assert sorted(tree_session(at).steps.tree_view().nodes[i].depth for i in range(4)) == [1] * 4


def test_prompt_lookup_gets_one_message_and_the_chain(embedded_pair):
    at = start_app("en")
    at.selectbox(key="cfg_drafter").set_value("ngram").run()
    assert not at.exception, at.exception
    to_tree(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "cannot draft a tree" in warnings[0]
    assert not at.error
    assert "tree_lesson" not in at.session_state
    click_button(at, "Verify a chain instead")
    assert at.segmented_control(key="step_mode_en").value == "chain"
    click_button(at, "① Propose")  # the chain with prompt lookup
    assert at.session_state["step_session"].phase == "verify"


def test_greedy_draft_method_at_temperature_is_explained(embedded_pair):
    at = start_app("zh")
    at.slider(key="cfg_temperature").set_value(1.0).run()
    at.radio(key="cfg_method").set_value("greedy").run()
    to_tree(at, "zh")
    [warning] = [w.value for w in at.warning]
    assert "概率采样" in warning
    assert not at.exception


def test_chain_vs_tree_measured_on_the_fast_paths(embedded_pair, monkeypatch):
    from specdec_core.ui.step import tree_stats

    monkeypatch.setattr(tree_stats, "COMPARE_TOKENS", 8)
    at = start_app("en")
    to_tree(at)
    click_button(at, "▶ Measure chain vs tree (8 tokens, greedy)")
    assert len(at.get("plotly_chart")) == 1  # no tree yet: the chain-vs-tree figure
    prompt = at.text_area[0].value
    cfg = replace(at.session_state["config"], gamma=4, temperature=0.0, max_new_tokens=8)
    pair = replace(embedded_pair, eos_token_id=None)
    chain = generate(pair, prompt, cfg).stats
    tree = generate_tree(pair, prompt, cfg, SHAPE, 12)
    caption = " ".join(c.value for c in at.caption)
    match = re.search(
        r"chain γ=4: ([\d.]+) tokens/forward.*tree 2,2,1,1: ([\d.]+) tokens/", caption
    )
    assert match, caption
    assert float(match[1]) == pytest.approx(chain.new_tokens / chain.target_forwards, abs=0.006)
    assert float(match[2]) == pytest.approx(tree.tokens_per_target_forward, abs=0.006)


def test_tree_colours_are_the_strips():
    for state, style in STATE_STYLE.items():
        fill, border, text = STATE_COLORS[style]
        css = STYLES[style]
        assert f"color:{text}" in css, state
        if style != "committed":  # the strip's committed tokens have no border
            assert border in css, state
        if style != "discarded":  # hatched in the strip: both greys are its stripes
            assert f"background:{fill}" in css, state
        else:
            assert fill in css


def test_tree_layout_and_figure_escape_token_text(embedded_pair):
    assert tree_layout([-1, -1, 0, 0, 1]) == [0.5, 2.0, 0.0, 1.0, 2.0]
    session = TreeSession(embedded_pair, "ROMEO:", SessionConfig(), "model", (2, 1), 12)
    session.propose()
    view = session.verify().tree
    bad = replace(view.nodes[0], token=replace(view.nodes[0].token, text="<b>x</b>"))
    view = replace(view, nodes=(bad,) + view.nodes[1:])
    labels = {
        k: k
        for k in list(STATE_STYLE)
        + [
            "root",
            "depth",
            "node",
            "position",
            "accept",
            "not_checked",
            "next_correction",
            "next_bonus",
        ]
    }
    labels["depth"], labels["root_tick"] = "d{d} p{pos}", "root {pos}"
    fig = tree_figure(view, session.token(session.ids[-1]), labels)
    texts = [a.text for a in fig.layout.annotations]
    assert "&lt;b&gt;x&lt;/b&gt;" in texts and "<b>x</b>" not in texts
    assert any(x.startswith("<b>★") for x in texts)  # the correction/bonus token
    assert len(texts) == len(view.nodes) + 2  # root + nodes + ★


def test_gamma_change_keeps_the_tree_round_in_flight(embedded_pair):
    """γ plays no part in a tree round (the shape sets the depth): moving the γ slider after
    ① keeps the drafted tree (a fresh user saw it dropped)."""
    lab = LABELS["en"]
    at = start_app("en")
    to_tree(at)
    click_button(at, lab["propose"])
    session = tree_session(at)
    tokens = [n.token.id for n in session.steps.tree_view().nodes]
    at.slider(key="cfg_gamma").set_value(2).run()
    assert not at.exception, at.exception
    assert tree_session(at) is session and session.phase == "verify"
    assert [n.token.id for n in session.steps.tree_view().nodes] == tokens
    click_button(at, lab["verify"])
    assert tree_session(at).phase == "commit"


def test_a_tree_panel_run_reads_the_sidebars_settings_once(embedded_pair, monkeypatch):
    """The panel reads the settings once and hands them to the tree's check and the sync
    (it read them twice, once in each)."""
    from specdec_core.ui import sidebar
    from specdec_core.ui.step import actions, panel

    reads = {"panel": 0, "actions": 0}

    def counted(where: str):
        def read(pair):
            reads[where] += 1
            return sidebar.current_config(pair)

        return read

    monkeypatch.setattr(panel, "current_config", counted("panel"))
    monkeypatch.setattr(actions, "current_config", counted("actions"))
    at = start_app("en")
    to_tree(at)
    assert tree_session(at).unit == "tree"
    reads.update(panel=0, actions=0)
    at.run()  # one full run of the page: one panel run
    assert not at.exception
    assert reads == {"panel": 1, "actions": 0}
    click_button(at, "① Propose tree")  # a click: the callback reads them, then the panel
    assert tree_session(at).phase == "verify"
    assert reads == {"panel": 2, "actions": 1}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_shape_box_that_holds_no_shape_says_so_and_starts_no_tree(embedded_pair, lang):
    """A kept shape that is not one (a hand-made link): one translated error naming the
    value, no traceback, no tree lesson."""
    state = {"step_mode_kept": "tree", "tree_shape_kept": "9,x", "tree_shape": "9,x"}
    at = open_app(lang=lang, state=state)
    [error] = [e.value for e in at.error]
    assert "9,x" in error and error.startswith(tr("error_prefix", lang))
    assert "tree_lesson" not in at.session_state
