"""Where a lesson link points: the Lessons page's "open this moment on
the step-through page" link is the step-through page's URL (the app's root), not the
Lessons page's own URL; a proxy's base path is kept."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from specdec_core.lessons.link import LessonState, decode
from specdec_core.ui.step import links


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


def test_the_scenario_search_says_what_it_is_trying_while_it_runs(monkeypatch):
    """The "Find the scenarios" search once ran 21–27 s (42 s on a busy 2-core machine)
    behind one spinner. Each scenario's name is on screen while it is searched."""
    from specdec_core.lessons.scenarios import SCENARIOS, Found

    shown: list[str] = []
    seen_when_searching: list[str] = []

    class Bar:
        def progress(self, value, text=None):
            if text:
                shown.append(text)

    class Box:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, label, state, expanded):
            shown.append(f"done: {label} ({state})")

    fake = SimpleNamespace(
        status=lambda label, expanded: Box(), progress=lambda v: Bar(), session_state={"lang": "en"}
    )

    def search(pair):
        for key in SCENARIOS:
            seen_when_searching.append(shown[-1])
            yield Found(key, None)

    monkeypatch.setattr(links, "st", fake)
    monkeypatch.setattr(links, "find_scenarios", search)
    found = links._search_with_progress(SimpleNamespace(name="fake"))
    assert [f.key for f in found] == list(SCENARIOS)
    n = len(SCENARIOS)
    assert (
        seen_when_searching[0]
        == f"Trying prompts and seeds for scenario 1 of {n}: "
        + links.t(f"sc_{SCENARIOS[0]}_title")
        + "…"
    )
    assert [s.split(":")[0] for s in seen_when_searching] == [
        f"Trying prompts and seeds for scenario {i} of {n}" for i in range(1, n + 1)
    ]
    assert shown[-1].startswith(f"done: Searched {n} scenarios in") and "(complete)" in shown[-1]


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:8501/?v=2&s=x", True),
        ("http://LOCALHOST:8501/step_through", True),
        ("http://127.0.0.1:8501/", True),
        ("http://127.1.2.3/", True),
        ("http://[::1]:8501/", True),
        ("http://0.0.0.0:8501/", True),
        ("http://app.localhost/", True),
        ("http://192.168.1.20:8501/?v=2", False),
        ("https://specdec.school.example/step_through", False),
        ("http://10.0.0.5/", False),
        ("http://localhost.example.com/", False),
        ("", False),
    ],
)
def test_a_link_that_names_this_computer_only_is_told_apart(url, local):
    assert links.is_local_url(url) is local
