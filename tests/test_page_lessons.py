"""The lessons page (AppTest): every chapter in both languages, each checkpoint answered
once wrongly and once rightly, with the feedback and the revealed values checked against
the engine; chapter links (``?chapter=N``) validated and kept on a reload."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import replay
from specdec_core.rules.costmodel import per_token_cost_ms
from specdec_core.ui.i18n import plural
from specdec_core.ui.step import links
from specdec_core.ui.step.links import scenarios

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
STRINGS = json.loads((REPO / "assets/strings/lessons.json").read_text(encoding="utf-8"))
LANGS = ("en", "zh")


@pytest.fixture(autouse=True, scope="module")
def _scenario_cache_as_before():
    """The pages' per-process scenario cache is left as this module found it (other
    tests expect the step page's "find scenarios" button of a process that never searched)."""
    saved = dict(links._scenarios)
    yield
    links._scenarios.clear()
    links._scenarios.update(saved)


def s(key: str, lang: str, **fmt) -> str:
    text = STRINGS[key][lang]
    return plural(text, fmt).format(**fmt) if fmt else text


def open_lessons(
    lang: str = "en", chapter: str | None = None, params: dict | None = None
) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["lang"] = lang
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if chapter is not None:
        at.query_params["chapter"] = chapter
    at.switch_page("pages/lessons.py").run()
    assert not at.exception, at.exception
    return at


def answer(at: AppTest, cid: str, value: object, lang: str) -> None:
    key = f"ls_in_{cid}_{lang}"
    widgets = [
        w for kind in ("number_input", "radio", "pills") for w in getattr(at, kind) if w.key == key
    ]
    assert len(widgets) == 1, key
    widgets[0].set_value(value)
    next(b for b in at.button if b.key == f"ls_btn_{cid}").click().run()
    assert not at.exception, at.exception


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def wrong_then_right(at: AppTest, cid: str, wrong: object, right: object, lang: str) -> None:
    """Answer ``cid`` wrongly (an error naming the right answer, nothing counted right),
    then rightly (a success)."""
    before = len([e for e in texts(at, "error") if e.startswith("✗")])
    answer(at, cid, wrong, lang)
    got = at.session_state["ls_answers"][cid]
    assert got["correct"] is False and got["first"] is False
    assert len([e for e in texts(at, "error") if e.startswith("✗")]) == before + 1
    answer(at, cid, right, lang)
    got = at.session_state["ls_answers"][cid]
    assert got["correct"] is True and got["tries"] == 2
    assert len([e for e in texts(at, "error") if e.startswith("✗")]) == before
    # right only after the reveal: said so, and not counted as right at the first try
    assert got["first"] is False
    assert any(e.startswith("✓ " + s("ls_right_retry", lang)) for e in texts(at, "success"))


def markdown(at: AppTest) -> str:
    return "\n".join(texts(at, "markdown"))


def frames(at: AppTest) -> str:
    return "\n".join(d.value.to_string() for d in at.dataframe if hasattr(d.value, "to_string"))


