"""A follower's frame (``ui/live/frame_view.frame_html``, the HTML pushed to followers) in
both languages: the tree's node table heads its depth column with the translated word
(never the chart's tick template "depth {d}<br>pos {pos}"), and the chain's checks table
carries the notes the teacher's page gives it: † for a row never checked, the near-ties."""

from __future__ import annotations

import html
import re

import pytest

from specdec_core.ui.i18n import in_language, tr
from specdec_core.ui.live.frame_view import frame_html


def _check(pos: int, status: str, tie: bool = False) -> dict:
    return {
        "pos": pos,
        "tok": [10 + pos, f"t{pos}", f"t{pos}"],
        "argmax": [10 + pos, f"t{pos}", f"t{pos}"],
        "p": 0.25,
        "q": 0.5,
        "a": 0.5,
        "u": None if status == "discarded" else 0.75,
        "status": status,
        "tie": tie,
    }


CHAIN = {
    "v": 1,
    "shape": "chain",
    "round": 1,
    "phase": "commit",
    "strip": [],
    "greedy": False,
    "chart": None,
    "checks": [_check(1, "accepted"), _check(2, "rejected", tie=True), _check(3, "discarded")],
}
TREE = {
    "v": 1,
    "shape": "tree",
    "round": 0,
    "phase": "commit",
    "strip": [],
    "nodes": [
        [5, "a", "a", -1, 1, "accepted", 0.5, 0.25],
        [6, "b", "b", 0, 2, "rejected", 0.25, 0.125],
    ],
}


def _text(fragment: str) -> str:
    """What the fragment reads as (no style sheets, no tags)."""
    fragment = re.sub(r"<style>.*?</style>", "", fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tree_table_heads_its_depth_column_in_words(lang):
    with in_language(lang):
        shown = frame_html(TREE)
    heads = re.findall(r"<th[^>]*>(.*?)</th>", shown)
    assert tr("tree_depth_col", lang) in heads
    assert tr("tree_depth_col", lang) == {"en": "depth", "zh": "层"}[lang]
    assert not [h for h in heads if "{" in h or "<br>" in h]  # no template, no tick


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_checks_table_carries_the_dagger_and_near_tie_notes(lang):
    with in_language(lang):
        shown = frame_html(CHAIN)
    text = _text(shown)
    assert text.count("0.5000 †") == 2 and "0.2500 †" in text  # the discarded row: q, a, p
    assert tr("unchecked_mark", lang).replace("**", "") in text
    assert tr("near_tie_note", lang).format(pos="2").replace("**", "") in text
    without = dict(CHAIN, checks=[_check(1, "accepted"), _check(2, "rejected")])
    with in_language(lang):
        plain = _text(frame_html(without))
    assert "†" not in plain


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_switch_between_chain_and_tree_says_why_the_rounds_count_again(lang):
    with in_language(lang):
        fresh = _text(frame_html(TREE))
        switched = _text(frame_html(dict(TREE, carried=12)))
        one = _text(frame_html(dict(TREE, carried=1)))
    said = tr("live_carried", lang)
    assert said.split("{")[0] not in fresh
    want = {
        "en": " — a new run: the teacher switched between chain and tree (or changed a"
        " setting), so rounds count again from 1; the 12 tokens committed before are kept",
        "zh": " —— 新的一次运行：老师在链与树之间切换（或更改了设置），轮数从 1 重新计数；"
        "之前已提交的 12 个 token 保留",
    }[lang]
    assert want in switched
    assert ("the 1 token committed" in one) == (lang == "en")
