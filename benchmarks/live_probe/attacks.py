"""The live class under a hostile student: attacks of the classroom probe
(``benchmarks/classroom_ws.py``; registered by ``probe_attacks.attacks``).

Each attack starts its own room from the teacher's address (``TEACHER_ADDR``, exempt from
the per-address bounds as ``SPECDEC_TEACHER_ADDRS``), attacks from ``ATTACKER_ADDR``
through nginx (the app reads the address from ``X-Real-IP``), keeps its pressure on while
the classmate clicks (``ctx.held()``), and reports what the teacher's projector and the
students' screens show. A "browser" is a set of websockets sending one Streamlit XSRF
cookie (what every tab of one browser sends); a script without cookies is a new browser per
websocket. Every loop is bounded.

* ``live: rooms lockout`` — 12 tabs each press "Start a live class"; then the teacher does.
* ``live: seats and ballots`` — 30 tabs of one browser join and answer; then 30 cookie-less
  scripts do; the projector's "n of m answered".
* ``live: impersonation`` — a student answers; another browser opens the student's URL
  (with an old ``sid``) and answers otherwise: the student's answer stays.
* ``live: leaked cookie`` — a student answers; the same browser cookie from another
  address answers otherwise: its screen says the seat is in use, nothing of it is counted;
  the student's reload from its own address keeps the seat.
* ``live: 40 tabs`` — 40 tabs of one browser follow the class, each polling every second
  (a browser's fast rate, even where the app asked for 10 s), while the teacher clicks.
* ``live: code guessing`` — 60 join tries with random codes, back to back.
* ``live: answer flipping`` — one student changes its answer 20 times a second.
* ``live: store locked`` — another process holds the SQLite file's write lock for 25 s
  while students poll, join and answer; no tab may show an exception, every join and
  answer made meanwhile must be counted after.

An attack that raises is a row of its own (``ok`` false, the error in its facts), so one
broken attack never loses the table.
"""

from __future__ import annotations

import asyncio
import random
import re
import sqlite3
import time

import websockets
from streamlit.proto.WidgetStates_pb2 import WidgetState

CODE = re.compile(r"room=([A-HJ-NP-Z2-9]{6})\b")
ANSWERED = re.compile(r"\*\*(\d+) of (\d+)\*\*")
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def cookie(seed: int) -> str:
    """A Streamlit XSRF cookie (``2|mask|token|time``) of one made-up browser."""
    rng = random.Random(seed)
    token, mask = rng.randbytes(32), rng.randbytes(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(token))
    return f"_streamlit_xsrf=2|{mask.hex()}|{masked.hex()}|1700000000"


