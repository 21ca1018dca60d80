"""Forward counts on the step page come with their reason (AppTest, embedded pair, en and
zh): the MTP heads' first chain round drafts nothing because no target forward has made a
hidden state yet; an EAGLE tree round's second target forward is named as the head's
prefill; in tree mode the page's introduction describes the tree, not the chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import click_button, start_app

REPO = Path(__file__).resolve().parents[1]
STRINGS = {
    k: v
    for f in ("step_through", "tree")
    for k, v in json.loads((REPO / f"assets/strings/{f}.json").read_text("utf-8")).items()
}
LABELS = {
    "en": {
        "propose": "① Propose",
        "verify": "② Verify",
        "commit": "③ Commit / reject",
        "tree": "a tree",
    },
    "zh": {"propose": "① 提议", "verify": "② 验证", "commit": "③ 提交 / 拒绝", "tree": "树"},
}
TREE_ROUND = {"en": "Run one round", "zh": "运行一轮"}


def s(key: str, lang: str) -> str:
    return STRINGS[key][lang]


def texts(at) -> str:
    return "\n".join(
        e.value for kind in ("markdown", "info", "caption", "warning") for e in getattr(at, kind)
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mtp_first_round_says_why_it_drafts_nothing(embedded_pair, lang):
    at = start_app(lang)
    at.selectbox(key="cfg_drafter").set_value("mtp").run()
    assert not at.exception, at.exception
    click_button(at, LABELS[lang]["propose"])
    session = at.session_state["step_session"]
    assert (
        session.round_index == 0 and session.steps.drafts == [] and session.steps.current_gamma > 0
    )
    assert s("phase_verify_no_drafts_hidden", lang) in texts(at)
    assert s("phase_verify_no_drafts_drafter", lang) not in texts(at)
    click_button(at, LABELS[lang]["verify"])
    tok = texts(at)
    assert s("next_no_drafts_hidden", lang).split("{tok}")[0] in tok
    click_button(at, LABELS[lang]["commit"])
    click_button(at, LABELS[lang]["propose"])  # the second round: the heads draft
    session = at.session_state["step_session"]
    assert session.round_index == 1 and len(session.steps.drafts) > 0
    assert s("phase_verify_no_drafts_hidden", lang) not in texts(at)


def to_tree(at, lang: str) -> None:
    at.segmented_control(key=f"step_mode_{lang}").set_value("tree").run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tree_mode_has_its_own_introduction(embedded_pair, lang):
    at = start_app(lang)
    chain_tail = s("st_intro", lang).split("{how}")[1]
    assert any(chain_tail in m.value for m in at.markdown)  # the chain's, in chain mode
    to_tree(at, lang)
    intro = s("tree_page_intro", lang).format(how=s("tree_intro_how_model", lang))
    shown = [m.value for m in at.markdown]
    assert intro in shown
    assert not any(chain_tail in m for m in shown)
    at.selectbox(key="cfg_drafter").set_value("mtp").run()  # the tree's words follow the source
    intro = s("tree_page_intro", lang).format(how=s("tree_intro_how_mtp", lang))
    assert intro in [m.value for m in at.markdown]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_eagle_tree_round_names_its_prefill(embedded_pair, lang):
    at = start_app(lang)
    at.selectbox(key="cfg_drafter").set_value("eagle").run()
    to_tree(at, lang)
    click_button(at, TREE_ROUND[lang])
    summary = at.session_state["tree_lesson"].session.steps.summary()
    assert summary.rounds == 1 and summary.target_forwards == 2  # verification + prefill
    note = s("tree_stats_prefill", lang).format(forwards=2, n=1)
    assert note in [c.value for c in at.caption]
    # the model drafter needs no prefill: no such note
    at.selectbox(key="cfg_drafter").set_value("model").run()
    click_button(at, TREE_ROUND[lang])
    summary = at.session_state["tree_lesson"].session.steps.summary()
    assert summary.target_forwards == summary.rounds
    assert not any(s("tree_stats_prefill", lang)[:8] in c.value for c in at.caption)
