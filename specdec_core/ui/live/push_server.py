"""The server side of ``app.py`` when ``streamlit run app.py`` serves it as an ``st.App``:
the live class's push route (:mod:`specdec_core.server.live_push`, one hub per process
that reads frames through :func:`~specdec_core.ui.live.frame_cache.room_frame`) and the
start-up hook that warms the opening pair before the first visitor (a join storm's first
student waits no longer than the last)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from specdec_core.server import live_push
from specdec_core.server.room_store import make_store
from specdec_core.ui import logguard, warmup
from specdec_core.ui.live.frame_cache import room_frame

HUB: live_push.Hub | None = None


def push_routes() -> list:
    """The routes ``st.App`` serves beside Streamlit's (one hub for the process)."""
    global HUB
    if logguard.GUARD not in live_push.LOG.filters:  # the route's errors: bounded per kind
        live_push.LOG.addFilter(logguard.GUARD)
    HUB = live_push.Hub(make_store, room_frame)
    return live_push.routes(HUB)


@asynccontextmanager
async def warm_up(_app: object) -> AsyncIterator[None]:
    """``st.App``'s lifespan: the warm-up thread (``ui/warmup``: the opening pair loaded,
    its scenarios searched) starts a second after the server, not at the first page."""
    asyncio.get_running_loop().call_later(1.0, warmup.start)
    yield None
