"""A link opened on the speed or the drafters page: what it could not keep is named in the
one message the step page shows (``ui/problems``), translated; a Chinese link that names
no pair opens the Chinese pair, as a fresh Chinese visit does."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.lessons.link import LessonState, decode, encode

APP = str(Path(__file__).resolve().parents[1] / "app.py")
OFFERED = ["embedded", "embedded-zh"]


def pack(data: object) -> str:
    raw = zlib.compress(json.dumps(data).encode())
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def open_page(page: str, params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


BAD = {
    "page": "speed",
    "gamma": 1000,
    "temperature": -3,
    "max_new_tokens": 100000,
    "repeats": 99,
    "prompt": "x" * 5000,
    "pair": "../../etc/passwd",
}


@pytest.mark.parametrize("page", ["speed", "drafters"])
def test_bad_link_state_is_named_once_on_the_page(page, embedded_pair):
    at = open_page(page, {"v": "2", "lang": "zh", "s": pack(BAD)})
    [warning] = [w.value for w in at.warning if "链接" in w.value]
    assert warning.startswith("无法完全按链接打开；已舍弃：")
    for name in ("γ（草稿长度）", "温度", "最大生成 token 数", "提示词", "模型对", "重复次数"):
        assert f"“{name}” 的值" in warning, name
    assert "repeats" not in warning
    assert at.session_state["pair_name"] == "embedded-zh"  # the passwd pair: the default
    en = open_page(page, {"v": "99", "lang": "en", "s": pack({"page": page})})
    assert any(w.value.startswith("The link could not be opened exactly") for w in en.warning)
    junk = open_page(page, {"v": "2", "lang": "en", "s": "@@@notbase64"})
    assert sum(w.value.startswith("The link could not be opened") for w in junk.warning) == 1


def test_a_chinese_link_without_a_pair_opens_the_chinese_pair(embedded_pair):
    state, problems = decode({"v": "2", "lang": "zh", "s": pack({"page": "speed"})}, OFFERED)
    assert (state.pair, problems) == ("embedded-zh", [])
    at = open_page("speed", {"v": "2", "lang": "zh", "s": pack({"page": "speed"})})
    assert at.session_state["pair_name"] == "embedded-zh"
    # where the Chinese pair is not offered, the English one
    assert decode({"v": "2", "lang": "zh", "s": pack({})}, ["embedded"])[0].pair == "embedded"
    # a Chinese link made on the English pair names it; an English one need not
    zh_on_en = encode(LessonState(lang="zh", pair="embedded", prompt="ROMEO"))
    assert json.loads(zlib.decompress(base64.urlsafe_b64decode(zh_on_en["s"] + "=="))) == {
        "pair": "embedded",
        "prompt": "ROMEO",
    }
    assert decode(zh_on_en, OFFERED)[0].pair == "embedded"
    en = encode(LessonState(lang="en", pair="embedded", prompt="ROMEO"))
    assert json.loads(zlib.decompress(base64.urlsafe_b64decode(en["s"] + "=="))) == {
        "prompt": "ROMEO"
    }
    zh = LessonState(lang="zh", pair="embedded-zh", prompt="床前")
    assert decode(encode(zh), OFFERED) == (zh, [])
