"""Push a live class's teacher step to its followers over one WebSocket each, instead of a
Streamlit page run per follower per change.

The route (:func:`routes`, served by ``app.py``'s ``st.App`` in the app's own server):
``/_specdec/live?room=CODE&lang=en|zh``. A follower's page opens it (``ui/live/push_view``)
and gets one JSON message now and one after every change the room shows: ``{"page":
"step"|"lessons", "s": the state's digest, "q": the open question's id
and reveal state, "html": the teacher's frame drawn in the follower's language
(``ui/live/frames``), or null}``. The page draws ``html`` itself (client side) and asks
Streamlit for a rerun only when ``page``, ``s`` or ``q`` change and there is something the
page must do itself (a question, another page, a state without a frame: it is replayed).

One :class:`Hub` per process: ONE thread polls the version of the rooms that have
listeners (every :data:`POLL_S`: one indexed row in SQLite; with Redis it waits for the
store's pub/sub announcement of a write instead, and polls at least once a second) and,
on a change, reads the view and the frame once (the frame once per state) and hands the
same message text to every listener of that room and language (not one equal to the last);
a listener holds only the newest message (a slow socket skips the ones in between).

A follower's page also signs its seat into the URL (``&seat=…``,
:mod:`~specdec_core.server.live_push_seats`): while the socket is open the hub writes that
seat's heartbeat (one store call per room every 20 s) and keeps the tab its seat's fast
one, and says ``{"tab": "other"}`` / ``{"seat": "refused"|"unsigned"}`` to that socket alone
when the page must run to show something; an idle follower tab then runs no script at all.

A teacher's dashboard opens it with ``lang=votes``: ``{"v": version}`` on every change of the
room (no counts), so its answers chart redraws at once (``ui/live/push_votes``).

Untrusted input: the code is normalized and must name a live room (an unknown code costs a
``guess`` token, an ended class's not; a live room's a ``connect`` token); connections are
bounded per address (``SPECDEC_FOLLOWERS_PER_ADDR``), room (its seats + teacher screens) and
process (:data:`MAX_LISTENERS`); nothing a client sends is read beyond the close."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specdec_core.server.jobs import client_key
from specdec_core.server.live_push_seats import SEAT_UNSIGNED, SeatBeats
from specdec_core.server.live_push_seats import read as read_seat
from specdec_core.server.room_frames import state_digest
from specdec_core.server.room_limits import BUCKETS, followers_per_addr
from specdec_core.server.room_types import RoomError, RoomView, normalize_code
from specdec_core.server.rooms import RoomStore

PATH = "/_specdec/live"
ENABLED = False  # set by :func:`routes`: this process serves the route (a follower uses it)
POLL_S = 0.1  # the hub's version poll (one thread per process)
MAX_LISTENERS = 2_000  # per process
ENDED = json.dumps({"ended": True})  # the last message a room's listeners get
ROOM_EXTRA = 20  # listeners a room holds beyond its seats (teacher screens, reloads)
LANGS = ("en", "zh")
VOTES = "votes"  # the teacher dashboard's listener: the room's version on every change
CLOSE_REFUSED = 4403  # a WebSocket close code: bad code, gone room, a bound reached
CLOSE_ENDED = 4410  # the class ended: the page says so and does not reconnect
LOG = logging.getLogger(__name__)  # the app puts its log guard on it (``ui/live/push_server``)


@dataclass(eq=False)
class Listener:
    """One open socket: its room, language and client; ``latest`` is the newest message
    not sent yet, ``wake`` is set (on the socket's loop) when it arrives."""

    code: str
    lang: str
    client: str
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    latest: str | None = None
    seat: tuple[str, str, str] | None = None  # (student, tab, client) of a signed seat
    fast: bool = True  # the tab was its seat's fast follower at the last check
    personal: str | None = None  # a message for this socket only (``live_push_seats``)

    def offer(self, text: str) -> None:
        """From the hub's thread: keep ``text`` as the newest message and wake the socket."""
        self.latest = text
        self.loop.call_soon_threadsafe(self.wake.set)

    def note(self, text: str) -> None:
        """From the hub's thread: a message for this socket alone, sent before the next."""
        self.personal = text
        self.loop.call_soon_threadsafe(self.wake.set)


def question_key(view: RoomView) -> str:
    """What a follower's question box shows, as the messages' ``q`` spell it: the question
    (the held one while paused), its reveal, its vote (a revote) and its countdown's end (a
    vote closed early); a change reruns the follower's page (``ui/live/push_view``)."""
    question = view.held if view.paused else view.question
    if question is None:
        return ":paused" if view.paused else ""
    ends = "" if question.closes_at is None else f"{question.closes_at:.3f}"
    q = f"{question.qid}:{int(question.revealed)}:{question.vote}:{ends}"
    return q + (":paused" if view.paused else "")


def message(view: RoomView | None, frame: dict | None, lang: str) -> str:
    """The message for a listener in ``lang`` (``view`` None: the room is gone)."""
    if view is None:
        return ENDED
    if lang == VOTES:
        return json.dumps({"v": view.version})
    q = question_key(view)
    html = None
    if frame is not None and isinstance(frame.get("html"), dict):
        html = frame["html"].get(lang)
    state = state_digest(view.page, view.state)[:16]
    return json.dumps(
        {"page": view.page, "s": state, "q": q, "html": html},
        ensure_ascii=False,
    )


class Hub:
    """The process's listeners and its one version-polling thread. ``store``: returns the
    process's room store; ``frame_of(store, view)``: the teacher's frame of the view's
    state, or ``None``."""

    def __init__(
        self,
        store: Callable[[], RoomStore],
        frame_of: Callable[[RoomStore, RoomView], dict | None],
        poll_s: float = POLL_S,
    ) -> None:
        self.store, self.frame_of, self.poll_s = store, frame_of, poll_s
        self.rooms: dict[str, set[Listener]] = {}
        self.seen: dict[str, int] = {}  # code -> version the listeners have
        self.sent: dict[tuple[str, str], str] = {}  # (code, lang) -> last message
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.reads = 0  # store reads by the hub (version polls and views), for benchmarks
        self.seats = SeatBeats(store)  # the held screens' heartbeats and fast tabs

    # ---------------------------------------------------------------- listeners
    def count(self, client: str | None = None) -> int:
        with self.lock:
            return sum(
                1 for ls in self.rooms.values() for x in ls if client is None or x.client == client
            )

    def add(self, listener: Listener, room_cap: int, client_cap: int) -> bool:
        """Register ``listener`` unless a bound is reached; its first message is the room's
        current one. Starts the polling thread on the first listener."""
        with self.lock:
            mine = sum(1 for ls in self.rooms.values() for x in ls if x.client == listener.client)
            total = sum(len(ls) for ls in self.rooms.values())
            room = self.rooms.setdefault(listener.code, set())
            if mine >= client_cap or total >= MAX_LISTENERS or len(room) >= room_cap:
                if not room:
                    del self.rooms[listener.code]
                return False
            room.add(listener)
            first = self.sent.get((listener.code, listener.lang))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="specdec-live", daemon=True)
                self.thread.start()
        if first is None:
            first = self._message(listener.code, listener.lang)
            with self.lock:
                self.sent.setdefault((listener.code, listener.lang), first)
        listener.offer(first)
        return True

    def remove(self, listener: Listener) -> None:
        with self.lock:
            room = self.rooms.get(listener.code)
            if room is not None:
                room.discard(listener)
                if not room:
                    del self.rooms[listener.code]
                    self.seen.pop(listener.code, None)
                    for lang in (*LANGS, VOTES):
                        self.sent.pop((listener.code, lang), None)

    # ---------------------------------------------------------------- the thread
    def _view(self, code: str) -> tuple[RoomView | None, dict | None]:
        self.reads += 1
        try:
            view = self.store().view(code)
        except RoomError as exc:
            return (None, None) if exc.code == "room_unknown" else (None, {"fault": True})
        return view, self.frame_of(self.store(), view)

    def _message(self, code: str, lang: str) -> str:
        view, frame = self._view(code)
        if view is None and frame is not None:  # a fault: say nothing new
            return json.dumps({"fault": True})
        return message(view, frame, lang)

    def _beat(self) -> None:
        with self.lock:
            held = {code: list(ls) for code, ls in self.rooms.items()}
        self.seats.run(held)

    def poll(self) -> None:
        """One pass: every watched room's version; a changed room's message to its
        listeners (only when it differs from the last one sent in that language)."""
        with self.lock:
            codes = list(self.rooms)
        for code in codes:
            self.reads += 1
            try:
                version = self.store().version(code)
            except RoomError as exc:
                if exc.code != "room_unknown":
                    continue  # a store fault: try again next pass
                version = -1
            if self.seen.get(code) == version:
                continue
            self.seen[code] = version
            view, frame = self._view(code) if version >= 0 else (None, None)
            with self.lock:
                listeners = list(self.rooms.get(code, ()))
            for lang in {x.lang for x in listeners}:
                text = message(view, frame, lang)
                if self.sent.get((code, lang)) == text:
                    continue
                self.sent[(code, lang)] = text
                for x in listeners:
                    if x.lang == lang:
                        x.offer(text)

    def _run(self) -> None:
        """Poll every :data:`POLL_S`; with a store that announces writes (Redis pub/sub:
        ``change_waiter``) wait for one instead, and poll at least every ``10 × poll_s``."""
        waiter = None
        try:
            make = getattr(self.store(), "change_waiter", None)
            waiter = make() if make is not None else None
        except Exception:  # noqa: BLE001 - no subscription: poll
            waiter = None
        while True:
            with self.lock:
                if not self.rooms:
                    self.thread = None
                    return
            started = time.monotonic()
            for step in (self.poll, self._beat):  # apart: a bad view pass still beats seats
                with contextlib.suppress(Exception):  # the thread outlives one bad pass
                    step()
            if waiter is not None:
                try:
                    waiter(10 * self.poll_s)
                    continue
                except Exception:  # noqa: BLE001 - the subscription broke: poll from now on
                    waiter = None
            time.sleep(max(0.0, self.poll_s - (time.monotonic() - started)))


