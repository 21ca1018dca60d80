"""Issue items: chapter 3's numbers equal the moment its "open this moment" link opens; that
link keeps the page's language; a bad trace file's detail is a translated reason (en + zh),
never a Python exception's text and never cut."""

from __future__ import annotations

import random
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import shown_error
from streamlit.testing.v1 import AppTest
from test_page_lessons import answer, markdown, open_lessons

from specdec_core.lessons.link import decode
from specdec_core.lessons.replay import replay
from specdec_core.lessons.tracefile import TraceFileError, parse
from specdec_core.ui.i18n import strings

LANGS = ("en", "zh")


def s(key: str, lang: str, **fmt) -> str:
    """The ``lang`` text of string ``key`` (any strings file), formatted with ``fmt``."""
    text = strings()[key][lang]
    return text.format(**fmt) if fmt else text


def answered_chapter_3(pair, lang: str) -> AppTest:
    """Chapter 3 with its three checkpoints answered rightly (the link is then shown)."""
    from specdec_core.ui.lessons import ch_cache

    before, after, _, _ = ch_cache.kv_after_commit(pair)
    at = open_lessons(lang, "3")
    for cid, value in (
        ("c3_committed", after.committed_len),
        ("c3_target", after.target_kv_len),
        ("c3_draft", after.draft_kv_len),
    ):
        answer(at, cid, value, lang)
    return at


def moment_link(at: AppTest, lang: str) -> str:
    """The URL of the chapter's "open this moment" link."""
    label = re.escape(s("ls_open_step", lang, url="URL")).replace("URL", r"([^)]+)")
    urls = [m.group(1) for c in at.caption if (m := re.fullmatch(label, c.value))]
    assert len(urls) == 1, [c.value for c in at.caption]
    return urls[0]


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_3_numbers_equal_the_moment_its_link_opens(embedded_pair, lang):
    at = answered_chapter_3(embedded_pair, lang)
    url = moment_link(at, lang)
    params = parse_qs(urlsplit(url).query)
    assert params["lang"] == [lang]  # the page's language (was always "en")
    state, problems = decode(params, [embedded_pair.name])
    assert problems == [] and state.page == "step_through"
    session = replay(embedded_pair, state).session  # what the step page replays
    assert session is not None and session.phase == "commit"
    # the round the chapter shows: its committed length at the start, the prompt's length
    committed_at_start = len(session.ids)
    assert (session.prompt_len, committed_at_start) == (15, 19)  # embedded pair, greedy
    template = re.escape(
        s("ls_c3_setup", lang, text="X", prompt="P", committed="C", target="T", draft="D")
    )
    pattern = (
        template.replace("X", ".+?", 1)
        .replace(r"\*\*P\*\*", r"\*\*(\d+)\*\*", 1)
        .replace(r"\*\*C\*\*", r"\*\*(\d+)\*\*", 1)
        .replace(r"\*\*T\*\*", r"\*\*\d+\*\*", 1)
        .replace(r"\*\*D\*\*", r"\*\*\d+\*\*", 1)
    )
    [said] = re.findall(pattern, markdown(at))
    assert (int(said[0]), int(said[1])) == (session.prompt_len, committed_at_start)


def show(exc: Exception, lang: str) -> str:
    """The error box the page shows for ``exc`` in ``lang``."""
    return shown_error(exc, lang)


def parsed_error(data: bytes) -> TraceFileError:
    with pytest.raises(TraceFileError) as err:
        parse(data)
    return err.value


GARBAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
# 300 KB of random bytes: ~1,200 "[" and "{" among them, which read as deep nesting before
RANDOM = random.Random(0).randbytes(300_000)
DEEP = b"[" * 5_000 + b"]" * 5_000
NOT_UTF8 = ("it is not UTF-8 text, so it is not JSON", "它不是 UTF-8 文本，因此不是 JSON")
CASES = [  # (file, English reason, Chinese reason)
    (GARBAGE, *NOT_UTF8),
    (RANDOM, *NOT_UTF8),
    (DEEP, "the JSON is nested too deeply", "JSON 嵌套层数过多"),
    (b"{not json", "the file is not JSON", "文件不是 JSON"),
    (b"notes: " + b"[" * 40, "the file is not JSON", "文件不是 JSON"),  # deep, but no JSON
    (
        b'{"format": "specdec-lab-trace", "version": 1, "rounds": []}',
        "the field prompt\\_ids is missing",
        "缺少字段 prompt\\_ids",
    ),
    (
        b'{"format": "specdec-lab-trace", "version": 1, "rounds": 7}',
        "the field rounds has a wrong value",
        "字段 rounds 的值不正确",
    ),
]


@pytest.mark.parametrize(
    ("data", "en", "zh"),
    CASES,
    ids=["garbage", "random", "deep", "not_json", "deep_text", "missing", "bad_field"],
)
def test_a_bad_trace_file_gives_a_translated_reason(data, en, zh):
    exc = parsed_error(data)
    assert exc.code == "trace_malformed"
    assert show(exc, "en") == (
        f"{s('error_prefix', 'en')} this file is not a SpecDec Lab trace, or it is damaged ({en})."
    )
    got = show(exc, "zh")
    assert got == f"{s('error_prefix', 'zh')} 此文件不是 SpecDec Lab 轨迹，或已损坏（{zh}）。"
    # no English detail: only the product name, JSON / UTF-8 and a field name stay Latin
    latin = re.sub(r"SpecDec Lab|JSON|UTF|prompt\\_ids|rounds", "", got)
    assert not re.search(r"[A-Za-z]", latin), got
    assert "codec" not in got and "nested deeper" not in got


def test_another_version_says_both_versions_in_each_language():
    exc = parsed_error(b'{"format": "specdec-lab-trace", "version": 9}')
    assert exc.code == "trace_version"
    assert show(exc, "en").endswith(
        "another version of SpecDec Lab (file version 9, this app reads version 1)."
    )
    assert show(exc, "zh").endswith(
        "此轨迹由另一版本的 SpecDec Lab 生成（文件版本 9，本应用读取版本 1）。"
    )