def found(pair) -> dict[str, LessonState]:
    return {f.key: f.state for f in scenarios(pair) if f.state is not None}


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_1_greedy_cases_and_cost(embedded_pair, lang):
    at = open_lessons(lang, "1")
    states = found(embedded_pair)
    for key, cid in (
        ("first_error_3", "c1_fe3"),
        ("first_error_1", "c1_fe1"),
        ("all_accepted", "c1_all"),
    ):
        checks = replay(embedded_pair, states[key]).session.steps.current_verify.checks
        first = next((c.position for c in checks if c.status == "rejected"), 0)
        assert first == {"c1_fe3": 3, "c1_fe1": 1, "c1_all": 0}[cid]
        wrong_then_right(at, cid, 2 if first != 2 else 1, first, lang)
        kept = sum(c.status == "accepted" for c in checks)
        assert s("ls_c1_advanced", lang, kept=kept, n=kept + 1) in markdown(at)
    assert per_token_cost_ms(8, 25, 0, 1) == 33 and per_token_cost_ms(8, 25, 0, 3) == 11
    wrong_then_right(at, "c1_cost_1", 20.0, 33.4, lang)
    assert "33 ms" in texts(at, "success")[-1]
    wrong_then_right(at, "c1_cost_3", 13.0, 11.0, lang)
    md = markdown(at)
    assert s("ls_c1_slower", lang, cost="33", target=20.0, x="0.61") in md
    assert s("ls_c1_faster", lang, cost="11", target=20.0, x="1.82") in md
    assert "1.82×" in frames(at)
    bars = [p.proto.text for p in at.get("progress")]
    assert s("ls_progress", lang, done=5, total=5, right=0) in bars  # all right only on a retry


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_2_the_exact_rule(embedded_pair, lang):
    at = open_lessons(lang, "2")
    v = replay(
        embedded_pair, found(embedded_pair)["sampled_rejection"]
    ).session.steps.current_verify
    c = next(c for c in v.checks if c.status == "rejected")
    assert c.accept_prob == pytest.approx(min(1.0, c.p / c.q))
    wrong_then_right(at, "c2_accept", min(1.0, c.accept_prob + 0.3), c.accept_prob + 0.015, lang)
    assert f"{c.accept_prob:.3f}" in frames(at) and f"{c.u:.3f}" in frames(at)
    wrong_then_right(at, "c2_source", "p", "residual", lang)
    assert "[0.40, 0.00, 0.00]" in markdown(at) and "[1.00, 0.00, 0.00]" in markdown(at)
    wrong_then_right(at, "c2_rule", "all", "correct_one_hot", lang)
    table = frames(at)
    assert "[0.44, 0.42, 0.14]" in table and table.count("[0.60, 0.30, 0.10]") == 2
    assert "0.16" in table  # TV of resample-from-p to p


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_3_kv_lengths_equal_the_engine(embedded_pair, lang):
    session = replay(embedded_pair, found(embedded_pair)["first_error_3"]).session
    session.commit()
    kv = session.history[-1].commit.kv_after
    assert kv.target_kv_len == kv.committed_len - 1  # the correction has no KV yet
    at = open_lessons(lang, "3")
    for cid, value in (
        ("c3_committed", kv.committed_len),
        ("c3_target", kv.target_kv_len),
        ("c3_draft", kv.draft_kv_len),
    ):
        wrong_then_right(at, cid, value + 1, value, lang)
    assert s(
        "ls_c3_reveal",
        lang,
        committed=kv.committed_len,
        target=kv.target_kv_len,
        draft=kv.draft_kv_len,
    ) in markdown(at)
    assert len(at.dataframe) == 1  # the KV table


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_4_lossless_and_its_limits(embedded_pair, lang):
    at = open_lessons(lang, "4")
    wrong_then_right(at, "c4_same_text", "same_text", "same_dist", lang)
    codes = texts(at, "code")
    assert len(codes) == 4 and codes[0] == codes[1]  # greedy: the same text, token for token
    same = s("ls_c4_pair_title", lang, temp="0", seed=0, verdict=s("ls_c4_same", lang))
    assert same in markdown(at)
    wrong_then_right(at, "c4_quant", "original", "quantized", lang)
    assert s("ls_c4_quant_reveal", lang) in markdown(at)
    wrong_then_right(at, "c4_proc", "committed", "candidate", lang)
    assert s("ls_c4_proc_reveal", lang) in markdown(at)


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_5_speed_sources_and_summary(embedded_pair, lang):
    at = open_lessons(lang, "5")
    wrong_then_right(at, "c5_faster", "yes", "no", lang)
    for _ in range(600):  # measured on the server's queue, off the page's thread: poll
        if "ls_c5_run_job" not in at.session_state:
            break
        time.sleep(0.3)
        at.run()
    rows = at.session_state["ls_c5_run"].rows
    assert [r["name"] for r in rows] == ["alone", "model", "self"]
    assert rows[2]["alpha"] == pytest.approx(1.0) and rows[2]["predicted"] == pytest.approx(1.0)
    assert rows[2]["forwards"] < rows[0]["forwards"]
    wrong_then_right(at, "c5_source", "model", "lookup", lang)
    assert s("ls_c5_how_lookup", lang) in frames(at)
    wrong_then_right(at, "c5_eval", 3.2, 1.3, lang)
    assert s("ls_c5_m_ttft", lang) in frames(at)
    next(b for b in at.button if b.key == "ls_next").click().run()
    assert at.session_state["ls_chapter"] == 6
    at.radio(key=f"ls_pick_{lang}").set_value(7).run()  # the summary: the last chapter
    assert at.session_state["ls_chapter"] == 7
    assert s("ls_summary_total", lang, right=3, total=25) in markdown(at)
    next(b for b in at.button if b.key == "ls_reset").click().run()
    assert s("ls_summary_total", lang, right=0, total=25) in markdown(at)


