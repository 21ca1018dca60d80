"""Bounded grammar compiles (``core/grammar_compile.py``, ``core/grammar_child.py``): the
cost bound, a compile that ends (its process killed) when its bound ends and spends no CPU
after, one compile of the same grammar at a time, the per-client budget, the per-process
cap, and a grammar compiled in the child that masks exactly like one compiled here."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer

from specdec_core.core import grammar_compile as G
from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec, GrammarState, compile_grammar
from specdec_core.core.models import EMBEDDED_DIR

V = 4096
BOMB = "(.?)" * 250  # the lesson-link bomb: over an hour of compiling without a bound


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(EMBEDDED_DIR / "target")


@pytest.fixture
def fresh(monkeypatch):
    """A clean compile state (cache, refusals, budgets; the children stay) and no client."""
    G.reset()
    monkeypatch.setattr(G, "CLIENT_OF", None)
    yield monkeypatch
    G.reset()


def _bomb_in_a_tab(tok) -> threading.Thread:
    """The bomb compiling in another thread (refused when its bound ends)."""

    def tab() -> None:
        with pytest.raises(ConfigError):
            compile_grammar(tok, V, GrammarSpec("regex", BOMB))

    thread = threading.Thread(target=tab)
    thread.start()
    return thread


def _children_ready(tok, n: int) -> None:
    """``n`` compile children started and ready (``n`` grammars compiled at once, with a
    bound long enough for a start-up on a loaded machine), so a test times only its own."""
    threads = [
        threading.Thread(target=compile_grammar, args=(tok, V, GrammarSpec("regex", f"w{i}")))
        for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (a killed child is reaped)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.mark.parametrize(
    "regex, count",
    [
        ("abc", 0),
        ("(.?)" * 3, 3),  # three optional wildcards
        (r"a\?b", 0),  # an escaped ? is a character
        ("[?]x", 0),  # so is ? inside a class
        ("(?:ab)+", 0),  # (? opens a group, + is not optional
        ("a*?b+?c??", 1),  # lazy suffixes are not new atoms; ?? is one optional c
        ("(a|)(|b)(a||b)", 3),  # empty alternatives are optional too
        ("x{1,3}?", 0),  # a lazy counted repeat
        (r"(ROMEO|JULIET|NURSE): [A-Za-z ,.;'!?]{1,80}\n", 0),  # the preset
        ("|a", 1),
        ("a|", 1),
    ],
)
def test_optional_atoms_counts_the_costly_parts(regex, count):
    assert G.optional_atoms(regex) == count


def test_a_costly_regex_is_refused_before_any_compile(tok, fresh):
    before = G.STATS["compiles"]  # earlier tests of the process compiled grammars
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        compile_grammar(tok, V, GrammarSpec("regex", BOMB))
    assert caught.value.code == "grammar_costly"
    assert caught.value.params == {"count": 250, "limit": G.MAX_OPTIONAL}
    assert time.perf_counter() - started < 0.5 and G.STATS["compiles"] == before


def test_a_schema_pattern_counts_like_the_regex_it_holds(tok, fresh):
    """xgrammar compiles ``pattern`` as a regex: the bomb hidden in a schema is refused."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "(.?)" * 30}},
        "patternProperties": {"^x.?y.?$": {"type": "string", "pattern": "b?c?"}},
    }
    assert G.schema_optional_atoms(json.dumps(schema)) == 34
    before = G.STATS["compiles"]
    with pytest.raises(ConfigError) as caught:
        compile_grammar(tok, V, GrammarSpec("json_schema", json.dumps(schema)))
    assert caught.value.code == "grammar_costly" and caught.value.params["count"] == 34
    assert G.STATS["compiles"] == before


