"""Bound the server's log output: repeated errors are collapsed, every record is capped.

A student can make the server log the same traceback again and again (a malformed widget
value, a rerun flood: 3.6–5.5 KB a message, ≈ 1 GB an hour at 50 messages a second), and
Streamlit's loggers write to stderr, which Docker or ``deploy/replicas.py`` keeps on disk.
:class:`RepeatGuard` is a :class:`logging.Filter` put on every handler of every logger
(Streamlit's loggers do not propagate: each has its own handler). For records at WARNING
and above it keys each record by its *signature* -- logger name, level, the message
template (not its arguments), the exception type and the place it was raised -- and per
signature and per :data:`WINDOW_S` (60 s) passes the first :data:`FULL_PER_WINDOW` (5)
records in full, then one line saying that more are being suppressed, then nothing; the
first record of the next window carries the count of the previous one. Every record that
passes is capped: message ≤ :data:`MAX_MESSAGE` characters, traceback ≤
:data:`MAX_TRACEBACK` (head and tail kept). At most :data:`MAX_SIGNATURES` signatures are
tracked; any further ones share one. INFO and below (e.g. the profile lines of
``SPECDEC_PROFILE``) pass untouched.

Bound: per signature and per minute at most 5 × (12 KB + 4 KB) + one line ≈ 80 KB,
whatever the rate; one student, who can reach a handful of signatures, ≈ 5 MB an hour
each at most (was ≈ 1 GB). :func:`install_in_server` runs when ``specdec_core.ui`` is
first imported (before any page module, so even an import error is guarded) and at every
full app run (cheap: it only looks again when loggers were added); it does nothing
outside a Streamlit server (tests, AppTest, the CLI keep their logging as it is).

A plain logging module (Streamlit is imported only to ask whether a server runs).
"""

from __future__ import annotations

import logging
import threading
import time

WINDOW_S = 60.0  # the period of the budget
FULL_PER_WINDOW = 5  # records of one signature passed in full per window
MAX_MESSAGE = 4_000  # characters of a passed record's message
MAX_TRACEBACK = 12_000  # characters of a passed record's traceback (head + tail)
MAX_SIGNATURES = 256  # signatures tracked at once; more share the "other" bucket
_OTHER = ("logguard", "other")


def _cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    half = limit // 2
    return f"{text[:half]}\n… [{cut:,} characters cut by logguard] …\n{text[-half:]}"


def signature(record: logging.LogRecord) -> tuple:
    """What makes two records "the same error": logger, level, message template (the
    first 200 characters of ``record.msg``, not the formatted arguments), exception type
    and the file:line it was raised at."""
    where, kind = "", ""
    if record.exc_info and record.exc_info[0] is not None:
        kind = record.exc_info[0].__name__
        tb = record.exc_info[2]
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    return (record.name, record.levelno, str(record.msg)[:200], kind, where)


class _Window:
    __slots__ = ("start", "passed", "suppressed", "carried")

    def __init__(self, start: float) -> None:
        self.start, self.passed, self.suppressed, self.carried = start, 0, 0, 0


class RepeatGuard(logging.Filter):
    """The filter (see the module docstring). ``clock``: seconds, monotonic (tests pass a
    fake one). Thread-safe; a record seen by several handlers is judged once."""

    def __init__(self, clock=time.monotonic) -> None:
        super().__init__("specdec-logguard")
        self.clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple, _Window] = {}
        self.suppressed_total = 0

    def filter(self, record: logging.LogRecord) -> bool:
        verdict = getattr(record, "_specdec_logguard", None)
        if verdict is not None:  # already judged by another handler's copy of this filter
            return verdict
        verdict = self._judge(record) if record.levelno >= logging.WARNING else True
        record._specdec_logguard = verdict
        return verdict

    def _judge(self, record: logging.LogRecord) -> bool:
        key = signature(record)
        now = self.clock()
        with self._lock:
            w = self._windows.get(key)
            if w is None and len(self._windows) >= MAX_SIGNATURES:
                key = _OTHER
                w = self._windows.get(key)
            if w is None:
                w = self._windows[key] = _Window(now)
            elif now - w.start >= WINDOW_S:  # a new window: carry the last one's count
                w.carried = w.suppressed
                w.start, w.passed, w.suppressed = now, 0, 0
            if w.passed < FULL_PER_WINDOW:
                w.passed += 1
                carried, w.carried = w.carried, 0
                self._shrink(record, carried)
                return True
            w.suppressed += 1
            self.suppressed_total += 1
            if w.suppressed > 1:
                return False
        # the first one over the budget: one line instead of the record
        record.msg = (
            f"[logguard] more records like this are suppressed for up to "
            f"{WINDOW_S:.0f} s: {_cap(str(record.msg), 200)}"
        )
        record.args, record.exc_info, record.exc_text, record.stack_info = None, None, None, None
        return True

    @staticmethod
    def _shrink(record: logging.LogRecord, carried: int) -> None:
        """Cap the record's message and traceback in place; prefix the carried count."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: keep the template
            message = str(record.msg)
        message = _cap(message, MAX_MESSAGE)
        if carried:
            message = f"[logguard] {carried} more like this suppressed last window. {message}"
        record.msg, record.args = message, None
        if record.exc_info and not record.exc_text:
            record.exc_text = _cap(
                logging.Formatter().formatException(record.exc_info), MAX_TRACEBACK
            )
        elif record.exc_text:
            record.exc_text = _cap(record.exc_text, MAX_TRACEBACK)
        if record.stack_info:
            record.stack_info = _cap(record.stack_info, MAX_TRACEBACK)


GUARD = RepeatGuard()
_seen = {"loggers": -1, "at": 0.0}
_install_lock = threading.Lock()


def install(guard: RepeatGuard = GUARD, force: bool = False) -> int:
    """Put ``guard`` on every handler of every logger (and the root's) that lacks it.
    Looks again only when loggers were added or a minute has passed (handlers can be
    replaced, e.g. by Streamlit's ``update_formatter``), unless ``force``. Returns the
    number of handlers it was added to."""
    manager = logging.Logger.manager
    now = time.monotonic()
    with _install_lock:
        if (
            not force
            and len(manager.loggerDict) == _seen["loggers"]
            and now - _seen["at"] < WINDOW_S
        ):
            return 0
        _seen["loggers"], _seen["at"] = len(manager.loggerDict), now
        added = 0
        loggers = [logging.getLogger()] + [
            lg for lg in list(manager.loggerDict.values()) if isinstance(lg, logging.Logger)
        ]
        for lg in loggers:
            for handler in list(lg.handlers):
                if guard not in handler.filters:
                    handler.addFilter(guard)
                    added += 1
        return added


def install_in_server() -> int:
    """:func:`install` when this process is a running Streamlit server; else nothing."""
    try:
        from streamlit import runtime
    except ImportError:  # pragma: no cover - streamlit is a dependency
        return 0
    return install() if runtime.exists() else 0