def test_a_chapter_link_survives_a_reload_and_the_picker_moves_it(embedded_pair):
    at = open_lessons("zh", "3")
    assert at.session_state["ls_chapter"] == 3
    params = {
        k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
        for k in at.query_params
    }
    assert params["chapter"] == "3" and params["lang"] == "zh"
    state, problems = decode(params, ["embedded"])
    assert state.page == "lessons" and not problems
    again = open_lessons("en", params=params)  # a reload: a new session, the same URL
    assert again.session_state["ls_chapter"] == 3 and again.session_state["lang"] == "zh"
    assert not texts(again, "warning")
    again.radio(key="ls_pick_zh").set_value(4).run()
    assert again.session_state["ls_chapter"] == 4
    assert again.query_params["chapter"] in ("4", ["4"])
    next(b for b in again.button if b.key == "ls_next").click().run()
    assert again.session_state["ls_chapter"] == 5


@pytest.mark.parametrize("bad", ["8", "0", "abc", "-1", "2.5"])
def test_a_bad_chapter_opens_chapter_1_with_a_message(embedded_pair, bad):
    at = open_lessons("en", bad)
    assert at.session_state["ls_chapter"] == 1
    [warning] = texts(at, "warning")
    assert warning == s("ls_bad_chapter", "en", value=bad, n=7)


def test_answers_survive_a_language_switch(embedded_pair):
    at = open_lessons("en", "4")
    answer(at, "c4_quant", "quantized", "en")
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    assert any(e.startswith("✓ " + s("ls_right", "zh")) for e in texts(at, "success"))
    assert s("ls_c4_quant_reveal", "zh") in markdown(at)


def test_lessons_is_a_lesson_link_page():
    state, problems = decode(encode(LessonState(page="lessons")), ["embedded"])
    assert state.page == "lessons" and not problems


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_6_state_beyond_the_kv_cache(embedded_pair, lang):
    """The engine's round (speaker-line grammar, presence penalty): draft 2 of 4 rejected;
    the matcher's count after the commit is the engine's rolled-back one (5 + 1 + 1 = 7);
    the broadcast penalty's exact TV (37/336 ≈ 0.1101); the stale matcher of the
    short-answer grammar allows 0 tokens (terminated by a drafted end of text)."""
    from specdec_core.lessons.wrong_grammar import grammar_no_rollback, rollback_moment

    m = rollback_moment(embedded_pair, "speaker_line")
    stale = grammar_no_rollback(embedded_pair, "short_answer")
    at = open_lessons(lang, "6")
    assert s("ls_ch6_title", lang) in [h.value for h in at.header]
    assert s("ls_c6_rollback_q", lang, k=m.accepted + 1) in markdown(at)
    wrong_then_right(at, "c6_rollback", "kv", "all", lang)
    assert s("ls_c6_table_note", lang) in texts(at, "caption")
    after = m.committed.processors.grammar.accepted_tokens
    assert after == m.before.processors.grammar.accepted_tokens + m.accepted + 1 == 7
    wrong_then_right(at, "c6_matcher", after + m.gamma - m.accepted - 1, after, lang)
    wrong_then_right(at, "c6_broadcast", "yes", "no_later", lang)
    assert "0.1101" in markdown(at)
    assert stale.stale_allowed == 0 and stale.stale_terminated
    wrong_then_right(at, "c6_stale", stale.correct_allowed, 0, lang)
    assert s("ls_c6_stale_why_term", lang, n=0, ok=stale.correct_allowed) in "\n".join(
        texts(at, "success")
    )
    lab = json.loads((REPO / "assets/strings/acceptance_lab.json").read_text(encoding="utf-8"))
    assert lab["rl_st_gr_terminated_yes"][lang] in markdown(at)
