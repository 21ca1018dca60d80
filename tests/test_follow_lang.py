"""A follower sees the teacher's lesson state in its own language (``ui/live/follow.apply``,
through ``ui/step/files.with_view``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdec_core.lessons.link import LessonState
from specdec_core.ui import i18n
from specdec_core.ui.live import follow
from specdec_core.ui.step import files


@pytest.mark.parametrize(
    ("own", "shown"), [({}, "en"), ({"lang": "zh"}, "zh"), ({"lang": "en"}, "en")]
)
def test_a_follower_keeps_its_own_language_whatever_the_teachers(monkeypatch, own, shown):
    state = dict(own)
    ns = SimpleNamespace(session_state=state)
    monkeypatch.setattr(follow, "st", ns)
    monkeypatch.setattr(i18n, "st", ns)
    monkeypatch.setattr(files, "st", ns)  # files.with_view: the view's language
    teachers = LessonState(prompt="ROMEO:", lang="zh")
    monkeypatch.setattr(follow, "decode", lambda raw, pairs: (teachers, []))
    monkeypatch.setattr(follow, "offered_pairs", lambda: ())
    requested = []
    monkeypatch.setattr(follow.links, "request", requested.append)
    follow.apply(SimpleNamespace(page="step_through", state={"s": "x"}))
    assert [(r.prompt, r.lang, r.page) for r in requested] == [("ROMEO:", shown, "step_through")]
