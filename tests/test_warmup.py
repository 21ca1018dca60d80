"""The server's start-up settings: torch's thread default on a small machine
(``server/pairs.torch_threads``) and the background warm-up (``ui/warmup.py``). The warm-up
in a real server is checked in the browser (``test_browser.py``); its timing is
``benchmarks/startup.py``."""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest

from specdec_core.server import pairs
from specdec_core.ui import warmup


@pytest.mark.parametrize(
    ("env", "cores", "threads"),
    [
        (None, 2, 1),  # a small machine: one thread (two spin: 10.7 s vs 0.65 s search)
        (None, 1, 1),
        (None, 8, None),  # torch's default
        ("3", 2, 3),  # the environment wins
        ("1", 16, 1),
        ("0", 2, 1),  # not a positive number: the default
        ("two", 8, None),
        (" 2 ", 2, 2),
    ],
)
def test_torch_threads_default_and_override(monkeypatch, env, cores, threads):
    if env is None:
        monkeypatch.delenv(pairs.THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(pairs.THREADS_ENV, env)
    monkeypatch.setattr(pairs, "cores", lambda: cores)
    assert pairs.torch_threads() == threads


def test_no_warm_up_outside_a_server_or_when_switched_off(monkeypatch):
    """A plain process and an ``AppTest`` (a mock runtime) start no thread: a background
    search would race the tests' own; ``SPECDEC_WARM_UP=0`` switches it off in a server."""
    from conftest import start_app

    assert not warmup.in_server()
    assert warmup.start() is False
    start_app()  # app.py ran: warmup.start() was called under AppTest's mock runtime
    assert warmup._thread is None
    monkeypatch.setattr(warmup, "in_server", lambda: True)
    monkeypatch.setenv(warmup.WARM_ENV, "0")
    assert warmup.start() is False and warmup._thread is None


def test_warm_up_loads_the_first_pair_then_after_the_first_run_searches_and_loads_the_rest(
    monkeypatch, capsys
):
    """``_warm`` loads the English screen's pair at once; once the first run of app.py has
    finished (nothing may slow the first page: loading the Chinese pair beside it doubled
    it), it searches that pair's scenarios, then loads and searches the Chinese screen's
    pair, and logs one line per pair with the figures (what the browser test and the
    benchmark read)."""
    calls = []
    loaded = threading.Event()

    def get_pair(name):
        calls.append(("load", name))
        loaded.set()
        return SimpleNamespace(name=name)

    def search(pair):
        calls.append(("search", pair.name))
        found = 1 if pair.name == "embedded" else 2
        return [SimpleNamespace(state=object())] * found + [SimpleNamespace(state=None)]

    monkeypatch.setattr(warmup, "get_pair", get_pair)
    monkeypatch.setattr(warmup, "search_scenarios", search)
    monkeypatch.setattr(warmup, "opening_pairs", lambda: ["embedded", "embedded-zh"])
    monkeypatch.setattr(warmup, "done", {})
    monkeypatch.setattr(warmup, "_first_run", threading.Event())
    monkeypatch.setattr(warmup, "SETTLE_S", 0.0)
    monkeypatch.setattr(warmup, "LATER_S", 0.0)
    thread = threading.Thread(target=warmup._warm)
    thread.start()
    assert loaded.wait(10)
    time.sleep(0.3)
    assert calls == [("load", "embedded")]  # the first page is still running
    warmup.first_run_done()
    thread.join(10)
    assert calls[1:] == [("search", "embedded"), ("load", "embedded-zh"), ("search", "embedded-zh")]
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    for line, (name, n) in zip(lines, [("embedded", 1), ("embedded-zh", 2)], strict=True):
        pattern = (
            rf"specdec-warm pair={name} threads=\d+ load_s=[\d.]+ scenarios={n} search_s=[\d.]+"
        )
        assert re.fullmatch(pattern, line), line
    assert {k: v["scenarios"] for k, v in warmup.done.items()} == {
        "embedded": 1.0,
        "embedded-zh": 2.0,
    }


def test_a_failed_warm_up_is_logged_and_leaves_nothing(monkeypatch, capsys, caplog):
    def broken(name):
        raise OSError("disk gone")

    monkeypatch.setattr(warmup, "get_pair", broken)
    monkeypatch.setattr(warmup, "done", {})
    warmup._warm()
    assert warmup.done == {}
    assert "specdec-warm" not in capsys.readouterr().err
    assert "warm-up failed" in caplog.text


@pytest.mark.parametrize(
    ("cached", "offered", "capacity", "pairs_"),
    [
        ({"embedded-zh", "gpt2"}, ["embedded", "embedded-zh", "gpt2"], 3, ["gpt2", "embedded-zh"]),
        ({"embedded-zh"}, ["embedded", "embedded-zh"], 2, ["embedded", "embedded-zh"]),
        ({"gpt2"}, ["embedded", "gpt2"], 2, ["gpt2"]),  # no Chinese pair: the same
        ({"embedded-zh", "gpt2"}, ["embedded"], 1, ["embedded"]),  # capacity 1
        (set(), ["embedded"], 2, ["embedded"]),
    ],
)
def test_the_opening_pairs_are_the_sidebars(monkeypatch, cached, offered, capacity, pairs_):
    """An English screen's pair, then a Chinese screen's, as the sidebar picks them
    (``default_pair_name``, an unoffered one replaced by ``embedded``), each once."""
    from specdec_core.core import models

    monkeypatch.setattr(models, "is_preset_cached", cached.__contains__)
    monkeypatch.setattr(warmup, "offered_pairs", lambda: offered)
    monkeypatch.setattr(warmup, "capacity", lambda: capacity)
    assert warmup.opening_pairs() == pairs_


def test_run_the_app_says_the_small_machine_settings():
    """A teacher reads "Run the app", not the Scenarios paragraph: the thread default, the
    variable that overrides it and the warm-up switch are said there (en and zh)."""
    from conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Run the app") : readme.index("## Run a live class")]
    assert f"at most {pairs.SMALL_MACHINE_CORES} CPU cores" in " ".join(section.split())
    assert f"CPU 核数不超过 {pairs.SMALL_MACHINE_CORES}" in section
    for name in (pairs.THREADS_ENV, warmup.WARM_ENV, "benchmarks/startup.py"):
        assert section.count(name) >= 2, name  # in both languages
