"""The push hub's duties for the follower screens it holds, so that an idle follower tab
costs no Streamlit run at all: the seat's heartbeat and the seat's fast tab.

A follower's page signs its seat into the socket's URL (:func:`token`: the room code, the
seat id, the tab and the client, with an HMAC under a key this process drew at start; the
page and its socket reach the same process through the route cookie, so no other client can
forge or reuse one). For the sockets that carry a valid token the hub's thread
(:meth:`SeatBeats.run`, once a :data:`TABS_S`):

* tells ``room_limits.TABS`` that the tab is alive (a tab whose socket is open is its
  seat's fast follower until another tab of the seat claims it); a socket whose tab lost
  that place gets ``{"tab": "other"}`` once, and its page reruns its follower (which then
  says "open in another tab");
* writes the heartbeats of each room's seats every :data:`BEAT_S` as ONE store call
  (``RoomStore.heartbeats``: one SQLite transaction) and renews their holds for the
  token's client (``RoomStore.hold``: one more); a seat the store refused (removed by the
  teacher, a full room, held by another address) gets ``{"seat": "refused"}`` and its page
  joins again itself (and shows why). A token is good only from the address it names.

Bounds: a token is at most :data:`MAX_TOKEN` characters; one heartbeat call names at most the
room's seat bound (the store cuts it); the notes are one short message per listener.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable

from specdec_core.server.room_limits import TABS
from specdec_core.server.room_types import RoomError

#: ``SPECDEC_LIVE_HUB_SEATS=0``: the pages beat themselves every 10 s instead (the route
#: before the hub kept seats; benchmarks compare the two)
HUB_SEATS = os.environ.get("SPECDEC_LIVE_HUB_SEATS", "1") != "0"
MAX_TOKEN = 400
BEAT_S = 20.0  # a seat's heartbeat (well inside the store's seat TTL)
TABS_S = 1.0  # the tabs' places checked this often (in-process, no store call)
TAB_OTHER = json.dumps({"tab": "other"})
SEAT_REFUSED = json.dumps({"seat": "refused"})
SEAT_UNSIGNED = json.dumps({"seat": "unsigned"})  # a token this process did not make
_KEY = secrets.token_bytes(32)  # this process's: a token is good on the replica that made it


def _mac(body: str) -> str:
    return hmac.new(_KEY, body.encode("ascii"), hashlib.sha256).hexdigest()[:32]


def token(code: str, student: str, tab: str, client: str) -> str:
    """The seat token a follower's page puts in its push socket's URL."""
    raw = json.dumps([code.upper(), student, tab, client], separators=(",", ":"))
    body = base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{body}.{_mac(body)}"


def read(text: str, code: str, client: str | None = None) -> tuple[str, str, str] | None:
    """``(student, tab, client)`` of a token made by this process for room ``code`` (and,
    given ``client``, for that client: a leaked link is no good from another address),
    else ``None`` (too long, malformed, another room's or client's, a bad MAC)."""
    if not isinstance(text, str) or len(text) > MAX_TOKEN or text.count(".") != 1:
        return None
    body, mac = text.split(".")
    if not (body.isascii() and mac.isascii()) or not hmac.compare_digest(mac, _mac(body)):
        return None
    try:
        fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError:
        return None
    if not isinstance(fields, list) or len(fields) != 4:
        return None
    if not all(isinstance(f, str) for f in fields):
        return None
    room, student, tab, who = fields
    mine = room == code.upper() and client in (None, who)
    return (student, tab, who) if mine else None


class SeatBeats:
    """The hub thread's seat work. ``store``: the process's room store."""

    def __init__(self, store: Callable, clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.clock = store, clock
        self.beat_at: dict[str, float] = {}  # code → the last heartbeat written
        self.checked_at = 0.0
        self.writes = 0  # heartbeat calls made (benchmarks)

    def run(self, rooms: dict[str, list]) -> None:
        """One pass over the rooms' listeners (``code → listeners``, a snapshot); does
        nothing until :data:`TABS_S` passed since the last pass."""
        now = self.clock()
        if now - self.checked_at < TABS_S:
            return
        self.checked_at = now
        for code in list(self.beat_at):
            if code not in rooms:
                del self.beat_at[code]
        for code, listeners in rooms.items():
            seated = [x for x in listeners if x.seat is not None]
            for x in seated:
                student, tab, client = x.seat
                fast = TABS.poll(student, tab, client)
                if not fast and x.fast:
                    x.note(TAB_OTHER)
                x.fast = fast
            if seated and now - self.beat_at.get(code, -BEAT_S) >= BEAT_S:
                self.beat_at[code] = now
                self._beat(code, seated)

    def _beat(self, code: str, seated: list) -> None:
        holders: dict[str, str] = {}  # student → the client its screens here claim it for
        for x in seated:
            holders.setdefault(x.seat[0], x.seat[2])
        self.writes += 1
        try:
            refused = self.store().heartbeats(code, sorted(holders))
            refused.update(self.store().hold(code, holders))  # another address holds it
        except RoomError:
            return  # a fault or a gone room: the pages' own checks say so
        for x in seated:  # its page joins (and claims) again itself, and says why
            if x.seat[0] in refused or x.seat[2] != holders[x.seat[0]]:
                x.note(SEAT_REFUSED)
