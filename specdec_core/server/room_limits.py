"""What one client may do per second and at once (live class; script runs), per process.

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
went quiet); the seat's other tabs poll every 10 s, and an address holds at most
``SPECDEC_FOLLOWERS_PER_ADDR`` (default 100) fast followers: 40 tabs cost what two do.

:class:`Runs` lets one browser run one script run at a time (a full run, a fragment's rerun,
a widget's callbacks; every page): its other tabs' runs wait their turn without the GIL, so
40 tabs of one browser take what one thread takes while a classmate's click runs beside
them. Kept per process: behind nginx a browser's tabs reach one replica (the route cookie);
the address bounds are per replica (×2 with two). Memory is bounded: at most
:data:`MAX_KEYS` keys per kind, the least recently used dropped.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
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


RUN_HOLD_S = 3.0  # a run holding its browser's turn longer than this lets the next one start
RUN_REST = 1.0  # after a run of d seconds, the browser's next waiting run starts d × this later
RUN_REST_MAX_S = 0.25  # ... but at most this much later (a click queued behind polls)
RUN_MAX_WAIT_S = 30.0  # a run waiting this long starts beside the others (a safety limit)


class Runs:
    """One script run at a time per browser (its key: the caller's, e.g. address and
    browser cookie). :meth:`acquire` waits, first come first served, until no other run of
    ``browser`` holds the turn or the holder has held it ``hold_s`` (a long study: the first
    in line starts beside it); calls ``on_notice`` once after ``notice_s`` of waiting. Each
    run ahead delays a waiter by its time up to ``hold_s``, plus a rest of ``rest`` × that
    time, at most ``rest_max_s`` (a browser's tabs never hold the GIL back to back, yet a
    click queues briefly behind its tabs' polls); after ``max_wait_s`` in all a waiter starts
    beside the others. A thread already in a run passes (a fragment inside its full run).
    :meth:`sleep` gives the turn up while a run sleeps. :meth:`enter` / :meth:`exit`
    bracket a script thread's whole run (before Streamlit's per-run work): a run still
    waiting after ``wait_s`` goes on, in its place in line, to :meth:`wait_pending` (before
    its widget callbacks) or its page's :meth:`acquire`, which wait on and say so. Only the
    first in line is woken (39 tabs woken at every turn would each take the GIL). Memory:
    one entry per run in flight or waiting."""

    def __init__(
        self,
        hold_s: float = RUN_HOLD_S,
        rest: float = RUN_REST,
        rest_max_s: float = RUN_REST_MAX_S,
        max_wait_s: float = RUN_MAX_WAIT_S,
    ) -> None:
        self.hold_s, self.rest, self.rest_max_s = hold_s, rest, rest_max_s
        self.max_wait_s = max_wait_s
        self._lock = threading.Lock()
        self._holder: dict[str, tuple[int, float]] = {}  # browser → (thread, since)
        self._queue: dict[str, deque[tuple[int, threading.Event]]] = {}  # waiting, in order
        self._free_at: dict[str, float] = {}  # browser → when its next waiting run may start
        self._runs: dict[int, list] = {}  # thread → [browser, depth]
        self._pending: dict[int, tuple] = {}  # entered, still in line: (browser, wake, since)

    def acquire(
        self, browser: str, notice_s: float = math.inf, on_notice: Callable | None = None
    ) -> float:
        """Wait for ``browser``'s turn and take it (a run :meth:`enter` left waiting waits
        on in its place, told at once); returns the seconds waited."""
        me, start = threading.get_ident(), time.monotonic()
        with self._lock:
            if me in self._runs:
                self._runs[me][1] += 1
                return 0.0
            pending = self._pending.pop(me, None)
            if pending is None:
                wake, since = threading.Event(), start
                self._queue.setdefault(browser, deque()).append((me, wake))
            else:
                (browser, wake, since), notice_s = pending, 0.0
        deadline = since + self.max_wait_s
        try:
            if not self._turn(browser, me, wake, start + notice_s, deadline):
                if on_notice is not None:
                    on_notice()  # may raise (Streamlit stops a run replaced by a newer click)
                self._turn(browser, me, wake, math.inf, deadline)
        except BaseException:
            with self._lock:
                self._leave(browser, me)
            raise
        return time.monotonic() - start

    def wait_pending(self, on_notice: Callable | None = None) -> bool:
        """If :meth:`enter` left this thread waiting, wait on in its place now (told at
        once) and take the turn, held until :meth:`exit`; returns whether it waited."""
        with self._lock:
            pending = self._pending.get(threading.get_ident())
        if pending is not None:
            self.acquire(pending[0], 0.0, on_notice)
        return pending is not None

    def enter(self, browser: str, wait_s: float) -> None:
        """A script thread's run starts: wait up to ``wait_s`` for the turn (see above)."""
        me, start, wake = threading.get_ident(), time.monotonic(), threading.Event()
        with self._lock:
            if me in self._runs:
                self._runs[me][1] += 1
                return
            self._queue.setdefault(browser, deque()).append((me, wake))
        try:
            taken = self._turn(browser, me, wake, start + wait_s, start + self.max_wait_s)
        except BaseException:
            with self._lock:
                self._leave(browser, me)
            raise
        if not taken:
            with self._lock:
                self._pending[me] = (browser, wake, start)

    def exit(self) -> None:
        """The run :meth:`enter` began ends (its place in line, if still waiting, is left)."""
        me = threading.get_ident()
        with self._lock:
            pending = self._pending.pop(me, None)
            if pending is not None:
                self._leave(pending[0], me)
                return
        self.release()

    def _turn(
        self, browser: str, me: int, wake: threading.Event, until: float, deadline: float
    ) -> bool:
        while True:
            with self._lock:
                now = time.monotonic()
                held, first = self._holder.get(browser), self._queue[browser][0][0] == me
                free_at = self._free_at.get(browser, 0.0)
                free = now >= free_at if held is None else now - held[1] > self.hold_s
                if now >= deadline:  # waited too long: starts beside the others, holds nothing
                    self._leave(browser, me)
                    self._runs[me] = [browser, 1]
                    return True
                if first and free:
                    self._free_at.pop(browser, None)
                    self._leave(browser, me)
                    self._holder[browser] = (me, now)
                    self._runs[me] = [browser, 1]
                    return True
                if now >= until:
                    return False
                due = free_at if held is None else held[1] + self.hold_s + 0.01
                due = min(until, deadline, due if first else math.inf)
                wake.clear()
            wake.wait(None if due == math.inf else max(0.001, due - now))

    def _leave(self, browser: str, me: int) -> None:
        queue = self._queue.get(browser, deque())
        for entry in queue:
            if entry[0] == me:
                queue.remove(entry)
                break
        if queue:
            self._wake(browser)  # the new first in line: its turn, or its hold timer
        else:
            self._queue.pop(browser, None)
            self._free_at.pop(browser, None)

    def _wake(self, browser: str) -> None:
        if self._queue.get(browser):
            self._queue[browser][0][1].set()

    def _drop(self, browser: str, me: int) -> None:
        held = self._holder.get(browser)
        if held is not None and held[0] == me:
            del self._holder[browser]
            if self._queue.get(browser):
                now = time.monotonic()
                rest = min(self.rest_max_s, self.rest * (now - held[1]))
                self._free_at[browser] = now + rest
                self._wake(browser)

    def release(self) -> None:
        """End this thread's run (or one nested level of it)."""
        me = threading.get_ident()
        with self._lock:
            run = self._runs.get(me)
            if run is None:
                return
            run[1] -= 1
            if run[1] == 0:
                del self._runs[me]
                self._drop(run[0], me)

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` without holding this thread's turn (taken again after)."""
        me = threading.get_ident()
        with self._lock:
            run = self._runs.pop(me, None)
            if run is not None:
                self._drop(run[0], me)
        time.sleep(seconds)
        if run is not None:
            self.acquire(run[0])
            with self._lock:
                self._runs[me][1] = run[1]

    def waiting(self, browser: str) -> int:
        """Runs of ``browser`` waiting now (benchmarks, tests)."""
        with self._lock:
            return len(self._queue.get(browser, ()))


BUCKETS = Buckets()
TABS = Tabs()
RUNS = Runs()
