"""What one client may do to the live class per second, kept in this process.

The room store bounds what is *stored* per client (rooms per address and per hour, seats
that free themselves); this module bounds the *rate* of what a client sends, before the
store sees it. Each limit is a token bucket per key (:class:`Buckets`); the keys are a
client (``addr:<ip>``, :func:`specdec_core.server.jobs.client_key`) or a seat id:

* ``join`` — join attempts per address: a burst of 120 (a class behind one school NAT
  joining together), then 2 a second;
* ``guess`` — room codes that named no room, per address: a burst of 10, then one every 5 s
  (a typo costs nothing; 35 guesses a second become 0.2);
* ``answer`` — answers stored per seat: a burst of 6, then one every 2 s (an answer that
  waits is sent when its token arrives: the last choice wins, nothing is refused);
* ``last_answer`` — per seat, one answer a minute past the ``answer`` bucket, sent at once
  when its token would arrive after the countdown's end (it would be refused as late).

:class:`Tabs` makes one tab per browser seat *the* follower that polls every second (the
newest to join, the one where "Follow in this tab" was clicked, or any tab when that one
went quiet); the seat's other tabs poll every 10 s, and an
address holds at most ``SPECDEC_FOLLOWERS_PER_ADDR`` (default 100) fast followers, so 40
tabs of one browser cost what two do. Kept per process: behind nginx a browser's tabs reach
one replica (the route cookie), so the seat bound holds across replicas; the address bounds
are per replica (×2 with two replicas). Memory is bounded: at most :data:`MAX_KEYS` keys per
kind, the least recently used dropped.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

MAX_KEYS = 20_000
FOLLOWERS_ENV = "SPECDEC_FOLLOWERS_PER_ADDR"
QUIET_S = 5.0  # a fast follower not seen for this long hands the seat's polling on


@dataclass(frozen=True)
class Rate:
    """A token bucket's shape: ``burst`` tokens, refilled at ``per_s`` a second."""

    burst: float
    per_s: float


RATES = {
    "join": Rate(120, 2.0),
    "guess": Rate(10, 0.2),
    "connect": Rate(240, 8.0),  # push sockets to a live room, per address (a class's NAT)
    "answer": Rate(6, 0.5),
    "last_answer": Rate(1, 1 / 60),
}


class Buckets:
    """Token buckets per ``(kind, key)`` (kinds: :data:`RATES`), thread-safe, bounded.
    ``clock``: monotonic seconds (injected in tests)."""

    def __init__(self, rates: dict[str, Rate] | None = None, clock=time.monotonic) -> None:
        self.rates = dict(RATES if rates is None else rates)
        self.clock = clock
        self._held: dict[str, OrderedDict[str, tuple[float, float]]] = {
            k: OrderedDict() for k in self.rates
        }
        self._lock = threading.Lock()

    def _level(self, kind: str, key: str, now: float) -> float:
        rate = self.rates[kind]
        tokens, last = self._held[kind].get(key, (rate.burst, now))
        return min(rate.burst, tokens + (now - last) * rate.per_s)

    def wait(self, kind: str, key: str) -> float:
        """Seconds until ``key`` has a token of ``kind`` (0: one is there); takes none."""
        with self._lock:
            level = self._level(kind, key, self.clock())
        return 0.0 if level >= 1.0 else (1.0 - level) / self.rates[kind].per_s

    def take(self, kind: str, key: str) -> float:
        """Take a token: returns 0 when taken, else the seconds to wait (nothing taken)."""
        with self._lock:
            now = self.clock()
            level = self._level(kind, key, now)
            held = self._held[kind]
            if level < 1.0:
                return (1.0 - level) / self.rates[kind].per_s
            held[key] = (level - 1.0, now)
            held.move_to_end(key)
            while len(held) > MAX_KEYS:
                held.popitem(last=False)
            return 0.0


def wait_s(seconds: float) -> int:
    """Seconds to wait as a message shows them (whole, at least 1)."""
    return max(1, math.ceil(seconds))


def followers_per_addr() -> int:
    try:
        return max(1, int(os.environ.get(FOLLOWERS_ENV, 100)))
    except ValueError:
        return 100


class Tabs:
    """Which tab of a seat polls fast. :meth:`poll` is called on every poll of a tab with
    its seat, its session id and its client; it answers whether this tab is the seat's fast
    follower: the last to :meth:`claim` it (or the first to poll); when that one has not polled
    for :data:`QUIET_S` (closed), the next tab that polls takes over. An address holds at
    most ``limit`` fast seats (default :func:`followers_per_addr`)."""

    def __init__(self, limit: int | None = None, clock=time.monotonic) -> None:
        self.limit = followers_per_addr() if limit is None else limit
        self.clock = clock
        self._fast: OrderedDict[str, tuple[str, float]] = OrderedDict()  # seat → (tab, seen)
        self._by_client: dict[str, OrderedDict[str, float]] = {}  # client → {seat: seen}
        self._lock = threading.Lock()

    def claim(self, seat: str, tab: str, client: str) -> bool:
        """``tab`` becomes ``seat``'s fast follower (a new tab, or "use this tab");
        returns whether it is (the address may be at its bound)."""
        with self._lock:
            return self._set(seat, tab, client, self.clock())

    def poll(self, seat: str, tab: str, client: str) -> bool:
        """Whether ``tab`` polls fast now (see the class docstring)."""
        with self._lock:
            now = self.clock()
            held = self._fast.get(seat)
            if held is not None and held[0] == tab:
                return self._set(seat, tab, client, now)
            if held is None or now - held[1] > QUIET_S:
                return self._set(seat, tab, client, now)
            return False

    def _set(self, seat: str, tab: str, client: str, now: float) -> bool:
        seats = self._by_client.setdefault(client, OrderedDict())
        for other, seen in list(seats.items()):  # seats of this address gone quiet
            if now - seen > QUIET_S:
                del seats[other]
        if seat not in seats and len(seats) >= self.limit:
            return False
        seats[seat] = now
        seats.move_to_end(seat)
        self._fast[seat] = (tab, now)
        self._fast.move_to_end(seat)
        while len(self._fast) > MAX_KEYS:
            self._fast.popitem(last=False)
        if len(self._by_client) > MAX_KEYS:
            self._by_client.pop(next(iter(self._by_client)))
        return True


BUCKETS = Buckets()
TABS = Tabs()
