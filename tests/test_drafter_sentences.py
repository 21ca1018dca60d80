"""Sentences about the draft sources say what the engine does (en and zh): the block
drafter feeds γ − 1 mask tokens, the EAGLE head's first round runs one extra target
forward (its prefill), an MTP tree samples its children at T > 0, the output is unchanged
only in distribution at T > 0, every tree-capable source is offered where a tree is
refused; each sentence is checked beside the engine fact it states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import TREE_DRAFTERS, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate

REPO = Path(__file__).resolve().parents[1]


def strings(name: str) -> dict:
    return json.loads((REPO / f"assets/strings/{name}.json").read_text("utf-8"))


ALL = {
    k: v
    for f in ("drafters", "lessons_drafts", "sources", "tree", "links", "step_through")
    for k, v in strings(f).items()
}
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"

# key → (must contain, must not contain), per language
SENTENCES = {
    "dr_desc_block": {
        "en": (["γ − 1 mask"], ["fill γ mask"]),
        "zh": (["γ − 1 个掩码"], ["γ 个掩码"]),
    },
    "ls_c7_block_why": {
        "en": (["γ − 1 mask"], ["appends γ mask"]),
        "zh": (["γ − 1 个掩码"], ["接上 γ 个掩码"]),
    },
    "ls_c7_how_block": {
        "en": (["γ − 1 mask"], ["fill γ mask"]),
        "zh": (["γ − 1 个掩码"], ["填满 γ"]),
    },
    "ls_c7_routes_reveal": {
        "en": (["EAGLE", "first round", "prefill"], ["no route here needs one"]),
        "zh": (["EAGLE", "第一轮", "预填充"], ["没有哪条路线需要"]),
    },
    "ls_c7_tree_mtp": {
        "en": (["T = 0", "T > 0", "drawn"], []),
        "zh": (["T = 0", "T > 0", "抽样"], []),
    },
    "dr_intro": {
        "en": (["T = 0", "T > 0", "distribution", "prefill"], ["never changes"]),
        "zh": (["T = 0", "T > 0", "分布", "预填充"], ["永远不变"]),
    },
    "src_forwards_note": {
        "en": (["first round", "prefill"], ["exactly one target forward per round"]),
        "zh": (["第一轮", "预填充"], ["恰好需要一次目标前向"]),
    },
    "tree_compare_note": {
        "en": (["MTP heads none", "EAGLE head 0 to several"], []),
        "zh": (["MTP 多头一次也不需要", "EAGLE 特征头 0 到多次"], []),
    },
    "src_col_draft_fwd_help": {
        "en": (
            ["asked for drafts (γ > 0)", "MTP heads' first round"],
            ["÷ the rounds that drafted"],
        ),
        "zh": (["要求起草（γ > 0）", "MTP 多头的第一轮"], ["÷ 起草了的轮数"]),
    },
    "src_col_heads_help": {
        "en": (["asked for drafts (γ > 0)", "first round"], ["per round that drafted"]),
        "zh": (["要求起草（γ > 0）", "第一轮"], ["按起草轮平均"]),
    },
    "sb_drafter_help": {
        "en": (
            ["seven", "draft model", "prompt lookup", "early exit", "EAGLE", "MTP", "block", "GRU"],
            ["six"],
        ),
        "zh": (
            ["七种", "草稿模型", "提示词查找", "提前退出", "EAGLE", "MTP", "块草稿器", "递归"],
            ["六种"],
        ),
    },
}
TREE_NAMES = {  # how the refusals name each source that can draft a tree
    "model": {"en": "draft model", "zh": "草稿模型"},
    "early-exit": {"en": "early exit", "zh": "提前退出"},
    "eagle": {"en": "EAGLE", "zh": "EAGLE"},
    "mtp": {"en": "MTP heads", "zh": "MTP 多头"},
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", sorted(SENTENCES))
def test_sentence_says_what_the_engine_does(key, lang):
    text = ALL[key][lang]
    must, must_not = SENTENCES[key][lang]
    for phrase in must:
        assert phrase in text, (key, lang, phrase)
    for phrase in must_not:
        assert phrase not in text, (key, lang, phrase)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("key", ["err_tree_no_ngram", "err_tree_block"])
def test_tree_refusals_offer_every_source_that_drafts_a_tree(key, lang):
    assert set(TREE_DRAFTERS) == set(TREE_NAMES)  # the registry's own list
    for name in TREE_DRAFTERS:
        assert TREE_NAMES[name][lang] in ALL[key][lang], (key, lang, name)


def test_the_block_drafter_feeds_gamma_minus_one_masks(embedded_pair):
    """The fact behind dr_desc_block / ls_c7_*: one forward, γ − 1 mask ids fed."""
    drafter = make_named_drafter(embedded_pair, "block")
    fed: list[list[int]] = []
    forward, extend = drafter.kv._forward, drafter.kv.extend
    drafter.kv._forward = lambda ids, *a, **k: (fed.append(list(ids)), forward(ids, *a, **k))[1]
    drafter.kv.extend = lambda ids, *a, **k: (fed.append(list(ids)), extend(ids, *a, **k))[1]
    cfg = SessionConfig(gamma=4, max_new_tokens=12)
    result = generate(embedded_pair, PROMPT, cfg, drafter=drafter)
    drafting = [r for r in result.records if r.gamma > 0]
    masks = [ids.count(drafter.mask_id) for ids in fed if drafter.mask_id in ids]
    assert masks == [r.gamma - 1 for r in drafting]  # γ − 1 masks for γ drafts, each round
    assert drafting[0].gamma == min(4, drafter.max_gamma) and len(drafting[0].drafted) == 4
    assert result.stats.draft_forwards == len(drafting)  # one forward per drafting round


def test_the_eagle_heads_first_round_runs_one_extra_target_forward(embedded_pair):
    """The fact behind ls_c7_routes_reveal / src_forwards_note: rounds + 1 target forwards."""
    if "eagle" not in drafters_for(embedded_pair):
        pytest.skip("no EAGLE head for this pair")
    for name, extra in (("eagle", 1), ("model", 0), ("mtp", 0)):
        drafter = make_named_drafter(embedded_pair, name)
        result = generate(
            embedded_pair, PROMPT, SessionConfig(gamma=4, max_new_tokens=12), drafter=drafter
        )
        assert result.stats.target_forwards == len(result.records) + extra, name
