"""A live-class seat in a real browser (Chromium, ``streamlit run app.py`` alone): the
seat is the browser's (the token in Streamlit's own XSRF cookie), not the URL's. A reload
and a second tab keep the one seat (the newest tab follows every second, the other says
it updates every 10 s); the same URL opened in another browser is another seat; a made-up
``sid`` in the URL changes nothing."""

from __future__ import annotations

import time

import pytest

from specdec_core.server.room_store import default_db_path
from specdec_core.server.rooms_sqlite import SQLiteStore

pytestmark = pytest.mark.browser
OTHER_TAB = "This class is open in another tab of this browser"


def _seats(store, code, key, n: int, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        seats = sorted(s.student for s in store.seats(code, key))
        if len(seats) >= n or time.monotonic() > deadline:
            return seats
        time.sleep(0.3)


def test_a_seat_belongs_to_the_browser_not_to_the_url(server, browser):
    store = SQLiteStore(default_db_path())  # the server's own store (same environment)
    code, key = store.create()
    one = browser.new_context()
    two = browser.new_context()
    try:
        page = one.new_page()
        page.goto(f"{server}/?room={code}")
        page.get_by_text("Following the teacher").wait_for(timeout=60_000)
        [seat] = _seats(store, code, key, 1)
        assert "sid=" not in page.url and seat not in page.url
        page.reload()
        page.get_by_text("Following the teacher").wait_for(timeout=60_000)
        second = one.new_page()  # a second tab of the same browser, a made-up sid
        second.goto(f"{server}/?room={code}&sid=0123456789abcdef")
        second.get_by_text("Following the teacher").wait_for(timeout=60_000)
        # the older tab slows down: it learns of the newer one at its next beat (a pushed
        # follower's every 10 s), then runs the page in full
        page.get_by_text(OTHER_TAB).wait_for(timeout=60_000)
        assert second.get_by_text(OTHER_TAB).count() == 0
        assert _seats(store, code, key, 2, timeout=3) == [seat]  # one browser, one seat
        copied = two.new_page()  # the student's URL, pasted in another browser
        copied.goto(page.url)
        copied.get_by_text("Following the teacher").wait_for(timeout=60_000)
        seats = _seats(store, code, key, 2)
        assert len(seats) == 2 and seat in seats
    finally:
        one.close()
        two.close()
        store.close(code, key)
