"""A teacher who reloads the page without the teacher link has lost the seat (the key left
the address bar once read): this process remembers, per browser, the code of the class it
drives (a hash of the browser's secret, ``identity.browser_secret``, to the room code; never
the key), so that browser's page says its class is still running and how to get it back.
Per process (behind nginx a browser's tabs reach one replica), the newest
:data:`MAX_KEPT` browsers; a browser without a stable secret (no cookies) gets no hint.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import streamlit as st

from specdec_core.server.room_types import RoomError
from specdec_core.ui.errors import plain
from specdec_core.ui.i18n import t
from specdec_core.ui.live import room
from specdec_core.ui.live.identity import browser_secret

MAX_KEPT = 2_000
_KEPT: OrderedDict[str, str] = OrderedDict()
_LOCK = threading.Lock()


def _browser() -> str | None:
    secret = browser_secret()
    if secret.startswith("session:"):  # no cookie: a reload is another browser anyway
        return None
    return hashlib.sha256(secret.encode()).hexdigest()[:24]


def remember(code: str) -> None:
    """The teacher's card, every run: this browser drives class ``code``."""
    me = _browser()
    if me is None:
        return
    with _LOCK:
        _KEPT[me] = code
        _KEPT.move_to_end(me)
        while len(_KEPT) > MAX_KEPT:
            _KEPT.popitem(last=False)


def hint() -> None:
    """Outside a room: one line when this browser's class is still live (its code, and
    that the teacher link gives it back); nothing once it ended or expired."""
    me = _browser()
    with _LOCK:
        code = _KEPT.get(me) if me is not None else None
    if code is None or room.seat() is not None:
        return
    try:
        room.store().version(code)
    except RoomError:
        with _LOCK:
            _KEPT.pop(me, None)
        return
    st.info(t("live_still_running", code=plain(code)), icon=":material/cast_for_education:")
