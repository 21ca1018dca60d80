"""The step page's phase box says what is done and what comes next in the words a
following student sees ("round 1: ① Propose done — next: ② Verify"), then what the next
step does, in the words of the mode's buttons (chain or tree). AppTest, embedded pair,
en and zh, through a round and into the next."""

from __future__ import annotations

import pytest
from conftest import click, open_app

from specdec_core.ui.i18n import tr

#: the phase the page stands in → (its button, the follower's done step, its explanation)
PHASES = {
    "propose": ("st_propose", "st_commit", "phase_propose"),
    "verify": ("st_verify", "st_propose", "phase_verify"),
    "commit": ("st_commit", "st_verify", "phase_commit"),
}
#: the same in tree mode (its own buttons and phase lines)
TREE_PHASES = {
    "propose": ("tree_propose", "tree_commit", "tree_phase_propose"),
    "verify": ("tree_verify", "tree_propose", "tree_phase_verify"),
    "commit": ("tree_commit", "tree_verify", "tree_phase_commit"),
}


def expected(lang: str, r: int, phase: str, phases: dict = PHASES, **fmt: object) -> str:
    """The box before ``phase`` of round ``r`` (from 1), built from the strings alone
    (``fmt``: the tree's propose line's shape and budget)."""
    step, done, what = (tr(k, lang) for k in phases[phase])
    what = what.format(**fmt) if fmt and phase == "propose" else what
    if phase != "propose":
        where = tr("live_at_step", lang).format(r=r, done=done, next=step)
    elif r > 1:
        where = tr("live_at_new_round", lang).format(p=r - 1, done=done, r=r, next=step)
    else:
        where = tr("live_at_start_round", lang).format(r=1, next=step)
    return tr("st_phase_where", lang).format(where=where, what=what)


def phase_box(at, lang: str) -> str:
    head = tr("st_phase", lang)
    [box] = [i.value for i in at.info if i.value.startswith(head)]
    return box


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_phase_box_says_done_and_next_like_the_class_line(embedded_pair, lang):
    at = open_app(lang=lang)
    assert phase_box(at, lang) == expected(lang, 1, "propose")
    for click_key, r, now in [
        ("st_propose", 1, "verify"),
        ("st_verify", 1, "commit"),
        ("st_commit", 2, "propose"),
        ("st_propose", 2, "verify"),
    ]:
        click(at, tr(click_key, lang))
        assert at.session_state["step_session"].phase == now
        assert phase_box(at, lang) == expected(lang, r, now)
    said = {
        "en": "**Phase:** round 2: ① Propose done — next: ② Verify. Drafts are tentative",
        "zh": "**当前阶段**：第 2 轮：① 提议完成 — 下一步：② 验证。草稿仍是暂定的",
    }
    assert phase_box(at, lang).startswith(said[lang])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tree_phase_box_says_the_tree_buttons(embedded_pair, lang):
    at = open_app(lang=lang)
    at.segmented_control(key=f"step_mode_{lang}").set_value("tree").run()
    assert not at.exception, at.exception
    steps = at.session_state["tree_lesson"].session.steps
    fmt = {"shape": ",".join(map(str, steps.shape)), "budget": steps.budget}
    assert phase_box(at, lang) == expected(lang, 1, "propose", TREE_PHASES, **fmt)
    for click_key, r, now in [
        ("tree_propose", 1, "verify"),
        ("tree_verify", 1, "commit"),
        ("tree_commit", 2, "propose"),
    ]:
        click(at, tr(click_key, lang))
        assert at.session_state["tree_lesson"].session.phase == now
        assert phase_box(at, lang) == expected(lang, r, now, TREE_PHASES, **fmt)
    said = {
        "en": "**Phase:** round 1: ③ Commit & compact done — next: round 2, ① Propose tree. ",
        "zh": "**当前阶段**：第 1 轮：③ 提交并压缩完成 — 下一步：第 2 轮 ① 提议一棵树。",
    }
    assert phase_box(at, lang).startswith(said[lang])
