# ruff: noqa: F811  (the store fixtures of test_rooms, imported by name)
"""The live class's push route (``server/live_push``): the WebSocket refuses a bad or
unknown code (and counts it as a guess) and caps connections per address and per room;
one hub per process polls the store and hands a room's listeners that room's message only,
in each listener's language, once per change they would see (a join or an answer sends
nothing); a teacher's step published through another store object (another replica) on
SQLite or Redis reaches them; a closed room ends them. ``app.py`` is the ASGI app that
``streamlit run app.py`` serves, with the route."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from test_rooms import clock, make, redis_url, store  # noqa: F401

from specdec_core.server import live_push
from specdec_core.server.live_push import CLOSE_REFUSED, Hub, Listener, endpoint
from specdec_core.server.room_frames import state_digest
from specdec_core.server.room_limits import BUCKETS
from specdec_core.server.room_types import Question

REPO = Path(__file__).resolve().parents[1]


def frame_of(store, view):
    """The hub's frame reader as the app wires it (``frame_cache.room_frame``), uncached."""
    got = store.frame(view.code, state_digest(view.page, view.state))
    return None if got is None else json.loads(got)


def publish(store, code, key, s: str, html: str) -> None:
    """A teacher's step: the frame (drawn in both languages), then the state."""
    state = {"lang": "en", "s": s}
    frame = {"v": 1, "shape": "chain", "strip": [], "html": {"en": html, "zh": "zh:" + html}}
    store.put_frame(code, key, state_digest("step", state), json.dumps(frame))
    store.publish(code, key, "step", state)


class Socket:
    """A WebSocket as ``endpoint`` sees it (Starlette's interface), from one address."""

    def __init__(self, query: dict, host: str = "203.0.113.7") -> None:
        self.query_params, self.headers = query, {}
        self.client = type("Peer", (), {"host": host})()
        self.accepted, self.closed_with, self.sent = False, None, []
        self.gone = asyncio.Event()

    async def accept(self) -> None:
        self.accepted = True

    async def close(self, code: int = 1000) -> None:
        self.closed_with = code
        self.gone.set()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def receive(self) -> dict:
        await self.gone.wait()
        return {"type": "websocket.disconnect"}


def run(coro):
    return asyncio.run(coro)


def test_the_route_refuses_bad_and_unknown_codes_as_guesses(tmp_path, monkeypatch):
    from specdec_core.server.rooms_sqlite import SQLiteStore

    s = SQLiteStore(tmp_path / "r.sqlite3")
    hub = Hub(lambda: s, frame_of)
    monkeypatch.setattr(BUCKETS, "_buckets", {}, raising=False)
    for bad in ("", "ZZ-ZZ!", "ABCDEF", "<script>", "A" * 5000):
        ws = Socket({"room": bad})
        run(endpoint(ws, hub))
        assert ws.closed_with == CLOSE_REFUSED and not ws.accepted and not ws.sent
    assert hub.count() == 0


def test_connections_are_capped_per_address_and_per_room(tmp_path, monkeypatch):
    from specdec_core.server.rooms_sqlite import SQLiteStore

    monkeypatch.setenv("SPECDEC_FOLLOWERS_PER_ADDR", "2")
    s = SQLiteStore(tmp_path / "r.sqlite3", max_students=3)
    code, key = s.create()
    hub = Hub(lambda: s, frame_of, poll_s=0.02)

    async def scenario() -> list[Socket]:
        socks = [Socket({"room": code}, host="198.51.100.1") for _ in range(3)]
        socks += [Socket({"room": code}, host=f"198.51.100.{i}") for i in range(2, 30)]
        tasks = [asyncio.ensure_future(endpoint(x, hub)) for x in socks]
        await asyncio.sleep(0.2)
        counted = hub.count()
        refused = [x.closed_with for x in socks]
        for x in socks:
            await x.close()
        await asyncio.gather(*tasks)
        return socks, counted, refused

    socks, counted, refused = run(scenario())
    one_address = socks[:3]
    assert [x.accepted for x in one_address] == [True, True, False]  # 2 per address
    assert counted == 3 + live_push.ROOM_EXTRA  # the room: its seats + the teacher's screens
    assert sum(x.accepted for x in socks) == counted
    assert all(r == CLOSE_REFUSED for x, r in zip(socks, refused, strict=True) if not x.accepted)
    assert hub.count() == 0  # every closed socket left the hub


def test_a_step_on_one_replica_reaches_the_listeners_of_another(make):
    teacher_side, follower_side = make(ttl_s=3600), make(ttl_s=3600)  # two replicas
    code, key = teacher_side.create()
    other, other_key = teacher_side.create()
    publish(teacher_side, code, key, "a", "<p>one</p>")
    publish(teacher_side, other, other_key, "x", "<p>another room</p>")
    hub = Hub(lambda: follower_side, frame_of)
    loop = asyncio.new_event_loop()
    try:
        en = Listener(code, "en", "addr:1", loop)
        zh = Listener(code, "zh", "addr:2", loop)
        elsewhere = Listener(other, "en", "addr:3", loop)
        hub.thread = SimpleNamespace(is_alive=lambda: True)  # no thread: the test polls
        for x in (en, zh, elsewhere):
            assert hub.add(x, 10, 10)
        first = [json.loads(x.latest) for x in (en, zh, elsewhere)]
        assert [m["html"] for m in first] == ["<p>one</p>", "zh:<p>one</p>", "<p>another room</p>"]
        for x in (en, zh, elsewhere):
            x.latest = None
        hub.poll()  # nothing changed since the first message: nothing sent
        teacher_side.join(code, "a" * 16)  # a join bumps the version, shows nothing new
        hub.poll()
        assert (en.latest, zh.latest, elsewhere.latest) == (None, None, None)
        publish(teacher_side, code, key, "b", "<p>two</p>")
        hub.poll()
        assert json.loads(en.latest)["html"] == "<p>two</p>"
        assert json.loads(zh.latest)["html"] == "zh:<p>two</p>"
        assert elsewhere.latest is None  # never another room's data
        teacher_side.close(code, key)
        hub.poll()
        assert json.loads(en.latest) == {"ended": True}
    finally:
        loop.close()


