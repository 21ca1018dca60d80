"""Hostile inputs as attacks of the classroom probe (``classroom_ws.py``):
poisoned and deeply nested lesson links, hostile trace files, fast full-page reruns, an
upload flood, long and replay-forcing traces, and a rule-lab Monte Carlo flood; and the
live class's attacks (rooms, seats, ballots, tabs, guesses, store faults), which live in
``live_probe/attacks.py``.

Each attack follows the probe's protocol (``classroom_ws.ProbeContext``): it sets up its
pressure, sets ``ctx.ready`` (through ``ctx.held()``), keeps the pressure on until
``ctx.release`` is set (at most ``HOLD_S``), and returns ``{"ok": bool, "facts": str}``.
:func:`attacks` is given the ``classroom_ws`` module (this file does not import it: the
probe runs as ``__main__``) and returns name → coroutine function for its ``ATTACKS``.

Uploads go the way a browser sends them: ``PUT /_stcore/upload_file/<session>/<file>``
(multipart, the XSRF token as both cookie and header: Streamlit checks that they match),
then a rerun whose uploader state names the file. Every loop is bounded.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import sys
import time
import uuid
import zlib
from base64 import urlsafe_b64encode
from pathlib import Path
from urllib.parse import urlencode

import websockets
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # specdec_core

PROMPT = "ROMEO:\nBut soft, what light"
POISONED_QUERY = "v=1&lang=en&s=eNqrViooys8tKFGyUnJ0iilNsTAwcHZRqgUAXIsHNA"  # "AB\ud800CD"
UPLOAD_BYTES = 5_200_000  # just under server.maxUploadSize (5 MiB)


def _link(text: str) -> str:
    """A lesson link's query string holding ``text`` as its (decompressed) state."""
    packed = urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).rstrip(b"=")
    return urlencode({"v": "1", "lang": "en", "s": packed.decode("ascii")})


def _p50(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.0f} ms" if xs else "–"


# ------------------------------------------------------------------ trace files
_PAIR = None


def _pair():
    global _PAIR
    if _PAIR is None:
        from specdec_core.core.models import load_pair

        _PAIR = load_pair("embedded")
    return _PAIR


def trace_doc(rounds: int = 2, gamma: int = 8) -> dict:
    """A real trace JSON of the embedded pair (as the Lesson panel exports it)."""
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.session import SpeculativeSession
    from specdec_core.lessons.link import LessonState
    from specdec_core.lessons.tracefile import export_json

    session = SpeculativeSession(_pair(), PROMPT, SessionConfig(gamma=gamma, max_new_tokens=200))
    for _ in range(rounds):
        session.run_round()
    state = LessonState(gamma=gamma, max_new_tokens=200, prompt=PROMPT, round=rounds)
    return json.loads(export_json(session, state))


