"""One script run at a time per browser (``room_limits.Runs``, ``guards.one_run_per_browser``):
a browser's second tab waits for its first, other browsers (one address, one class) never
wait, nothing is held after a run, and a waiting tab says so in its language."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.server.room_limits import Runs

REPO = Path(__file__).resolve().parents[1]


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


def test_a_browsers_queued_runs_rest_as_long_as_the_run_before_them():
    runs, log, hold = Runs(rest=1.0), [], threading.Event()
    runs.acquire("b")
    tab2 = _run(runs, "b", hold, log, "tab2")
    _until(lambda: runs.waiting("b") == 1)
    time.sleep(0.3)  # the first run takes 0.3 s
    ended = time.monotonic()
    runs.release()
    _until(lambda: log)
    assert time.monotonic() - ended >= 0.28  # the browser's next run waited as long again
    hold.set()
    tab2.join(5)
    assert runs.acquire("b") < 0.05  # nobody waited behind tab2: no rest
    runs.release()
    assert runs._free_at == {}


def test_a_browser_is_its_cookie_at_its_address(monkeypatch):
    from specdec_core.ui import guards
    from specdec_core.ui.live import identity

    who = {"addr": "addr:10.0.0.1", "secret": "xsrf:aa"}
    monkeypatch.setattr(identity, "client", lambda: who["addr"])
    monkeypatch.setattr(identity, "browser_secret", lambda: who["secret"])
    tab1 = guards.browser_key()
    assert guards.browser_key() == tab1  # another tab of the browser
    who["secret"] = "xsrf:bb"  # a classmate behind the same school address
    classmate = guards.browser_key()
    who.update(addr="addr:10.9.9.9", secret="xsrf:aa")  # the cookie copied elsewhere
    leaked = guards.browser_key()
    assert len({tab1, classmate, leaked}) == 3 and re.fullmatch(r"[0-9a-f]{16}", tab1)


def test_a_script_thread_knows_its_browser_before_its_run(monkeypatch):
    """The thread-start key (the websocket handshake's address and cookie) is the page's
    key (``st.context``'s): both gates count one browser's runs in one line."""
    from types import SimpleNamespace

    import streamlit.runtime as st_runtime

    from specdec_core.ui import guards
    from specdec_core.ui.live import identity

    xsrf = "2|01020304|" + bytes(b ^ (i % 4 + 1) for i, b in enumerate(range(32))).hex() + "|1"
    handshake = SimpleNamespace(
        remote_ip="127.0.0.1",  # nginx on this machine: X-Real-IP is the browser's address
        headers=[("X-Real-IP", "10.0.0.7"), ("Host", "lab")],
        cookies={"_streamlit_xsrf": xsrf},
    )
    clients = {"s1": SimpleNamespace(client_context=handshake)}
    monkeypatch.setattr(st_runtime, "exists", lambda: True)
    monkeypatch.setattr(st_runtime, "get_instance", lambda: SimpleNamespace(get_client=clients.get))
    monkeypatch.setattr(identity, "client", lambda: "addr:10.0.0.7")
    monkeypatch.setattr(identity, "cookies", lambda: {"_streamlit_xsrf": xsrf})
    assert guards.thread_browser_key("s1") == guards.browser_key()
    assert guards.thread_browser_key("s2") != guards.thread_browser_key("s3")  # no client


def _gated_page() -> None:
    import threading

    import streamlit as st

    from specdec_core.server.room_limits import RUNS

    st.write(f"held {threading.get_ident() in RUNS._runs}")


def test_every_script_run_takes_its_turn_at_the_start_of_its_thread():
    from streamlit.runtime.scriptrunner import script_runner

    from specdec_core.ui import guards

    assert guards.install_run_gate() and guards.install_run_gate()  # once, whatever the calls
    gated = script_runner.ScriptRunner._run_script
    assert gated.__qualname__.endswith("gated")
    at = AppTest.from_function(_gated_page, default_timeout=30).run()
    assert [m.value for m in at.markdown] == ["held True"]
    assert script_runner.ScriptRunner._run_script is gated


def test_every_fragment_takes_its_browsers_turn():
    """A fragment's rerun is a run too: every ``st.fragment`` is ``guards.fragment``."""
    files = [REPO / "app.py", *REPO.glob("pages/*.py"), *(REPO / "specdec_core").rglob("*.py")]
    bare = [
        f"{path.relative_to(REPO)}:{n}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"\s*@st\.fragment\b", line)
    ]
    assert bare == []
    uses = sum(len(re.findall(r"^@fragment\b", p.read_text(encoding="utf-8"), re.M)) for p in files)
    assert uses >= 7  # the follower (4), the teacher's dashboard, jobs' progress, the step panel


def _waiting_page(lang: str) -> None:
    import streamlit as st

    from specdec_core.ui import guards

    st.session_state["lang"] = lang
    with guards.one_run_per_browser():
        st.write("page drawn")


@pytest.mark.parametrize(
    ("lang", "line"),
    [
        ("en", "Waiting for this browser's other tabs"),
        ("zh", "正在等待此浏览器的其他标签页"),
    ],
)
def test_a_tab_waiting_for_its_other_tab_says_so_then_draws(monkeypatch, lang, line):
    from specdec_core.server import room_limits
    from specdec_core.ui import guards

    guards.install_run_gate()  # the thread waits 1 s, then its page waits on and says so
    monkeypatch.setattr(guards, "browser_key", lambda: "one-browser")
    monkeypatch.setattr(guards, "thread_browser_key", lambda session: "one-browser")
    holding, done = threading.Event(), threading.Event()

    def other_tab() -> None:  # the browser's other tab, in a run 1.5 s past the page's start
        room_limits.RUNS.acquire("one-browser")
        holding.set()
        _until(lambda: room_limits.RUNS.waiting("one-browser") == 1, timeout=20)
        time.sleep(1.5)
        room_limits.RUNS.release()
        done.set()

    threading.Thread(target=other_tab, daemon=True).start()
    holding.wait(5)
    at = AppTest.from_function(_waiting_page, args=(lang,), default_timeout=30)
    started = time.monotonic()
    at.run()
    assert done.is_set() and time.monotonic() - started >= 1.5
    assert [x.value for x in at.toast] and line in at.toast[0].value
    assert [m.value for m in at.markdown] == ["page drawn"]
    assert room_limits.RUNS.waiting("one-browser") == 0 and not room_limits.RUNS._runs
    at.run()  # alone now: no wait, no line
    assert not at.toast and [m.value for m in at.markdown] == ["page drawn"]