def test_the_teachers_votes_listener_hears_every_answer_and_only_its_version(make):
    """``lang=votes`` (the teacher's dashboard): a message on every change of its room, an
    answer through another replica included, holding the version only (no counts); the
    followers' listeners of the same room hear nothing of the answers."""
    teacher_side, hub_side = make(ttl_s=3600), make(ttl_s=3600)  # two replicas
    code, key = teacher_side.create()
    other, _ = teacher_side.create()
    publish(teacher_side, code, key, "a", "<p>one</p>")
    teacher_side.join(code, "s1")
    teacher_side.ask(code, key, Question("q1", "accept", (), ("yes", "no")))
    hub = Hub(lambda: hub_side, frame_of)
    loop = asyncio.new_event_loop()
    try:
        votes = Listener(code, live_push.VOTES, "addr:1", loop)
        follower = Listener(code, "en", "addr:2", loop)
        elsewhere = Listener(other, live_push.VOTES, "addr:3", loop)
        hub.thread = SimpleNamespace(is_alive=lambda: True)  # no thread: the test polls
        for x in (votes, follower, elsewhere):
            assert hub.add(x, 10, 10)
        assert json.loads(votes.latest) == {"v": teacher_side.version(code)}
        for x in (votes, follower, elsewhere):
            x.latest = None
        teacher_side.answer(code, "s1", "q1", 1)
        hub.poll()
        assert json.loads(votes.latest) == {"v": teacher_side.version(code)}
        assert (follower.latest, elsewhere.latest) == (None, None)
        votes.latest = None
        teacher_side.answer(code, "s1", "q1", 0)  # a changed answer: counts move, not the total
        hub.poll()
        assert json.loads(votes.latest) == {"v": teacher_side.version(code)}
        teacher_side.close(code, key)
        hub.poll()
        assert json.loads(votes.latest) == {"ended": True}
    finally:
        loop.close()


def test_app_py_is_the_asgi_app_streamlit_run_serves_with_the_push_route():
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(REPO / "app.py")
    assert found.is_asgi_app and found.import_string == "app:app"
    code = (
        "import app, sys; from specdec_core.server import live_push;"
        "print([r.path for r in app.app._user_routes], live_push.ENABLED)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['/_specdec/live'] True"


def test_redis_announces_every_write_to_each_replicas_hub(redis_url):
    """Redis: a write through one store object (a replica) reaches the ``change_waiter`` of
    another (pub/sub), so that replica's hub reads the version then, not at its next poll."""
    from specdec_core.server.rooms_redis import RedisStore

    teacher_side, follower_side = RedisStore(redis_url), RedisStore(redis_url)
    wait = follower_side.change_waiter()
    assert wait(0.05) == set()  # nothing written yet
    code, key = teacher_side.create()
    publish(teacher_side, code, key, "a", "<p>one</p>")
    got = set()
    for _ in range(20):  # the subscription delivers within a pass or two
        got |= wait(0.5)
        if code in got:
            break
    assert code in got


def test_a_vote_closed_early_and_a_revote_reach_the_followers_as_new_messages(make):
    """What the follower's question box shows travels in ``q``: the vote closed early (its
    countdown's end moves) and the revote (the vote's number) are each a new message (the
    follower's page reruns on it), an answer is none."""
    store = make(ttl_s=3600)
    code, key = store.create()
    publish(store, code, key, "a", "<p>one</p>")
    store.join(code, "a" * 16)
    hub = Hub(lambda: store, frame_of)
    loop = asyncio.new_event_loop()
    try:
        en = Listener(code, "en", "addr:1", loop)
        hub.thread = SimpleNamespace(is_alive=lambda: True)  # no thread: the test polls
        assert hub.add(en, 10, 10)
        seen = []

        def step() -> None:
            en.latest = None
            hub.poll()
            seen.append(None if en.latest is None else json.loads(en.latest)["q"])

        store.ask(code, key, Question("q1", "accept", (), ("yes", "no")), duration_s=60)
        step()
        store.answer(code, "a" * 16, "q1", 0)
        step()
        store.close_vote(code, key, "q1")
        step()
        store.revote(code, key, "q1")
        step()
        asked, answered, closed, revote = seen
        assert asked.startswith("q1:0:1:") and answered is None
        assert closed.startswith("q1:0:1:") and closed != asked  # the countdown's end moved
        assert revote == "q1:0:2:"  # the second vote, no countdown
    finally:
        loop.close()