def test_the_bomb_ends_with_its_bound_and_no_cpu_is_spent_after(tok, fresh):
    """Two tabs open the bomb: one compile (shared), killed at the bound; over the 2 s
    after, this process and its children spend < 0.2 CPU-s; the process is gone; opening
    it again is refused at once."""
    _children_ready(tok, 1)  # the child is up: time the bound only
    fresh.setattr(G, "MAX_OPTIONAL", 10_000)
    fresh.setattr(G, "GRAMMAR_COMPILE_S", 1.5)
    before = dict(G.STATS)
    seen: list[tuple[str, float]] = []
    pids: list[int] = []

    def tab() -> None:
        t0 = time.perf_counter()
        try:
            compile_grammar(tok, V, GrammarSpec("regex", BOMB))
        except ConfigError as exc:
            seen.append((exc.code, time.perf_counter() - t0))

    tabs = [threading.Thread(target=tab) for _ in range(2)]
    for t in tabs:
        t.start()
    time.sleep(0.5)
    pids = G.running_pids()
    for t in tabs:
        t.join(10)
    assert [code for code, _ in seen] == ["grammar_slow", "grammar_slow"]
    assert all(1.4 < s < 3.0 for _, s in seen), seen
    assert G.STATS["compiles"] - before["compiles"] == 1  # the second tab shared it
    assert len(pids) == 1 and G.running_pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    cpu0 = _cpu_s()
    time.sleep(2.0)
    assert _cpu_s() - cpu0 < 0.2
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as again:
        compile_grammar(tok, V, GrammarSpec("regex", BOMB))
    assert again.value.code == "grammar_slow" and time.perf_counter() - t0 < 0.1
    assert G.STATS["compiles"] - before["compiles"] == 1


def test_a_grammar_compiled_in_the_child_masks_like_one_compiled_here(tok, fresh):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V)
    here = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    for name, (kind, source) in GRAMMAR_PRESETS.items():
        ours = GrammarState(compile_grammar(tok, V, GrammarSpec(kind, source)), V)
        local = (
            here.compile_regex(source)
            if kind == "regex"
            else here.compile_json_schema(source, any_whitespace=False, strict_mode=True)
        )
        theirs = GrammarState(local, V)
        for _ in range(6):  # walk both along the first allowed token
            mask = ours.allowed()
            assert torch.equal(mask, theirs.allowed()), name
            if not bool(mask.any()):
                break
            first = int(mask.nonzero()[0])
            ours.sync_to([*ours.ids, first])
            theirs.sync_to([*theirs.ids, first])


