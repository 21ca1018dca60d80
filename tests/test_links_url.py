"""Where a lesson link points (issue 24 item 11): the Lessons page's "open this moment on
the step-through page" link is the step-through page's URL (the app's root), not the
Lessons page's own URL; a proxy's base path is kept."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from specdec_core.lesson_link import LessonState, decode
from specdec_core.ui import links


@pytest.mark.parametrize(
    ("url", "current", "page", "expected"),
    [
        ("http://h:8501/lessons", "lessons", "step_through", "http://h:8501/"),
        ("http://h:8501/", "step_through", "step_through", "http://h:8501/"),
        ("http://h:8501", "step_through", "step_through", "http://h:8501/"),
        ("http://h:8501/step_through", "step_through", "step_through", "http://h:8501/"),
        ("https://h/class/lessons", "lessons", "step_through", "https://h/class/"),
        ("https://h/class/", "step_through", "lessons", "https://h/class/lessons"),
        ("http://h:8501/speed", "speed", "speed", "http://h:8501/speed"),
        ("", "lessons", "step_through", "http://localhost:8501/"),
    ],
)
def test_page_url(url, current, page, expected):
    assert links.page_url(url, current, page) == expected


def test_the_lessons_page_link_opens_the_step_through_page(monkeypatch):
    fake = SimpleNamespace(
        context=SimpleNamespace(url="http://class.example:8501/lessons"),
        session_state={links.PAGE: "lessons"},
    )
    monkeypatch.setattr(links, "st", fake)
    state = LessonState(page="step_through", prompt="ROMEO:", round=2, phase="commit")
    url = links.link_for(state)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "class.example:8501", "/")
    decoded, problems = decode(parse_qs(parts.query), ["embedded"])
    assert problems == [] and decoded == state