# -------------------------------------------------------------------- the route
async def endpoint(websocket, hub: Hub) -> None:
    """The WebSocket route (Starlette): a refused socket is closed before its handshake (403),
    never an error page; any other failure goes to :data:`LOG` (bounded by the app)."""
    try:
        await _serve(websocket, hub)
    except Exception:  # noqa: BLE001 - one socket's fault: logged (bounded), the socket closed
        LOG.exception("live push socket failed")
        with contextlib.suppress(Exception):  # a socket that never opened: refused (403)
            await websocket.close(code=CLOSE_REFUSED)


async def _serve(websocket, hub: Hub) -> None:
    """Validate, bound, then forward messages. An ended class's tabs get :data:`ENDED` and
    :data:`CLOSE_ENDED` at no guess (they never lock their address out of the next class)."""
    peer = websocket.client.host if websocket.client else None
    who = client_key(peer, dict(websocket.headers), "ws")
    raw = websocket.query_params.get("room", "")
    lang = websocket.query_params.get("lang", "en")
    lang = lang if lang in (*LANGS, VOTES) else "en"
    store = hub.store()
    if BUCKETS.wait("guess", who):  # this address guessed too often: no lookup at all
        return await websocket.close(code=CLOSE_REFUSED)
    try:
        code = normalize_code(raw[:32])
        store.version(code)
    except RoomError as exc:
        if exc.code == "room_unknown" and store.ended(raw[:32]):
            await websocket.accept()
            await websocket.send_text(ENDED)
            return await websocket.close(code=CLOSE_ENDED)
        if exc.code == "room_unknown":
            BUCKETS.take("guess", who)
        return await websocket.close(code=CLOSE_REFUSED)
    if BUCKETS.take("connect", who):  # a connect/close loop: each connect reads the room
        return await websocket.close(code=CLOSE_REFUSED)
    listener = Listener(code, lang, who, asyncio.get_running_loop())
    signed = websocket.query_params.get("seat", "") if lang in LANGS else ""
    if signed:  # a follower's screen: its signed seat (the hub's heartbeat), else it beats
        listener.seat = read_seat(signed, code, who)  # else its page beats itself
        if listener.seat is None:
            listener.personal = SEAT_UNSIGNED
    room_cap = int(getattr(store, "max_students", 200)) + ROOM_EXTRA
    if not hub.add(listener, room_cap, followers_per_addr()):
        await websocket.close(code=CLOSE_REFUSED)
        return
    await websocket.accept()
    closed = asyncio.ensure_future(_until_closed(websocket))
    try:
        while not closed.done():
            waiter = asyncio.ensure_future(listener.wake.wait())
            await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                waiter.cancel()
                break
            listener.wake.clear()
            note, listener.personal = listener.personal, None
            if note is not None:
                await websocket.send_text(note)
            text, listener.latest = listener.latest, None
            if text is not None:
                await websocket.send_text(text)
                if text == ENDED:  # not a frame that merely holds the word
                    break
    except Exception:  # noqa: BLE001 - a client gone mid-send
        pass
    finally:
        hub.remove(listener)
        closed.cancel()


async def _until_closed(websocket) -> None:
    """Read (and drop) what the client sends until it closes; at most 1 KB a message."""
    while True:
        got = await websocket.receive()
        if got.get("type") == "websocket.disconnect":
            return
        if len(got.get("text") or got.get("bytes") or "") > 1024:
            await websocket.close(code=CLOSE_REFUSED)
            return


def routes(hub: Hub) -> list:
    """The Starlette routes to pass to ``st.App(..., routes=...)``; from now on this
    process's followers use them (:data:`ENABLED`)."""
    from starlette.routing import WebSocketRoute

    global ENABLED
    ENABLED = True

    async def live(websocket) -> None:
        await endpoint(websocket, hub)

    return [WebSocketRoute(PATH, live)]