def test_the_same_grammar_is_compiled_once_and_then_cached(tok, fresh):
    spec = GrammarSpec("regex", "(.?)" * 20)
    before = G.STATS["compiles"]
    out: list[object] = []
    threads = [
        threading.Thread(target=lambda: out.append(compile_grammar(tok, V, spec))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(out) == 3 and out[0] is out[1] is out[2]
    assert G.STATS["compiles"] - before == 1
    assert compile_grammar(tok, V, spec) is out[0] and G.STATS["compiles"] - before == 1


def test_a_client_compiles_one_at_a_time_and_within_its_budget(tok, fresh):
    """The budget's clock is the test's (``G.time``): each compile is charged exactly what
    the clock says, however long the machine took; the bomb is still killed by its real
    bound, in the child."""
    _children_ready(tok, 1)
    clock = [1000.0]
    fresh.setattr(G, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    who = {"client": "addr:10.0.0.7"}
    fresh.setattr(G, "CLIENT_OF", lambda: who["client"])
    fresh.setattr(G, "MAX_OPTIONAL", 10_000)
    fresh.setattr(G, "CLIENT_BUDGET_S", 1.0)
    compile_grammar(tok, V, GrammarSpec("regex", "b"))  # 0.25 s charged (the minimum)
    fresh.setattr(G, "GRAMMAR_COMPILE_S", 3.0)  # real seconds: room for a loaded machine
    bomb = _bomb_in_a_tab(tok)
    deadline = time.monotonic() + 60
    while not G.running_pids() and bomb.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # until the bomb's child compiles: the client is busy
    assert G.running_pids(), "the bomb never started compiling"
    clock[0] += 1.5  # the bomb's compile so far, as the budget's clock sees it
    with pytest.raises(ConfigError) as busy:  # same client, another grammar, meanwhile
        compile_grammar(tok, V, GrammarSpec("regex", "c"))
    assert busy.value.code == "grammar_busy" and busy.value.params == {"reason": "you"}
    who["client"] = "addr:10.0.0.8"  # another student is not held up
    compile_grammar(tok, V, GrammarSpec("regex", "d"))
    bomb.join(60)  # refused (grammar_slow) when its real bound ends
    assert not bomb.is_alive()
    who["client"] = "addr:10.0.0.7"  # 0.25 + 1.5 s spent of its 1 s a minute
    with pytest.raises(ConfigError) as rate:
        compile_grammar(tok, V, GrammarSpec("regex", "e"))
    # free again when the bomb's charge leaves the 60 s window: 60 s after it ended
    assert rate.value.code == "grammar_rate" and rate.value.params["seconds"] == 60
    clock[0] += 60.0  # the window has passed
    compile_grammar(tok, V, GrammarSpec("regex", "e"))
    compile_grammar(tok, V, GrammarSpec("regex", "b"))  # a cached grammar costs nothing
    assert len(G.child_pids()) == 1  # the bomb's child killed; one idle child kept


def test_one_idle_child_is_kept_after_compiles_at_once(tok, fresh):
    _children_ready(tok, 2)
    assert G.running_pids() == [] and len(G.child_pids()) == 1


def test_the_process_cap_refuses_after_waiting_its_bound(tok, fresh):
    fresh.setattr(G, "GRAMMAR_COMPILE_S", 0.5)
    fresh.setattr(G, "_SLOTS", threading.BoundedSemaphore(1))
    G._SLOTS.acquire()  # another compile holds the only slot
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as busy:
        compile_grammar(tok, V, GrammarSpec("regex", "g"))
    assert busy.value.code == "grammar_busy" and busy.value.params == {}
    assert 0.45 < time.perf_counter() - t0 < 1.5
    G._SLOTS.release()
    compile_grammar(tok, V, GrammarSpec("regex", "g"))  # not remembered as refused


def test_a_parse_error_keeps_the_library_reason(tok, fresh):
    with pytest.raises(ConfigError) as caught:
        compile_grammar(tok, V, GrammarSpec("regex", "a("))
    assert caught.value.code == "grammar_bad"
    assert caught.value.params["reason"].startswith("Regex parsing error")


def test_a_compile_stops_when_every_tab_that_asked_has_closed(tok, fresh):
    """Two tabs wait on one bomb: closing one changes nothing, closing both kills the
    compile at once (long before its bound) and the grammar is not marked slow."""
    _children_ready(tok, 1)
    fresh.setattr(G, "MAX_OPTIONAL", 10_000)
    fresh.setattr(G, "GRAMMAR_COMPILE_S", 30.0)
    tabs_open = {"tab1": True, "tab2": True}
    local = threading.local()
    fresh.setattr(G, "ALIVE_OF", lambda: lambda name=local.name: tabs_open[name])
    ended: dict[str, float] = {}

    def tab(name: str) -> None:
        local.name = name
        with pytest.raises(ConfigError):
            compile_grammar(tok, V, GrammarSpec("regex", BOMB))
        ended[name] = time.perf_counter()

    threads = [threading.Thread(target=tab, args=(n,)) for n in tabs_open]
    for t in threads:
        t.start()
    time.sleep(0.6)
    pids = G.running_pids()
    tabs_open["tab1"] = False
    time.sleep(0.6)
    assert ended == {} and G.running_pids() == pids  # one tab still waits
    closed = time.perf_counter()
    tabs_open["tab2"] = False
    for t in threads:
        t.join(10)
    assert sorted(ended) == ["tab1", "tab2"] and max(ended.values()) - closed < 1.0
    assert G.running_pids() == [] and G._REFUSED == {}
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
