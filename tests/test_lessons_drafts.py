"""Lessons chapter 7, "Where drafts come from" (AppTest, both languages): the block
drafter's forward question, the routes table, and the live question whose answer is the
winner of really running every source the pair can run — recomputed here from the engine
(fast path + ``records.summarize``), never written down."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.source_results import SOURCE_PROMPTS
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize
from specdec_core.ui.lessons import CHAPTERS, ch_drafts

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
STRINGS: dict[str, dict[str, str]] = {}
for name in ("lessons.json", "lessons_drafts.json", "sources.json"):
    STRINGS.update(json.loads((REPO / "assets/strings" / name).read_text(encoding="utf-8")))
LANGS = ("en", "zh")


def s(key: str, lang: str, **fmt) -> str:
    text = STRINGS[key][lang]
    return text.format(**fmt) if fmt else text


def open_chapter(lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["lang"] = lang
    at.query_params["chapter"] = str(len(CHAPTERS))
    at.switch_page("pages/lessons.py").run()
    assert not at.exception, at.exception
    return at


def answer(at: AppTest, cid: str, value: object, lang: str) -> dict:
    [radio] = [w for w in at.radio if w.key == f"ls_in_{cid}_{lang}"]
    radio.set_value(value)
    next(b for b in at.button if b.key == f"ls_btn_{cid}").click().run()
    assert not at.exception, at.exception
    return at.session_state["ls_answers"][cid]


def texts(at: AppTest, kind: str) -> str:
    return "\n".join(str(e.value) for e in getattr(at, kind))


def measured_winner(pair) -> tuple[str, dict[str, tuple[float, float]]]:
    """Every source on the repetitive prompt, greedy, γ = 4 (capped at a source's own
    maximum), 16 tokens, end-of-text ignored: (winner, {name: (tokens per round, draft
    forwards per round)}), the winner by most tokens per round, then fewer forwards."""
    config = SessionConfig(gamma=ch_drafts.GAMMA, max_new_tokens=ch_drafts.TOKENS)
    out = {}
    for name in drafters_for(pair):
        drafter = make_named_drafter(pair, name)
        gamma = min(config.gamma, drafter.max_gamma or config.gamma)
        run = generate(
            ignoring_eos(pair),
            SOURCE_PROMPTS["repetitive"],
            replace(config, gamma=gamma),
            drafter=drafter,
        )
        summary = summarize(run.records)
        drafting = sum(1 for r in run.records if r.gamma > 0)  # not a budget-cut round
        out[name] = (summary.tokens_per_round, run.stats.draft_forwards / drafting)
    best = max(out, key=lambda n: (out[n][0], -out[n][1]))
    return best, out


def test_chapter_7_is_the_last_chapter_and_is_named():
    assert CHAPTERS[-1] is ch_drafts and len(CHAPTERS) == 7
    for lang in LANGS:
        assert s("ls_ch7_title", lang) and s("ls_ch7_short", lang)


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_7_block_question_and_the_live_winner(embedded_pair, lang):
    best, figures = measured_winner(embedded_pair)
    at = open_chapter(lang)
    assert s("ls_ch7_title", lang) in [h.value for h in at.header]
    # the block drafter: one forward per round (wrong: one per draft)
    got = answer(at, "c7_block", "4", lang)
    assert got["correct"] is False
    assert s("ls_c7_block_why", lang, gamma=4) in texts(at, "error")
    got = answer(at, "c7_block", "1", lang)
    assert got["correct"] is True and got["tries"] == 2
    routes = texts(at, "html") if hasattr(at, "html") else ""
    for route in ch_drafts.ROUTES:
        assert s("ls_c7_route_" + route, lang) in routes
    # the live question: the options are exactly the pair's sources; the winner is measured
    [radio] = [w for w in at.radio if w.key == f"ls_in_c7_winner_{lang}"]
    assert tuple(radio.options) == tuple(
        s("src_name_" + n, lang) for n in drafters_for(embedded_pair)
    )
    wrong = next(n for n in drafters_for(embedded_pair) if n != best)
    got = answer(at, "c7_winner", wrong, lang)
    assert got["correct"] is False
    assert s("ls_wrong", lang, answer=s("src_name_" + best, lang)) in texts(at, "error")
    got = answer(at, "c7_winner", best, lang)
    assert got["correct"] is True
    tpr, fw = figures[best]
    reveal = s(
        "ls_c7_winner_reveal",
        lang,
        name=s("src_name_" + best, lang),
        tpr=f"{tpr:.2f}",
        rounds=round(ch_drafts.TOKENS / tpr),
        tokens=ch_drafts.TOKENS,
        fw=f"{fw:.2f}",
    )
    assert reveal in texts(at, "markdown")
    # the reveal's table: one row per source, its tokens per round the engine's
    [table] = [d.value for d in at.dataframe if s("src_col_tokens", lang) in d.value.columns]
    assert list(table[s("src_col_source", lang)]) == [
        s("src_name_" + n, lang) for n in drafters_for(embedded_pair)
    ]
    assert list(table[s("src_col_tokens", lang)]) == [
        f"{figures[n][0]:.2f}" for n in drafters_for(embedded_pair)
    ]
    # the MTP heads run no model forward: 0 draft forwards, their head evaluations apart
    names = drafters_for(embedded_pair)
    fwd = dict(zip(names, table[s("src_col_draft_fwd", lang)], strict=True))
    heads = dict(zip(names, table[s("src_col_heads", lang)], strict=True))
    assert fwd["mtp"] == "0.00" == f"{figures['mtp'][1]:.2f}" and float(heads["mtp"]) > 0
    assert all(heads[n] == "—" for n in names if n != "mtp")
    # the route table: the EAGLE head's one extra target forward, in its first round only
    assert s("ls_c7_target_fw_eagle", lang) in routes
    assert s("ls_c7_target_fw_eagle", lang).startswith("1 " if lang == "en" else "仅第一轮 1 次")
    # prompt lookup's place in this run, read from it, and the budget named as the reason
    lookup = figures["ngram"][0]
    rank = 1 + sum(1 for n in names if figures[n][0] > lookup)
    run = generate(
        ignoring_eos(embedded_pair),
        SOURCE_PROMPTS["repetitive"],
        SessionConfig(gamma=ch_drafts.GAMMA, max_new_tokens=ch_drafts.TOKENS),
        drafter=make_named_drafter(embedded_pair, "ngram"),
    )
    sentence = s(
        "ls_c7_lookup_budget",
        lang,
        rank=rank,
        of=len(names),
        tpr=f"{lookup:.2f}",
        alpha=f"{summarize(run.records).acceptance_rate:.2f}",
        tokens=ch_drafts.TOKENS,
    )
    assert sentence in texts(at, "markdown")
