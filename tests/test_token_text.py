"""How a sentence names a token (``ui/token_text.token_in_sentence``), and the step page's
messages and chart titles, a lesson and a live frame's title that use it (en + zh)."""

from __future__ import annotations

from html import escape

import pytest
from conftest import click, open_app

from specdec_core.core.trace import TokenInfo
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import in_language, t, tr
from specdec_core.ui.token_text import token_in_sentence

STEP = {"en": ("① Propose", "② Verify"), "zh": ("① 提议", "② 验证")}


@pytest.mark.parametrize(
    ("token", "markup", "shown"),
    [
        ("一", "markdown", "“`一`”"),  # a one-character token no longer reads as a dash
        (" the", "markdown", "“`␣the`”"),  # whitespace shown as the strip shows it
        ("a`b", "markdown", "“``a`b``”"),  # a backtick inside: a longer fence
        ("`", "markdown", "“`` ` ``”"),
        ("<b>", "html", "“<code>&lt;b&gt;</code>”"),  # escaped
        (" .", "html", "“<code>␣.</code>”"),
        ("一", "text", "“一”"),  # a chart title
        ("\n", "text", "“↵”"),
    ],
)
def test_a_token_in_a_sentence_is_quoted_and_visible(token, markup, shown):
    assert token_in_sentence(token, markup) == shown


def test_a_partial_byte_token_is_named_by_its_bytes():
    token = TokenInfo(id=5, text="\ufffd", piece="æ")  # byte E6 in GPT-2's byte alphabet
    assert token_in_sentence(token) == "“`‹E6›`”"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_correction_sentence_marks_the_token(lang):
    """The fresh user's "修正 token 一 是目标模型…": the token is quoted in the sentence."""
    one = TokenInfo(id=1, text="一", piece="一")
    with in_language(lang):
        line = t("next_correction_greedy", k=1, tok=token_in_sentence(one))
    assert tr("next_correction_greedy", lang).split("{tok}")[0].format(k=1) + "“`一`”" in line


def _verify(lang: str):
    propose, verify = STEP[lang]
    at = open_app(lang=lang)
    click(at, propose)
    click(at, verify)
    assert not at.exception
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_step_page_and_a_live_frame_mark_the_tokens_they_name(embedded_pair, zh_pair, lang):
    """After Verify (greedy, the pair's default prompt): the verdict line under the chart
    names the target's argmax and the draft, the message box the correction or bonus
    token, each as ``“`token`”``; a follower's frame titles its chart rows with the
    drafted token quoted."""
    from specdec_core.ui.live.frame_view import frame_html
    from specdec_core.ui.live.frames import chain_frame

    propose, verify = STEP[lang]
    at = open_app(lang=lang)
    click(at, propose)
    click(at, verify)
    assert not at.exception
    session = at.session_state["step_session"]
    v = session.steps.current_verify
    first, mark = v.checks[0], token_in_sentence
    shown = v.checks[v.accepted]  # the chart opens on the rejected position
    assert shown.status == "rejected"
    lines = " ".join(m.value for m in at.markdown)
    verdict = tr("check_greedy", lang).split(" →")[0]
    assert verdict.format(argmax=mark(shown.target_argmax), tok=mark(shown.token)) in lines
    boxes = " ".join(x.value for x in (*at.warning, *at.success))
    assert f"“`{visible_token(v.next_token)}`”" in boxes
    with in_language(lang):
        html = frame_html(chain_frame(session, 1))
    title = tr("fig_title_pos", lang).format(i=1, tok=f"“{visible_token(first.token)}”")
    assert f"<h4>{escape(title)}</h4>" in html