def long_trace(limit: int = 4_900_000) -> tuple[bytes, int]:
    """A read-only trace (another pair, γ = 1) of as many rounds as fit in ``limit`` bytes
    (the issue's file: 4.9 MB, 515 rounds; this pair's rounds are larger: ≈ 345)."""
    doc = trace_doc(rounds=3, gamma=1)
    doc["pair"], doc["lesson"] = "gpt2-xl", None
    one = max(len(json.dumps(r).encode()) for r in doc["rounds"]) + 2
    n = max(1, (limit - 2_000) // one)
    doc["rounds"] = [dict(doc["rounds"][i % 3], round_index=i) for i in range(n)]
    data = json.dumps(doc).encode()
    assert len(data) <= limit, len(data)
    return data, n


def replay_trace() -> bytes:
    """A small trace of this pair whose lesson state asks for 200 rounds at γ = 8: opening
    it replays that state (the probe's 130 KB file, 4.8–12.7 s of server time each)."""
    doc = trace_doc(rounds=2)
    doc["lesson"].update(round=200, gamma=8, phase="commit", max_new_tokens=2_000)
    return json.dumps(doc).encode()


def hostile_traces() -> dict[str, bytes]:
    """Files that broke the parser or went live as markdown before."""
    doc = trace_doc(rounds=1, gamma=2)
    inf = json.dumps({**doc, "prompt_len": "@INF@"}).replace('"@INF@"', "1e400")
    return {
        "100,000 nested [": b"[" * 100_000 + b"]" * 100_000,
        "prompt_len 1e400": inf.encode(),
        "markdown pair": json.dumps(
            {**doc, "pair": "[a](https://e.vil) :red[R] $x^2$", "lesson": None}
        ).encode(),
        "lone surrogate": json.dumps({**doc, "pair": "AB\ud800CD"}).encode(),
    }


def attacks(W) -> dict:
    """The attacks of this module for ``W.ATTACKS`` (``W``: the ``classroom_ws`` module)."""

    class Tab(W.Client):
        """A probe tab that also keeps its session id (for uploads)."""

        session_id = ""

        def handle(self, raw: bytes) -> bool:
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            if fm.WhichOneof("type") == "new_session":
                self.session_id = fm.new_session.initialize.session_id or self.session_id
            return super().handle(raw)

    async def tab(ctx, query: str = "", full: bool = False, page: str | None = None) -> Tab:
        ws = await websockets.connect(
            ctx.ws,
            subprotocols=["streamlit"],
            max_size=None,
            open_timeout=W.TIMEOUT_S,
            local_addr=(W.ATTACKER_ADDR, 0),
        )
        c = Tab(ws, fragment_reruns=not full)
        c.query_string = query
        await c.rerun()
        if page is not None:
            await c.rerun(page=page)
        return c

    def put(ctx, c: Tab, data: bytes, name: str = "trace.json") -> tuple[int, str]:
        """Upload ``data`` to the tab's own session; returns (HTTP status, file id)."""
        from streamlit.web.server.starlette.starlette_app_utils import (
            generate_xsrf_token_string,
        )

        token, file_id, boundary = generate_xsrf_token_string(), str(uuid.uuid4()), "PROBE"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{name}"\r\nContent-Type: application/json\r\n\r\n'
        ).encode()
        body += data + f"\r\n--{boundary}--\r\n".encode()
        host, port = ctx.http.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(
            host, int(port), timeout=60, source_address=(W.ATTACKER_ADDR, 0)
        )
        try:
            conn.request(
                "PUT",
                f"/_stcore/upload_file/{c.session_id}/{file_id}",
                body,
                {
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                    "X-Xsrftoken": token,
                    "Cookie": f"_streamlit_xsrf={token}",
                },
            )
            status = conn.getresponse().status
        finally:
            conn.close()
        return status, file_id

    async def open_panel(c: Tab) -> None:
        eid = next(i for i in c.fragments if i.endswith("lt_open"))
        msg = c.rerun_msg()
        state = WidgetState(id=eid, bool_value=True)
        c.states[eid] = state
        msg.rerun_script.widget_states.widgets.append(state)
        await c.send(msg)
        await c._read()

    async def choose(ctx, c: Tab, data: bytes, name: str = "trace.json") -> float:
        """Upload ``data`` and give it to the Lesson panel's uploader (its ``on_change``
        parses it); returns the rerun's time in ms (the upload not counted)."""
        status, file_id = await asyncio.to_thread(put, ctx, c, data, name)
        if status != 204:
            c.alerts.append(f"upload refused: HTTP {status}")
            return 0.0
        eid = c.ids["trace_upload"]
        state = WidgetState(id=eid)
        info = state.file_uploader_state_value.uploaded_file_info.add()
        info.file_id, info.name, info.size = file_id, name, len(data)
        c.states[eid] = state
        msg = c.rerun_msg()
        msg.rerun_script.fragment_id = c.fragments.get(eid, "")
        started = time.perf_counter()
        await c.send(msg)
        await c._read()
        return (time.perf_counter() - started) * 1e3

    # -------------------------------------------------------------- items 2 and 3: links
    async def bad_links(ctx) -> dict:
        """Tabs opening a poisoned link (a lone surrogate) and a link with 30,000 nested
        ``[``, one after another while the classmate clicks; each tab must draw its step
        buttons and step."""
        links = {
            "lone surrogate": POISONED_QUERY,
            "30,000 nested [": _link('{"edits":' + "[" * 30_000),
        }
        opened, broken, started = 0, [], time.monotonic()
        ctx.ready.set()
        while not ctx.release.is_set() and time.monotonic() - started < W.HOLD_S:
            for name, query in links.items():
                c = await tab(ctx, query)
                await c.rerun(click="① Propose")
                if (
                    c.exceptions
                    or "btn_propose" not in c.ids
                    or not any("verify" in a for a in c.alerts)
                ):
                    broken.append(name)
                await c.ws.close()
                opened += 1
        return {
            "ok": not broken,
            "facts": f"{opened} tabs opened bad links; unusable: {sorted(set(broken)) or 0}",
        }

    # -------------------------------------------------------------- items 3 and 4: files
    async def bad_files(ctx) -> dict:
        """Uploads of files that raised RecursionError / OverflowError, or showed a
        trace's pair as live markdown; one translated message each, no traceback."""
        files = await asyncio.to_thread(hostile_traces)
        c = await tab(ctx)
        await open_panel(c)
        ctx.ready.set()
        said, live = {}, []
        for name, data in files.items():
            await choose(ctx, c, data, f"{name}.json")
            said[name] = next(
                (a[:70] for a in c.alerts if "Nothing was changed" in a or "read-only" in a), "—"
            )
            live += [b for b in c.alerts + c.markdown if "](https://e.vil)" in b]
            await asyncio.sleep(10)  # at most 6 uploads a minute per tab
        await ctx.held()
        await c.ws.close()
        ok = not c.exceptions and not live and all(s != "—" for s in said.values())
        return {"ok": ok, "facts": "; ".join(f"{k}: “{v}”" for k, v in said.items())}

    # -------------------------------------------------------------- item 5: fast reruns
    async def fast_reruns(ctx) -> dict:
        """Full-page reruns (no fragment id) of "Run one round" at 10 a second, not waiting
        for any: before the per-session lock, IndexError in verify, cache size mismatches
        and a tab stuck on "something went wrong" until Reset."""
        c = await tab(ctx, full=True)
        seen: list[str] = []

        async def read() -> None:
            while True:
                c.handle(await c.ws.recv())
                seen.extend(a for a in c.alerts + c.exceptions if a not in seen)

        reader = asyncio.ensure_future(read())
        ctx.ready.set()
        sent, started = 0, time.monotonic()
        while not ctx.release.is_set() and time.monotonic() - started < W.HOLD_S:
            await c.send(c.rerun_msg(click="Run one round" if sent % 25 else "Reset"))
            sent += 1
            await asyncio.sleep(0.1)
        await asyncio.sleep(6)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await c.rerun(click="Reset")
        before = c.metrics.get("committed length")
        await c.rerun(click="Run one round")
        steps = c.metrics.get("committed length") != before
        await c.ws.close()
        wrong = [a for a in seen if "went wrong" in a or "Error" in a]
        busy = sum("Still working" in a for a in seen)
        return {
            "ok": not wrong and not c.exceptions and steps,
            "facts": f"{sent} full reruns in {time.monotonic() - started:.0f} s; errors "
            f"shown: {len(wrong)}; busy notes: {busy}; steps afterwards: {steps}",
        }

    # -------------------------------------------------------------- item 6: upload flood
    async def upload_flood(ctx) -> dict:
        """40 × 5.2 MB uploads to one's own session (no widget asks for them), then the
        tab closes: the replica's resident memory during, and up to 75 s after."""
        c = await tab(ctx)
        base = W.rss_mb(ctx.pid)
        blob = b'{"x": "' + b"x" * (UPLOAD_BYTES - 10) + b'"}'
        statuses = []
        for i in range(40):
            statuses.append((await asyncio.to_thread(put, ctx, c, blob, f"f{i}.json"))[0])
            await asyncio.sleep(0.25)  # nginx: 5 uploads a second per address
        peak = W.rss_mb(ctx.pid) - base
        ctx.ready.set()
        await ctx.held()
        await c.ws.close()
        after = []
        for _ in range(15):
            await asyncio.sleep(5)
            after.append(W.rss_mb(ctx.pid) - base)
            if after[-1] < 8:
                break
        accepted = statuses.count(204)
        return {
            "ok": peak < 60 and after[-1] < 60,
            "facts": f"{accepted}/40 uploads accepted (HTTP {sorted(set(statuses))}); "
            f"replica RSS +{peak:.0f} MB held, +{after[-1]:.0f} MB "
            f"{5 * len(after)} s after the tab closed",
        }

    # -------------------------------------------------------------- item 10: amplification
    async def long_trace_clicks(ctx) -> dict:
        """A 4.9 MB read-only trace (≈ 515 rounds) opened in three tabs that then rerun
        their step panel again and again (each rerun drew every round before)."""
        data, n = await asyncio.to_thread(long_trace)
        tabs = []
        for _ in range(3):
            c = await tab(ctx)
            await open_panel(c)
            await choose(ctx, c, data)
            tabs.append(c)
        ctx.ready.set()
        times, started = [], time.monotonic()
        while not ctx.release.is_set() and time.monotonic() - started < W.HOLD_S:
            for c in tabs:
                times.append(await c.rerun(click="Run one round" if len(times) % 9 else "Reset"))
        for c in tabs:
            await c.ws.close()
        return {
            "ok": True,
            "facts": f"{len(data) / 1e6:.1f} MB, {n} rounds × 3 tabs; their "
            f"clicks p50 {_p50(times)}",
        }

    async def replay_uploads(ctx) -> dict:
        """A trace whose lesson state asks for 200 rounds at γ = 8, opened again and again
        (each opening replays it; 6 a minute per tab): server time per opening."""
        data = await asyncio.to_thread(replay_trace)
        c = await tab(ctx)
        await open_panel(c)
        ctx.ready.set()
        times, started = [], time.monotonic()
        while not ctx.release.is_set() and time.monotonic() - started < W.HOLD_S:
            times.append(await choose(ctx, c, data))
            await asyncio.sleep(0.5)
        await c.ws.close()
        capped = any("Too many" in a for a in c.alerts)
        return {
            "ok": not c.exceptions,
            "facts": f"{len(times)} openings of a "
            f"{len(data) / 1e3:.0f} KB trace (round 200, γ = 8): p50 {_p50(times)}, max "
            f"{max(times, default=0):,.0f} ms; rate limit hit: {capped}",
        }

    async def monte_carlo_flood(ctx) -> dict:
        """Five tabs on the rule lab toggling the Monte Carlo between N = 200,000 and
        199,000 (each change a fresh 600,000-draw run before)."""
        tabs = [await tab(ctx, page="acceptance_lab") for _ in range(5)]
        ctx.ready.set()
        times, capped, started, k = [], 0, time.monotonic(), 0
        while not ctx.release.is_set() and time.monotonic() - started < W.HOLD_S:
            k += 1
            runs = [c.rerun(rl_mc_n=200_000 - 1_000 * (k % 2)) for c in tabs]
            times += await asyncio.gather(*runs)
            capped += sum(any("lowered" in a for a in c.alerts) for c in tabs)
        for c in tabs:
            await c.ws.close()
        return {
            "ok": True,
            "facts": f"{len(times)} Monte Carlo reruns by 5 tabs (p50 "
            f"{_p50(times)}); N lowered in {capped}",
        }

    from live_probe.attacks import attacks as live_attacks  # the live class's attacks

    return {
        "bad links": bad_links,
        "bad trace files": bad_files,
        "fast full reruns": fast_reruns,
        "upload flood": upload_flood,
        "long read-only trace": long_trace_clicks,
        "replay-forcing trace": replay_uploads,
        "Monte Carlo flood": monte_carlo_flood,
        **live_attacks(W),
    }
