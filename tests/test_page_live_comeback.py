# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""A teacher who reloads without the teacher link (AppTest, browsers told apart by their
XSRF cookie): the same browser's page says its class is still running, with its code, in
both languages; another browser gets no such line, and none once the class ended. The card
sits at the top of the step page, above its title."""

from __future__ import annotations

import pytest
from conftest import open_app
from test_page_live import click, in_browser, store, teacher_app  # noqa: F401

from specdec_core.ui.i18n import tr


def _hint(at, lang: str, code: str) -> list[str]:
    said = tr("live_still_running", lang).format(code=code)
    return [i.value for i in at.info if i.value == said]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_reload_without_the_teacher_link_says_the_class_still_runs(
    embedded_pair, store, monkeypatch, lang
):
    mine, other = b"teacher-browser-secret", b"another-browser-secret"
    teacher, seat = in_browser(monkeypatch, mine, teacher_app, lang)
    kinds = ("title", "expander")
    shown = [(e.type, str(getattr(e, "label", ""))) for e in teacher.main if e.type in kinds]
    title = next(i for i, (kind, _) in enumerate(shown) if kind == "title")
    join = tr("live_join_title", lang).format(code=seat.code)
    assert shown.index(("expander", join)) < title  # the card above the page's title
    reload = in_browser(monkeypatch, mine, open_app, lang=lang)
    assert "live_seat" not in reload.session_state
    assert _hint(reload, lang, seat.code) == [tr("live_still_running", lang).format(code=seat.code)]
    stranger = in_browser(monkeypatch, other, open_app, lang=lang)
    assert _hint(stranger, lang, seat.code) == []
    click(teacher, "live_end")
    after = in_browser(monkeypatch, mine, open_app, lang=lang)
    assert _hint(after, lang, seat.code) == []