def attacks(W) -> dict:
    """The live-class attacks for ``W.ATTACKS`` (``W``: the ``classroom_ws`` module)."""

    async def tab(ctx, addr: str, query: str = "", jar: str = "") -> W.Client:
        ws = await websockets.connect(
            ctx.ws,
            subprotocols=["streamlit"],
            max_size=None,
            open_timeout=W.TIMEOUT_S,
            local_addr=(addr, 0),
            additional_headers={"Cookie": jar} if jar else None,
        )
        c = W.Client(ws)
        c.query_string = query
        await c.rerun()
        return c

    async def poll(c, key: str = "live_explore") -> None:
        """One rerun of the fragment that holds widget ``key`` (as its timer sends it)."""
        fid = c.fragments.get(c.ids.get(key, ""), "")
        msg = c.rerun_msg()
        msg.rerun_script.fragment_id = fid
        msg.rerun_script.is_auto_rerun = bool(fid)
        await c.send(msg)
        await c._read()

    async def start_room(ctx) -> tuple[W.Client, str]:
        """The teacher's tab with a new room: (tab, code)."""
        c = await tab(ctx, W.TEACHER_ADDR)
        code = await press_start(c)
        if not code:
            raise RuntimeError(f"the teacher could not start a class: {c.alerts}")
        return c, code

    async def press_start(c) -> str:
        eid = next(i for i in c.fragments if i.endswith("lt_open"))
        msg = c.rerun_msg()
        c.states[eid] = WidgetState(id=eid, bool_value=True)
        msg.rerun_script.widget_states.widgets.append(c.states[eid])
        await c.send(msg)
        await c._read()
        await c.rerun(click="live_start_step")
        found = [m.group(1) for body in c.markdown if (m := CODE.search(body))]
        return found[0] if found else ""

    async def ask(teacher) -> None:
        await teacher.rerun(click="btn_propose")
        await poll(teacher, "live_seats_on")  # the dashboard sees the proposed round
        await teacher.rerun(click="live_ask")

    async def answered(teacher) -> tuple[int, int]:
        await poll(teacher, "live_seats_on")
        for body in teacher.markdown:
            if m := ANSWERED.search(body):
                return int(m.group(1)), int(m.group(2))
        return -1, -1

    async def answer(c, choice: int) -> None:
        await poll(c)
        key = next((k for k in c.ids if k.startswith("live_answer_")), None)
        if key is None:
            raise RuntimeError("no open question on the student's screen")
        labels = ["Yes", "No"]
        await c.rerun(**{key: labels[choice]})

    async def close(*tabs) -> None:
        for c in tabs:
            await c.ws.close()

    # ---------------------------------------------------------------- the attacks
    async def rooms_lockout(ctx) -> dict:
        made = refused = 0
        tabs = []
        for _ in range(12):
            c = await tab(ctx, W.ATTACKER_ADDR)
            tabs.append(c)
            if await press_start(c):
                made += 1
            elif any("live classes" in a for a in c.alerts):
                refused += 1
        teacher, code = await start_room(ctx)
        await ctx.held()
        await close(teacher, *tabs)
        return {
            "ok": made <= 3 and bool(code),
            "facts": f"12 tries from one address: {made} rooms made, {refused} refused; "
            f"the teacher then started room {code}",
        }

    async def seats_and_ballots(ctx) -> dict:
        teacher, code = await start_room(ctx)
        await ask(teacher)
        jar = cookie(1)
        tabs = [await tab(ctx, W.ATTACKER_ADDR, f"room={code}", jar) for _ in range(30)]
        for i, c in enumerate(tabs):
            await answer(c, i % 2)
        one_browser = await answered(teacher)
        scripts = [await tab(ctx, W.ATTACKER_ADDR, f"room={code}") for _ in range(30)]
        for c in scripts:
            await answer(c, 1)
        many = await answered(teacher)
        await ctx.held()
        await close(teacher, *tabs, *scripts)
        return {
            "ok": one_browser == (1, 1),
            "facts": f"30 tabs of one browser: projector '{one_browser[0]} of {one_browser[1]} "
            f"answered'; then 30 cookie-less scripts (30 new browsers): '{many[0]} of "
            f"{many[1]}' (each a seat of its own, within the join rate)",
        }

    async def impersonation(ctx) -> dict:
        teacher, code = await start_room(ctx)
        await ask(teacher)
        victim = await tab(ctx, W.VICTIM_ADDR, f"room={code}", cookie(7))
        await answer(victim, 0)
        url = victim.query_string or f"room={code}"
        thief = await tab(ctx, W.ATTACKER_ADDR, url + "&sid=0123456789abcdef", cookie(8))
        await answer(thief, 1)
        counts = await answered(teacher)
        await poll(victim)
        mine = [s.string_value for k, s in victim.states.items() if "live_answer_" in k]
        await ctx.held()
        await close(teacher, victim, thief)
        return {
            "ok": counts[0] == 2 and mine == ["Yes"],
            "facts": f"the student's URL ({'no sid' if 'sid=' not in url else 'sid'}) opened "
            f"elsewhere and answered 'No': projector '{counts[0]} of {counts[1]}', the "
            f"student's screen still shows {mine}",
        }

    async def leaked_cookie(ctx) -> dict:
        from specdec_core.server.room_store import make_store

        teacher, code = await start_room(ctx)
        await ask(teacher)
        jar = cookie(9)  # the student's browser cookie, copied to another network
        victim = await tab(ctx, W.VICTIM_ADDR, f"room={code}", jar)
        await answer(victim, 0)
        thief = await tab(ctx, W.ATTACKER_ADDR, f"room={code}", jar)
        told = any("in use on another device" in a for a in thief.alerts)
        await answer(thief, 1)  # kept on its screen, never sent: the seat is not its
        for _ in range(3):
            await poll(thief)  # each beat claims the seat again: refused
        counts, stored = await answered(teacher), make_store().view(code).counts
        again = await tab(ctx, W.VICTIM_ADDR, f"room={code}", jar)  # the student's reload
        kept = not any("in use on another device" in a for a in again.alerts)
        await ctx.held()
        await close(teacher, victim, thief, again)
        return {
            "ok": told and counts == (1, 1) and stored == (1, 0) and kept,
            "facts": f"the student's cookie used from {W.ATTACKER_ADDR}: told the seat is in "
            f"use: {told}; it answered 'No': projector '{counts[0]} of {counts[1]}', the "
            f"store's counts {stored} (the student's 'Yes'); the student's reload from its "
            f"own address keeps the seat: {kept}",
        }

    async def forty_tabs(ctx) -> dict:
        teacher, code = await start_room(ctx)
        jar = cookie(2)
        tabs = [await tab(ctx, W.ATTACKER_ADDR, f"room={code}", jar) for _ in range(40)]
        polls = 0
        stop = time.monotonic() + W.HOLD_S
        ready = asyncio.ensure_future(ctx.held())
        labels = ["btn_propose", "btn_verify", "btn_commit"]
        while not ready.done() and time.monotonic() < stop:
            await teacher.rerun(click=labels[polls % 3])
            started = time.monotonic()
            await asyncio.gather(*(poll(c) for c in tabs))
            polls += 1
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        await ready
        slow = sum("live_this_tab" in c.ids for c in tabs)  # drawn at least once
        broken = sum(bool(c.exceptions) for c in tabs)
        await close(teacher, *tabs)
        return {
            "ok": broken == 0,
            "facts": f"40 tabs of one browser, each polled {polls}× at 1/s while the teacher "
            f"clicked: {40 - slow} fast follower(s), {slow} told 'updates every 10 s'; "
            f"{broken} tabs with an exception",
        }

    async def code_guessing(ctx) -> dict:
        waits = unknown = 0
        for _ in range(60):
            guess = "".join(random.choice(ALPHABET) for _ in range(6))
            c = await tab(ctx, W.ATTACKER_ADDR, f"room={guess}")
            waits += any("too many tries" in a for a in c.alerts)
            unknown += any("no live class has this code" in a for a in c.alerts)
            await c.ws.close()
        await ctx.held()
        return {
            "ok": unknown <= 12 and waits >= 45,
            "facts": f"60 random codes from one address: {unknown} answered 'no live class', "
            f"{waits} 'too many tries: wait'",
        }

    async def answer_flipping(ctx) -> dict:
        teacher, code = await start_room(ctx)
        await ask(teacher)
        c = await tab(ctx, W.ATTACKER_ADDR, f"room={code}", cookie(3))
        await poll(c)
        key = next(k for k in c.ids if k.startswith("live_answer_"))
        flips = 0
        ready = asyncio.ensure_future(ctx.held())
        stop = time.monotonic() + W.HOLD_S
        while not ready.done() and time.monotonic() < stop:
            await c.rerun(**{key: ["Yes", "No"][flips % 2]})
            flips += 1
            await asyncio.sleep(0.05)
        await ready
        counts = await answered(teacher)
        await close(teacher, c)
        return {
            "ok": counts[0] == 1 and not c.exceptions,
            "facts": f"{flips} answer changes sent (≤ 20/s); stored at most 1 every 2 s; "
            f"projector '{counts[0]} of {counts[1]}'",
        }

    async def store_locked(ctx) -> dict:
        from specdec_core.server.room_store import default_db_path

        teacher, code = await start_room(ctx)
        await ask(teacher)
        early = [await tab(ctx, W.ATTACKER_ADDR, f"room={code}", cookie(20 + i)) for i in range(4)]
        db = sqlite3.connect(default_db_path(), isolation_level=None, timeout=30)
        db.execute("BEGIN IMMEDIATE")  # the write lock, held by this process for 25 s
        db.execute("CREATE TABLE IF NOT EXISTS probe_lock (x)")
        locked_at = time.monotonic()
        late, lines = [], 0
        try:
            for i in range(2):  # joins while the file is locked
                late.append(await tab(ctx, W.ATTACKER_ADDR, f"room={code}", cookie(40 + i)))
            for i, c in enumerate(early):
                await answer(c, i % 2)
            for c in (*early, *late, teacher):
                await poll(c, "live_explore" if c is not teacher else "live_seats_on")
                lines += any("not answering" in a for a in c.alerts)
            await asyncio.sleep(max(0.0, 25 - (time.monotonic() - locked_at)))
        finally:
            db.execute("ROLLBACK")
            db.close()
        await asyncio.sleep(17)  # the longest back-off (16 s), then the retries go through
        for c in (*early, *late):
            await poll(c)
        counts = await answered(teacher)
        errors = sum(bool(c.exceptions) for c in (*early, *late, teacher))
        await ctx.held()
        await close(teacher, *early, *late)
        return {
            "ok": errors == 0 and counts == (4, 6),
            "facts": f"SQLite locked 25 s: {lines} of 7 screens showed the one-line message, "
            f"{errors} an exception; after: projector '{counts[0]} of {counts[1]}' (4 answers "
            "and 2 joins made while locked)",
        }

    def guarded(attack):
        async def run(ctx) -> dict:
            try:
                return await attack(ctx)
            except Exception as exc:  # noqa: BLE001 - the row says what broke
                ctx.ready.set()
                return {"ok": False, "facts": f"the attack broke: {type(exc).__name__}: {exc}"}

        return run

    return {
        name: guarded(attack)
        for name, attack in {
            "live: rooms lockout": rooms_lockout,
            "live: seats and ballots": seats_and_ballots,
            "live: impersonation": impersonation,
            "live: leaked cookie": leaked_cookie,
            "live: 40 tabs": forty_tabs,
            "live: code guessing": code_guessing,
            "live: answer flipping": answer_flipping,
            "live: store locked": store_locked,
        }.items()
    }
