"""Warm a freshly started replica before students reach it: open one session over
Streamlit's websocket and let ``app.py`` run once (imports, ``st.navigation``, the
embedded pair's loading, the first step-through page). Afterwards the first real visitor
gets a warm process, and the sidebar never shows the raw ``pages/`` file names (they
appear only until some session has run ``st.navigation``).

Streamlit has no start-up hook, so this is done from outside, like a readiness probe:
``deploy/replicas.py`` runs it on every replica before it starts nginx; in containers
it is the app service's healthcheck (``deploy/README.md``).

    python deploy/warm_up.py http://127.0.0.1:8501   # exit status 0 once warm

Uses only what Streamlit 1.67 itself depends on (``websockets``, Streamlit's protobuf
messages).
"""

from __future__ import annotations

import asyncio
import sys
import time

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


async def warm_up(url: str, timeout_s: float = 300) -> float:
    """One full run of the default page on the server at ``url`` (http://host:port);
    returns its seconds.

    Raises:
        RuntimeError: the run showed an exception element (the app is broken).
    """
    started = time.perf_counter()
    ws = await websockets.connect(
        url.replace("http", "ws", 1) + "/_stcore/stream",
        subprotocols=["streamlit"],
        max_size=None,
        open_timeout=timeout_s,
    )
    try:
        msg = BackMsg()
        msg.rerun_script.page_script_hash = ""
        await ws.send(msg.SerializeToString())
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout_s)
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "delta" and fm.delta.new_element.WhichOneof("type") == "exception":
                raise RuntimeError(fm.delta.new_element.exception.message)
            if (
                kind == "script_finished"
                and fm.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN
            ):
                return time.perf_counter() - started
    finally:
        await ws.close()


def main() -> int:
    for url in sys.argv[1:] or ["http://127.0.0.1:8501"]:
        print(f"{url} warm in {asyncio.run(warm_up(url)):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
