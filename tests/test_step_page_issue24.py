"""The step-through page says what the engine does (issue 24): a prompt-lookup round with
no match, unchecked positions at T > 0, enough digits to reproduce a = min(1, p/q), edit
actions named for what they do at any T, byte tokens shown as bytes. AppTest on the
embedded pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
STEP = {"en": ("① Propose", "② Verify", "③ Commit / reject"),
        "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝")}  # fmt: skip


def start(lang: str = "en", prompt: str | None = None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["lang"] = lang
    for key, value in state.items():
        at.session_state[key] = value
    if prompt is not None:
        at.session_state["st_prompt"] = prompt
    at.run()
    assert not at.exception, at.exception
    return at


def click(at: AppTest, label: str) -> None:
    [button] = [b for b in at.button if b.label == label]
    assert not button.disabled, f"{label} is disabled"
    button.click().run()
    assert not at.exception, at.exception


def infos(at: AppTest) -> list[str]:
    return [m.value.lower() for m in at.info]


@pytest.mark.parametrize(
    ("lang", "no_match", "wrong"),
    [("en", "no n-gram match", ("tentative — edit them", "allowed only one more")),
     ("zh", "没有匹配的 n-gram", ("可以编辑", "token 预算只剩一个"))],
)  # fmt: skip
def test_prompt_lookup_without_a_match_says_so_in_every_phase(embedded_pair, lang, no_match,
                                                              wrong):  # fmt: skip
    propose, verify, commit = STEP[lang]
    at = start(lang, prompt="ROMEO:", cfg_drafter="ngram")
    click(at, propose)
    session = at.session_state["step_session"]
    assert session.drafts == [] and session.drafter.name == "ngram"
    phase = [m for m in infos(at) if no_match in m]
    assert len(phase) == 1 and not any(w in m for m in infos(at) for w in wrong)
    click(at, verify)
    texts = infos(at)
    assert sum(no_match in m for m in texts) == 2  # the phase line and the verdict
    assert not any(w in m for m in texts for w in wrong)
    click(at, commit)  # the finished round is still explained the same way
    assert any(no_match in m for m in infos(at))
    assert not any(w in m for m in infos(at) for w in wrong)
