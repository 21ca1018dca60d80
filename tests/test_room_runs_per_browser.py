"""One script run at a time per browser (``room_limits.Runs``): a browser's second tab waits
for its first, other browsers never wait, a waiter waits at most so long, and nothing is
held after a run (the Streamlit side: ``tests/test_run_gate.py``)."""

from __future__ import annotations

import math
import threading
import time

import pytest

from specdec_core.server.room_limits import Runs


def _run(runs: Runs, browser: str, hold: threading.Event, log: list, name: str) -> threading.Thread:
    """A run of ``browser`` in a thread of its own: logs (name, "start", waited) when it has
    its turn and (name, "end") after ``hold`` is set."""

    def body() -> None:
        waited = runs.acquire(browser)
        log.append((name, "start", waited))
        hold.wait(10)
        log.append((name, "end"))
        runs.release()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def _until(check, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_browsers_second_run_waits_for_its_first_and_other_browsers_do_not():
    runs, log = Runs(), []
    first_done, second_done, other_done = threading.Event(), threading.Event(), threading.Event()
    a = _run(runs, "browser-1", first_done, log, "tab1")
    _until(lambda: ("tab1", "start", pytest.approx(0.0, abs=0.05)) in log)
    b = _run(runs, "browser-1", second_done, log, "tab2")  # the same browser: waits
    _until(lambda: runs.waiting("browser-1") == 1)
    c = _run(runs, "browser-2", other_done, log, "classmate")  # another browser: runs at once
    _until(lambda: any(e[0] == "classmate" and e[1] == "start" for e in log))
    other_done.set()
    c.join(5)
    time.sleep(0.2)
    assert [e[:2] for e in log] == [
        ("tab1", "start"),
        ("classmate", "start"),
        ("classmate", "end"),
    ]  # tab2 still waits, 0.2 s after the classmate ran and ended
    assert log[1][2] < 0.05
    first_done.set()
    a.join(5)
    second_done.set()
    b.join(5)
    assert [e[:2] for e in log[3:]] == [("tab1", "end"), ("tab2", "start"), ("tab2", "end")]
    assert log[4][2] >= 0.2  # tab2 waited for tab1's whole run
    assert runs.waiting("browser-1") == 0 and runs._holder == {} and runs._runs == {}


def test_waiting_runs_take_their_turns_in_arrival_order():
    runs, log, hold = Runs(), [], threading.Event()
    runs.acquire("b")  # this thread's run holds the turn
    threads = []
    for i in range(4):
        threads.append(_run(runs, "b", hold, log, f"tab{i}"))
        _until(lambda i=i: runs.waiting("b") == i + 1)
    hold.set()
    runs.release()
    for thread in threads:
        thread.join(5)
    assert [e[0] for e in log if e[1] == "start"] == ["tab0", "tab1", "tab2", "tab3"]
    assert all(log[2 * i][:2] == (f"tab{i}", "start") for i in range(4))  # one at a time


def test_a_fragment_inside_its_full_run_passes_and_nothing_is_held_after():
    runs = Runs()
    assert runs.acquire("b") < 0.05
    assert runs.acquire("b") == 0.0  # nested: the full run draws its fragment
    runs.release()
    assert runs._holder and runs._runs  # the full run still holds the turn
    runs.release()
    assert runs._holder == {} and runs._runs == {}
    runs.release()  # a release too many does nothing
    assert runs.acquire("b") < 0.05
    runs.release()


def test_a_long_run_lets_the_next_one_start_after_the_hold_time():
    runs, log, hold = Runs(hold_s=0.3), [], threading.Event()
    runs.acquire("b")  # a long study: never released while tab2 waits
    started = time.monotonic()
    tab2 = _run(runs, "b", hold, log, "tab2")
    _until(lambda: log)
    assert 0.28 <= time.monotonic() - started < 2.0
    hold.set()
    tab2.join(5)
    runs.release()  # the long run ends after: it does not free tab2's (ended) turn twice
    assert runs._holder == {} and runs._runs == {}


def test_a_sleeping_run_gives_its_turn_up_and_takes_it_again():
    runs, log, hold = Runs(), [], threading.Event()
    order: list[str] = []
    sleeping = threading.Event()

    def measuring_tab() -> None:  # a run that waits on a queue (pacing, a measurement)
        runs.acquire("b")
        runs.acquire("b")  # nested once
        sleeping.set()
        runs.sleep(0.4)
        order.append("measuring tab runs again")
        runs.release()
        runs.release()

    thread = threading.Thread(target=measuring_tab, daemon=True)
    thread.start()
    sleeping.wait(5)
    other = _run(runs, "b", hold, log, "tab2")
    _until(lambda: log)  # tab2 ran during the sleep
    assert log[0][2] < 0.3
    time.sleep(0.5)
    assert order == []  # the sleeper waits for tab2's run to end before it goes on
    hold.set()
    other.join(5)
    thread.join(5)
    assert order == ["measuring tab runs again"]
    assert runs._holder == {} and runs._runs == {}


def test_a_run_that_waits_long_is_told_once_and_a_stopped_wait_leaves_nothing():
    runs, told = Runs(), []
    runs.acquire("b")

    def waiter(on_notice) -> None:
        try:
            runs.acquire("b", notice_s=0.1, on_notice=on_notice)
            runs.release()
        except RuntimeError:
            told.append("stopped")

    thread = threading.Thread(target=waiter, args=(lambda: told.append("told"),), daemon=True)
    thread.start()
    time.sleep(0.4)
    assert told == ["told"]  # once, after 0.1 s, while it still waits
    runs.release()
    thread.join(5)

    def stop() -> None:  # Streamlit stops a waiting run that a newer click replaced
        raise RuntimeError("replaced")

    runs.acquire("b")
    thread = threading.Thread(target=waiter, args=(stop,), daemon=True)
    thread.start()
    thread.join(5)
    assert told == ["told", "stopped"] and runs.waiting("b") == 0
    runs.release()
    assert runs._holder == {} and runs._runs == {}


def test_a_thread_still_waiting_goes_on_to_its_page_which_waits_in_its_place():
    runs, told, order = Runs(rest=0.0), [], []
    runs.enter("b", 1.0)  # the tab whose run is in flight (a script thread's start)
    second_in = threading.Event()

    def second_tab() -> None:
        runs.enter("b", 0.1)  # still waiting after 0.1 s: Streamlit's own work goes on
        second_in.set()
        order.append(("page asks", runs.acquire("b", 1.0, lambda: told.append("told"))))
        runs.release()
        runs.exit()  # released by the page already: nothing more

    thread = threading.Thread(target=second_tab, daemon=True)
    thread.start()
    second_in.wait(5)
    third_done = threading.Event()
    third = _run(runs, "b", third_done, order, "third")  # came after: stays behind
    _until(lambda: runs.waiting("b") == 2)
    time.sleep(0.2)
    assert order == [] and told == ["told"]  # told at once (it waited already), still waits
    runs.exit()
    thread.join(5)
    _until(lambda: len(order) == 2)
    assert order[0][0] == "page asks" and order[1][:2] == ("third", "start")
    assert told == ["told"]
    third_done.set()
    third.join(5)
    lone = threading.Thread(target=lambda: (runs.enter("x", 0.0), runs.exit()), daemon=True)
    runs.enter("x", 1.0)
    lone.start()
    lone.join(5)  # its page never asked: its place in line is left at the run's end
    assert runs.waiting("x") == 0
    runs.exit()
    assert runs._holder == {} and runs._runs == {} and runs._pending == {}


def _rest_after(runs: Runs, run_s: float) -> float:
    """Seconds between the end of a run of ``run_s`` and the start of the one queued behind."""
    log, hold = [], threading.Event()
    runs.acquire("b")
    tab2 = _run(runs, "b", hold, log, "tab2")
    _until(lambda: runs.waiting("b") == 1)
    time.sleep(run_s)
    ended = time.monotonic()
    runs.release()
    _until(lambda: log)
    rest = time.monotonic() - ended
    hold.set()
    tab2.join(5)
    return rest


def test_a_browsers_queued_runs_rest_as_long_as_the_run_before_them_up_to_a_cap():
    runs = Runs(rest=1.0, rest_max_s=math.inf)
    assert _rest_after(runs, 0.3) >= 0.28  # the browser's next run waited as long again
    assert runs.acquire("b") < 0.05  # nobody waited behind tab2: no rest
    runs.release()
    assert runs._free_at == {}
    capped = _rest_after(Runs(rest=1.0, rest_max_s=0.1), 0.3)
    assert 0.09 <= capped < 0.28  # a click queued behind a slow poll rests 0.1 s, not 0.3


def test_a_run_waiting_past_the_safety_limit_starts_beside_the_others():
    runs, log, hold = Runs(hold_s=10.0, max_wait_s=0.3), [], threading.Event()
    runs.acquire("b")  # a run that holds the turn (its hold time is far off)
    started = time.monotonic()
    tabs = [_run(runs, "b", hold, log, f"tab{i}") for i in range(2)]  # first and second
    _until(lambda: len(log) == 2)
    assert 0.28 <= time.monotonic() - started < 2.0
    assert runs._holder["b"][0] == threading.get_ident()  # the long run still holds the turn
    hold.set()
    for tab in tabs:
        tab.join(5)
    runs.release()
    assert runs._holder == {} and runs._runs == {} and runs.waiting("b") == 0


def test_the_safety_limit_counts_from_a_script_threads_start():
    runs, waited = Runs(hold_s=10.0, max_wait_s=0.4), []

    def tab() -> None:
        start = time.monotonic()
        runs.enter("b", 0.1)  # still waiting after 0.1 s: goes on to its page
        runs.acquire("b")
        waited.append(time.monotonic() - start)
        runs.release()
        runs.exit()

    runs.acquire("b")
    thread = threading.Thread(target=tab, daemon=True)
    thread.start()
    thread.join(5)
    assert 0.38 <= waited[0] < 0.55  # 0.4 s from the thread's start, not 0.1 + 0.4
    runs.release()
    assert runs._holder == {} and runs._runs == {} and runs._pending == {}


def test_a_pending_run_waits_in_its_place_before_its_callbacks():
    runs, order, entered = Runs(rest=0.0), [], threading.Event()
    runs.enter("b", 1.0)  # the tab whose run is in flight
    assert runs.wait_pending() is False  # not waiting: nothing to do

    def second_tab() -> None:
        runs.enter("b", 0.1)  # still waiting after 0.1 s
        entered.set()
        order.append(("callbacks may run", runs.wait_pending()))
        assert runs.acquire("b") == 0.0  # its page: the turn is held already
        runs.release()
        runs.exit()

    thread = threading.Thread(target=second_tab, daemon=True)
    thread.start()
    entered.wait(5)
    time.sleep(0.3)
    assert order == []  # the first run still holds the turn: no callback yet
    runs.exit()
    thread.join(5)
    assert order == [("callbacks may run", True)]
    assert runs._holder == {} and runs._runs == {} and runs._pending == {}
