"""Lessons details (AppTest, embedded pair, both languages): chapter 1 never shows a
round's answer before its checkpoint, and chapter 3's prompt length is the one of the
prompt it shows (the step page's default prompt named with its own count)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from test_page_lessons import found, open_lessons

from specdec_core.lessons.replay import replay
from specdec_core.ui.errors import code_span
from specdec_core.ui.i18n import tr
from specdec_core.ui.lessons import live
from specdec_core.ui.lessons.ch_greedy import CASES
from specdec_core.ui.step import links

CID_KEY = {cid: key for key, cid in CASES.items()}


@pytest.fixture(autouse=True, scope="module")
def _scenario_cache_as_before():
    saved = dict(links._scenarios)
    yield
    links._scenarios.clear()
    links._scenarios.update(saved)


def asked(at: AppTest, prefix: str) -> list[str]:
    """Checkpoint ids in page order."""
    return [b.key.removeprefix("ls_btn_") for b in at.button if b.key.startswith(prefix)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_1_no_text_shown_before_a_checkpoint_holds_its_answer(embedded_pair, lang):
    at = open_lessons(lang, "1")
    cids = [c for c in asked(at, "ls_btn_c1_") if c in CID_KEY]
    assert sorted(cids) == sorted(CASES.values())
    states = found(embedded_pair)
    # each case's round: where its committed text starts, and what it commits (the answer)
    start, answer = {}, {}
    for cid in cids:
        session = replay(embedded_pair, states[CID_KEY[cid]]).session
        assert session.steps.current_verify is not None
        start[cid] = len(session.ids)
        session.commit()
        answer[cid] = session.ids[start[cid] :]
    # the page's context strips are the last committed tokens before each case's round
    strips = [h.value for h in at.get("html") if 'class="tok ' in h.value]
    contexts = strips[0::2][: len(cids)]  # context, drafts per case (nothing revealed yet)
    assert len(contexts) == len(cids)
    for k, cid in enumerate(cids):
        for earlier in cids[: k + 1]:  # every context drawn above checkpoint k, and its own
            assert start[earlier] <= start[cid], (earlier, cid)  # ends before round k starts
        assert [tr("ls_c1_case", lang).format(name="ABC"[k])] == [
            h.value for h in at.subheader if h.value == tr("ls_c1_case", lang).format(name="ABC"[k])
        ]
    # and the strips drawn are those texts, the last committed tokens before each round
    for cid, shown in zip(cids, contexts, strict=True):
        session = live.session_at(embedded_pair, states[CID_KEY[cid]], "verify")
        assert shown == live.context_html(session) and len(session.ids) == start[cid]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_3_names_the_prompt_its_token_count_belongs_to(embedded_pair, lang):
    at = open_lessons(lang, "3")
    state = found(embedded_pair)["first_error_3"]
    n = len(embedded_pair.tokenizer.encode(state.prompt))
    setup = [m.value for m in at.markdown if code_span(state.prompt) in m.value]
    assert len(setup) == 1 and f"**{n}**" in setup[0]
    default = tr("st_default_prompt", lang)
    assert default != state.prompt  # the step page's default ends with a line break
    m = len(embedded_pair.tokenizer.encode(default))
    assert m == n + 1
    note = tr("ls_c3_default_prompt", lang).format(text=code_span(default), n=m)
    assert note in [c.value for c in at.caption]
