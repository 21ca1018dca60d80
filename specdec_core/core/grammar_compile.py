"""Bounded grammar compiles: what one server process lets a grammar cost.

A regex of 250 ``(.?)`` groups fits in a 74-character lesson link and would compile for
over an hour (xgrammar's time grows ≈ n^2.4 with consecutive optional wildcards: 0.4 CPU-s
at 40, 1.8 at 80, 8.5 at 160 on the embedded pair's 4,096 tokens, ≈ 10× that on GPT-2's
50,257). So, in order:

1. **Cost bound**, before anything runs: a regex (or a JSON schema's regexes together)
   with more than :data:`MAX_OPTIONAL` optional atoms (``?`` quantifiers and empty
   alternatives, :func:`optional_atoms`) is refused (``grammar_costly``). Cheap shapes
   (``.*``, ``{0,n}``, alternations of literals) are not counted: they compile in
   milliseconds at any length.
2. **Cache with in-flight de-duplication**, keyed by (tokenizer, vocabulary size, kind,
   source): a grammar compiles at most once at a time per process; its waiters share the
   result. A compile that overran or did not parse is remembered for
   :data:`REFUSED_TTL_S` and refused at once.
3. **Per-client budget** (the client is the session's address, :data:`CLIENT_OF`, a hook
   the UI installs): one compile of its own at a time, and at most
   :data:`CLIENT_BUDGET_S` seconds of compiling (each compile charged at least
   :data:`MIN_CHARGE_S`) per :data:`CLIENT_WINDOW_S` (``grammar_busy``, ``grammar_rate``).
4. **Per-process cap**: :data:`MAX_COMPILES` compiles at once (``grammar_busy`` for the
   next after waiting its bound).
5. **The bound itself**: the compile runs in a child process killed when
   :data:`GRAMMAR_COMPILE_S` ends (``grammar_slow``), or as soon as every tab that asked
   for it has closed (:data:`ALIVE_OF`), so nothing runs on after it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar_child import Child, ChildGone, ChildStopped, ChildTimeout

GRAMMAR_COMPILE_S = 5.0  # longest a compile may run, seconds


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


#: (.?) × 32: 0.2 CPU-s on 4,096 tokens; × 80: 1.8 CPU-s. The benchmark raises it
#: (``SPECDEC_GRAMMAR_MAX_OPTIONAL``) to time the bound itself.
MAX_OPTIONAL = _env_int("SPECDEC_GRAMMAR_MAX_OPTIONAL", 32)
MAX_COMPILES = 2  # compiles at once per server process
CLIENT_BUDGET_S, CLIENT_WINDOW_S, MIN_CHARGE_S = 12.0, 60.0, 0.25
REFUSED_TTL_S = 600.0  # a grammar that overran is refused at once for this long
CACHE_ENTRIES = 32  # compiled grammars kept per process (≤ a few MB each)

#: Who is compiling: the UI sets a function that names the running session's client
#: (``addr:<ip>``); ``None`` (or a function returning ``None``) means no per-client budget.
CLIENT_OF: Callable[[], str | None] | None = None
#: Whether the running session still has a tab: the UI sets a function that returns, for
#: the calling thread, a check "is this session still connected?" (or ``None``). A compile
#: all of whose waiters' tabs closed is stopped at once.
ALIVE_OF: Callable[[], Callable[[], bool] | None] | None = None


def optional_atoms(regex: str) -> int:
    """How many optional atoms ``regex`` has: ``?`` used as a quantifier (not ``(?``, not a
    lazy ``*?`` / ``+?`` / ``??`` / ``}?`` suffix, not escaped, not in a ``[...]`` class)
    plus empty alternatives (``(|``, ``||``, ``|)``, a leading or trailing ``|``)."""
    count, i, n, in_class, prev = 0, 0, len(regex), False, ""
    while i < n:
        c = regex[i]
        if c == "\\":
            i, prev = i + 2, "a"
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "?" and prev not in ("(", "?", "*", "+", "}", ""):
            count += 1
        elif c == "|" and (prev in ("(", "|", "") or i + 1 == n or regex[i + 1] == ")"):
            count += 1
        prev = "a" if in_class else c
        i += 1
    return count


def schema_optional_atoms(source: str) -> int:
    """:func:`optional_atoms` summed over every regex in a JSON schema's text: each
    ``pattern`` value and each ``patternProperties`` name (xgrammar compiles them as
    regexes: ``{"pattern": "(.?)" × 80}`` costs what the bare regex does). 0 when the
    text is not JSON (the parser's error is reported elsewhere)."""
    import json

    try:
        stack: list[object] = [json.loads(source)]
    except (ValueError, RecursionError):
        return 0
    count = 0
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    count += optional_atoms(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    count += sum(optional_atoms(k) for k in value)
                stack.append(value)
    return count


@dataclass
class _Flight:
    """One compile in progress and whoever waits for it (``alive``: one liveness check per
    waiter, ``None`` for a waiter that cannot tell, who then waits to the end)."""

    done: threading.Event = field(default_factory=threading.Event)
    compiled: object | None = None
    error: ConfigError | None = None
    alive: list[Callable[[], bool] | None] = field(default_factory=list)

    def abandoned(self) -> bool:
        """Every waiter's tab is gone: the compile has no one to serve."""
        with _LOCK:
            checks = list(self.alive)
        return bool(checks) and all(c is not None and not c() for c in checks)


_LOCK = threading.Lock()
_SLOTS = threading.BoundedSemaphore(MAX_COMPILES)
_CACHE: OrderedDict[tuple, object] = OrderedDict()
_REFUSED: OrderedDict[tuple, tuple[ConfigError, float]] = OrderedDict()
_FLIGHTS: dict[tuple, _Flight] = {}
_IDLE: list[Child] = []
_RUNNING: dict[int, Child] = {}  # pid → child compiling now (tests, the benchmark)
_INFOS: dict[str, tuple[object, object, str]] = {}  # key → (tokenizer, TokenizerInfo, JSON)
_CLIENTS: dict[str, list[tuple[float, float]]] = {}  # client → (ended at, seconds) charged
_BUSY_CLIENTS: set[str] = set()
STATS = {"compiles": 0, "children": 0}  # compiles sent to a child, children started


def _tokenizer_key(tokenizer: object, vocab_size: int) -> str:
    import xgrammar as xgr

    key = f"{id(tokenizer)}:{vocab_size}"
    with _LOCK:
        held = _INFOS.get(key)
        if held is None or held[0] is not tokenizer:  # the tokenizer is held: ids stay unique
            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
            _INFOS[key] = (tokenizer, info, info.serialize_json())
    return key


def _client_check(client: str, now: float) -> None:  # with _LOCK held
    if client in _BUSY_CLIENTS:
        raise ConfigError(
            "another grammar of yours is compiling: wait for it", "grammar_busy", reason="you"
        )
    spent = [(end, s) for end, s in _CLIENTS.get(client, []) if end > now - CLIENT_WINDOW_S]
    _CLIENTS[client] = spent
    total = sum(s for _, s in spent)
    if total >= CLIENT_BUDGET_S:
        free_at, left = now, total
        for end, s in spent:  # oldest first: wait until enough of the window has passed
            left, free_at = left - s, end + CLIENT_WINDOW_S
            if left < CLIENT_BUDGET_S:
                break
        wait = max(1, round(free_at - now))
        raise ConfigError(
            f"your address used its {CLIENT_BUDGET_S:g} s of grammar compiling per "
            f"{CLIENT_WINDOW_S:g} s: try again in {wait} s",
            "grammar_rate",
            seconds=wait,
        )


def compile_bounded(tokenizer: object, vocab_size: int, kind: str, source: str) -> object:
    """``xgrammar.CompiledGrammar`` for ``source`` (a regex or JSON-schema text, already
    validated), within the limits of the module docstring.

    Raises:
        ConfigError: codes ``grammar_costly`` (params ``count``, ``limit``), ``grammar_slow``
        (``seconds``), ``grammar_busy`` (``reason="you"``: this client has one compiling;
        no reason: the server's cap is reached), ``grammar_rate`` (``seconds`` to wait),
        ``grammar_bad`` (``reason``: xgrammar's message), ``grammar_child`` (the compile
        process died).
    """
    count = optional_atoms(source) if kind == "regex" else schema_optional_atoms(source)
    if count > MAX_OPTIONAL:
        raise ConfigError(
            f"the grammar has {count} optional parts; at most {MAX_OPTIONAL} are compiled",
            "grammar_costly",
            count=count,
            limit=MAX_OPTIONAL,
        )
    tok_key = _tokenizer_key(tokenizer, vocab_size)
    key = (tok_key, kind, source)
    client = CLIENT_OF() if CLIENT_OF is not None else None
    alive = ALIVE_OF() if ALIVE_OF is not None else None
    now = time.monotonic()
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        refused = _REFUSED.get(key)
        if refused is not None and refused[1] > now:
            raise refused[0]
        flight = _FLIGHTS.get(key)
        owner = flight is None
        if owner:
            if client is not None:
                _client_check(client, now)
                _BUSY_CLIENTS.add(client)
            flight = _FLIGHTS[key] = _Flight()
        flight.alive.append(alive)
    if not owner:  # the same grammar is compiling: share its result
        flight.done.wait()
    else:
        try:
            flight.compiled = _run(key, _INFOS[tok_key][2], flight.abandoned)
        except ConfigError as exc:
            flight.error = exc
        finally:
            with _LOCK:
                _FLIGHTS.pop(key, None)
                if client is not None:
                    _BUSY_CLIENTS.discard(client)
                    charge = max(MIN_CHARGE_S, time.monotonic() - now)
                    _CLIENTS.setdefault(client, []).append((time.monotonic(), charge))
            flight.done.set()
    if flight.error is not None:
        raise flight.error
    return flight.compiled


def _run(key: tuple, tokenizer_json: str, abandoned: Callable[[], bool]) -> object:
    """Compile ``key`` in a child under the process cap (stopped when ``abandoned()``);
    cache the outcome."""
    import xgrammar as xgr

    tok_key, kind, source = key
    if not _SLOTS.acquire(timeout=GRAMMAR_COMPILE_S):
        raise ConfigError("the server is compiling other grammars: try again", "grammar_busy")
    child: Child | None = None
    try:
        with _LOCK:
            child = _IDLE.pop() if _IDLE else None
            STATS["compiles"] += 1
        if child is None or not child.alive():
            child = Child()
            STATS["children"] += 1
        _RUNNING[child.pid] = child
        try:
            status, payload = child.compile(
                tok_key, tokenizer_json, kind, source, GRAMMAR_COMPILE_S, abandoned
            )
        except ChildTimeout:
            error = ConfigError(
                f"the grammar took longer than {GRAMMAR_COMPILE_S:g} s to compile",
                "grammar_slow",
                seconds=GRAMMAR_COMPILE_S,
            )
            _remember(key, error)
            raise error from None
        except ChildStopped:  # no tab waits: not remembered (it may not be slow)
            raise ConfigError(
                "every tab that asked for the grammar closed", "grammar_busy"
            ) from None
        except ChildGone as exc:
            raise ConfigError(str(exc), "grammar_child") from None
        finally:
            _RUNNING.pop(child.pid, None)
        if status != "ok":
            reason = library_reason(str(payload))
            error = ConfigError(
                f"the grammar does not compile: {reason}", "grammar_bad", reason=reason
            )
            _remember(key, error)
            raise error
        compiled = xgr.CompiledGrammar.deserialize_json(payload, _INFOS[tok_key][1])
        with _LOCK:
            _CACHE[key] = compiled
            while len(_CACHE) > CACHE_ENTRIES:
                _CACHE.popitem(last=False)
        return compiled
    finally:
        spare = child if child is not None and child.alive() else None
        with _LOCK:
            if spare is not None and not _IDLE:  # one idle child at most (≈ 275 MB RSS)
                _IDLE.append(spare)
                spare = None
        if spare is not None:
            spare.kill()
        _SLOTS.release()


def _remember(key: tuple, error: ConfigError) -> None:
    with _LOCK:
        _REFUSED[key] = (error, time.monotonic() + REFUSED_TTL_S)
        while len(_REFUSED) > 256:
            _REFUSED.popitem(last=False)


def library_reason(message: str) -> str:
    """xgrammar's message without its ``[time] path.cc:line:`` prefix, first line only."""
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    return re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", first)[:160]


def running_pids() -> list[int]:
    """Process ids of the children compiling now (tests, the benchmark)."""
    return list(_RUNNING)


def child_pids() -> list[int]:
    """Process ids of every compile child alive (idle or compiling)."""
    with _LOCK:
        kids = [*_IDLE, *_RUNNING.values()]
    return [c.pid for c in kids if c.alive()]


def prestart() -> None:
    """Start one compile child now (a server's start: its ≈ 2 CPU-s import is then not
    paid inside the first student's bound); no-op when one is there."""
    with _LOCK:
        if not any(c.alive() for c in [*_IDLE, *_RUNNING.values()]):
            _IDLE.append(Child())
            STATS["children"] += 1


def reset(stop_children: bool = False) -> None:
    """Forget the cache, the refusals and the budgets; stop the idle children too if asked
    (tests)."""
    with _LOCK:
        _CACHE.clear()
        _REFUSED.clear()
        _CLIENTS.clear()
        idle = list(_IDLE) if stop_children else []
        _IDLE[:] = [] if stop_children else _IDLE
    for child in idle:
        child.kill()
