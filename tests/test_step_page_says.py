"""The step-through page says what the engine does: a prompt-lookup round with
no match, unchecked positions at T > 0, enough digits to reproduce a = min(1, p/q), edit
actions named for what they do at any T, byte tokens shown as bytes. AppTest on the
embedded pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import click, html_tables, open_app
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


STEP = {
    "en": ("① Propose", "② Verify", "③ Commit / reject"),
    "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝"),
}


def start(lang: str = "en", prompt: str | None = None, **state) -> AppTest:
    return open_app(
        lang=lang, prompt=prompt, state={"edit_keep_open": True, **state}
    )  # edit box open


def infos(at: AppTest) -> list[str]:
    return [m.value.lower() for m in at.info]


@pytest.mark.parametrize(
    ("lang", "no_match", "wrong"),
    [
        ("en", "no n-gram match", ("tentative — edit them", "allowed only one more")),
        ("zh", "没有匹配的 n-gram", ("可以编辑", "token 预算只剩一个")),
    ],
)
def test_prompt_lookup_without_a_match_says_so_in_every_phase(embedded_pair, lang, no_match, wrong):
    propose, verify, commit = STEP[lang]
    at = start(lang, prompt="ROMEO:", cfg_drafter="ngram")
    click(at, propose)
    session = at.session_state["step_session"]
    assert session.steps.drafts == [] and session.drafter.name == "ngram"
    phase = [m for m in infos(at) if no_match in m]
    assert len(phase) == 1 and not any(w in m for m in infos(at) for w in wrong)
    press_propose = {"en": "Press ① Propose", "zh": "按“① 提议”"}[lang]
    assert not any(press_propose in c.value for c in at.caption)  # it was proposed
    click(at, verify)
    texts = infos(at)
    assert sum(no_match in m for m in texts) == 2  # the phase line and the verdict
    assert not any(w in m for m in texts for w in wrong)
    click(at, commit)  # the finished round is still explained the same way
    assert any(no_match in m for m in infos(at))
    assert not any(w in m for m in infos(at) for w in wrong)


def _check(position: int, status: str, p: float, q: float, u: float | None):
    from specdec_core.core.trace import TokenInfo
    from specdec_core.engine.chain.trace import PositionCheck

    tok = TokenInfo(40 + position, f"t{position}", f"t{position}")
    return PositionCheck(position, tok, p, q, min(1.0, p / q), u, status, tok, False, 0.5, None)


def test_unchecked_positions_are_marked_alike_in_both_modes_and_show_no_u():
    """At T > 0 a discarded or cut position showed p, q and a with no mark
    (greedy marks them †) and a cut position showed its u."""
    from specdec_core.ui.step.strip_checks import check_columns

    checks = (
        _check(1, "accepted", 0.6, 0.5, 0.31),
        _check(2, "rejected", 0.0017354, 0.0021531, 0.9),
        _check(3, "discarded", 0.2, 0.4, None),
        _check(4, "cut", 0.3, 0.2, 0.4238),
    )
    sampled = check_columns(checks, greedy=False)
    for col in ("p(y)", "q(y)", "a = min(1, p/q)"):
        marks = [str(x).endswith(" †") for x in sampled[col]]
        assert marks == [False, False, True, True], col
    assert sampled["u"] == ["0.3100", "0.9000", "—", "—"]  # no u at a never-checked position
    p, q, a = (sampled[c][1] for c in ("p(y)", "q(y)", "a = min(1, p/q)"))
    assert (p, q, a) == ("0.001735", "0.002153", "0.8060")
    assert float(p) / float(q) == pytest.approx(float(a), rel=1e-3)
    greedy = check_columns(checks, greedy=True)
    argmax = next(v for k, v in greedy.items() if k not in sampled and v[0] == "t1")
    assert [str(x).endswith(" †") for x in argmax] == [False, False, True, True]


@pytest.mark.parametrize(
    ("lang", "agree", "wrong", "greedy_says", "sampling_says"),
    [
        (
            "en",
            "Use the target's top token at every position",
            "Use the target's 2nd choice at position 1",
            "Now (T = 0, greedy)",
            "Now (T = 1.0, sampling)",
        ),
        (
            "zh",
            "每个位置都改用目标模型的首选 token",
            "位置 1 改用目标模型的第二选择",
            "现在（T = 0，贪心）",
            "现在（T = 1.0，采样）",
        ),
    ],
)
def test_quick_edits_are_named_for_what_they_do_and_say_what_they_do_now(
    embedded_pair, lang, agree, wrong, greedy_says, sampling_says
):
    """The button "Make the draft agree with the target" at T > 0 lowered acceptance
    (a = p(argmax) = 0.0547): the names assumed greedy."""
    at = start(lang)
    click(at, STEP[lang][0])
    labels = [b.label for b in at.button]
    assert agree in labels and wrong in labels
    captions = [c.value for c in at.caption]
    assert any(greedy_says in c for c in captions)
    assert not any(sampling_says in c for c in captions)
    at.sidebar.slider(key="cfg_temperature").set_value(1.0).run()
    click(at, STEP[lang][0])
    captions = [c.value for c in at.caption]
    assert any(sampling_says in c and "p(y)" in c for c in captions)
    assert not any(greedy_says in c for c in captions)
    click(at, agree)  # the top token everywhere: a one-hot proposal accepted with p(y) < 1
    session = at.session_state["step_session"]
    probs = session.steps.accept_preview()
    assert session.steps.edited_positions
    assert all(0 < probs[k - 1] < 1 for k in session.steps.edited_positions)


POEM = "春眠不觉晓，处处闻啼鸟"


def test_byte_tokens_are_shown_as_bytes_with_the_character_they_complete(embedded_pair):
    """Once 春眠不觉晓，处处闻啼鸟 was 33 identical "�" chips in the strip and the
    KV table, the hover said "BPE æ", and typing 春 as an edit said "3 tokens: � | � | �"."""
    ids = embedded_pair.tokenizer.encode("春", add_special_tokens=False)
    assert len(ids) == 3  # E6 98 A5: three byte tokens in this vocabulary
    at = start("en", prompt=POEM)
    click(at, "① Propose")
    strip = next(h.value for h in at.get("html") if 'class="strip"' in h.value)
    assert "�" not in strip
    assert strip.count('class="tok-group"') == 11  # one group per character of the poem
    for char in POEM:
        assert (
            f'class="tok-char" style="text-align:center;border-top:1px solid #64748b;'
            f'font-size:14px;color:#334155">{char}</span>' in strip
        )
    assert "‹E6›" in strip and "bytes E6" in strip  # chip text and hover
    assert "one byte of a character" in strip  # the legend says what ‹E6› is
    [kv] = html_tables(at, "kv-table")
    tokens = list(kv[kv.columns[1]])
    assert not any("�" in x for x in tokens)
    at.toggle(key="kv_all").set_value(True).run()
    [kv] = html_tables(at, "kv-table")
    tokens = list(kv[kv.columns[1]])
    assert tokens[:3] == ["‹E6›", "‹98›", "‹A5›\u00a0→\u00a0春"]
    at.text_input(key="edit_text").set_value("春").run()
    click(at, "Use typed token")
    [error] = [e.value for e in at.error]
    assert "�" not in error and "3 tokens" in error
    assert "春 \\= ‹E6› ‹98› ‹A5›" in error and "byte-level BPE" in error  # markdown-escaped "="


def test_chart_labels_and_checks_show_bytes():
    from specdec_core.core.trace import TokenInfo
    from specdec_core.ui.figures.common import token_labels, visible_token

    e6, a5 = TokenInfo(163, "\ufffd", "æ"), TokenInfo(99, "\ufffd", "¥")
    mixed = TokenInfo(7, "\ufffd", "Ġæĺ")  # a space, then two bytes of a character
    assert token_labels([e6, a5]) == ["‹E6›", "‹A5›"]
    assert visible_token(mixed) == "␣‹E6\u00a098›"
    assert visible_token(TokenInfo(5, " ca", "Ġca")) == "␣ca"  # whole characters unchanged
    assert not TokenInfo(0, "<|endoftext|>", "<|endoftext|>").partial


@pytest.mark.parametrize(
    ("lang", "go", "stay"),
    [("en", "Start the Lessons", "Stay on this page"), ("zh", "开始学习课程", "留在本页")],
)
def test_a_first_visit_is_pointed_to_the_lessons_until_dismissed(embedded_pair, lang, go, stay):
    """A first-time visitor landed on the densest page with no "start
    here"."""
    at = start(lang)
    [link] = [p for p in at.get("page_link") if p.proto.label == go]
    assert link.proto.page.endswith("lessons")
    click(at, stay)
    assert not [p for p in at.get("page_link") if p.proto.label == go]
    assert not [b for b in at.button if b.label == stay]
    click(at, STEP[lang][0])  # stays dismissed
    assert not [p for p in at.get("page_link") if p.proto.label == go]


def test_a_lesson_link_or_a_reload_shows_no_welcome(embedded_pair):
    from urllib.parse import parse_qs

    from specdec_core.lessons.link import LessonState, encode

    at = AppTest.from_file(APP, default_timeout=120)
    for key, values in parse_qs(
        "&".join(f"{k}={v}" for k, v in encode(LessonState(prompt="ROMEO:")).items())
    ).items():
        at.query_params[key] = values[0]
    at.run()
    assert not at.exception
    assert not [p for p in at.get("page_link") if p.proto.label == "Start the Lessons"]
