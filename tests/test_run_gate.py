"""The Streamlit side of one script run at a time per browser (``ui.run_gate``): a browser
is its address and cookie, every script run and every fragment takes its turn, a widget
callback waits for it too, and a waiting tab says so in its language."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]


def _until(check, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def _xsrf(seed: int) -> str:
    """A Streamlit XSRF cookie (``2|mask|masked token|time``) holding token ``seed``."""
    masked = bytes((seed + i) % 256 ^ (i % 4 + 1) for i in range(32))
    return f"2|01020304|{masked.hex()}|1"


def test_a_browser_is_its_cookie_at_its_address(monkeypatch):
    from specdec_core.ui import run_gate
    from specdec_core.ui.live import identity

    who = {"addr": "addr:10.0.0.1", "jar": {"_streamlit_xsrf": _xsrf(1)}}
    monkeypatch.setattr(identity, "client", lambda: who["addr"])
    monkeypatch.setattr(identity, "cookies", lambda: who["jar"])
    tab1 = run_gate.browser_key()
    assert run_gate.browser_key() == tab1  # another tab of the browser
    who["jar"] = {"_streamlit_xsrf": _xsrf(2)}  # a classmate behind the same school address
    classmate = run_gate.browser_key()
    who.update(addr="addr:10.9.9.9", jar={"_streamlit_xsrf": _xsrf(1)})  # cookie copied
    leaked = run_gate.browser_key()
    assert len({tab1, classmate, leaked}) == 3 and re.fullmatch(r"[0-9a-f]{16}", tab1)
    who["jar"] = {}  # a crafted client without cookies: one key for its address's such tabs
    bare = run_gate.browser_key()
    assert run_gate.browser_key() == bare and bare not in {tab1, classmate, leaked}


def test_a_script_thread_knows_its_browser_before_its_run(monkeypatch):
    """The thread-start key (the websocket handshake's address and cookie) is the page's
    key (``st.context``'s): both gates count one browser's runs in one line; the tabs of an
    address that send no cookie are one browser."""
    from types import SimpleNamespace

    import streamlit.runtime as st_runtime

    from specdec_core.ui import run_gate
    from specdec_core.ui.live import identity

    def handshake(address: str, jar: dict) -> SimpleNamespace:
        return SimpleNamespace(
            client_context=SimpleNamespace(
                remote_ip="127.0.0.1",  # nginx on this machine: X-Real-IP is the address
                headers=[("X-Real-IP", address), ("Host", "lab")],
                cookies=jar,
            )
        )

    jar = {"_streamlit_xsrf": _xsrf(7)}
    clients = {
        "s1": handshake("10.0.0.7", jar),
        "bare1": handshake("10.0.0.7", {}),
        "bare2": handshake("10.0.0.7", {}),
        "elsewhere": handshake("10.0.0.8", {}),
    }
    monkeypatch.setattr(st_runtime, "exists", lambda: True)
    monkeypatch.setattr(st_runtime, "get_instance", lambda: SimpleNamespace(get_client=clients.get))
    monkeypatch.setattr(identity, "client", lambda: "addr:10.0.0.7")
    monkeypatch.setattr(identity, "cookies", lambda: jar)
    key = run_gate.thread_browser_key
    assert key("s1") == run_gate.browser_key()
    assert key("s2") != key("s3")  # no handshake at all (no server): a session of its own
    assert key("bare1") == key("bare2") != key("s1")  # 40 cookie-less tabs: one line
    assert key("elsewhere") != key("bare1")
    monkeypatch.setattr(identity, "cookies", dict)
    assert run_gate.browser_key() == key("bare1")  # the page's key agrees


def _gated_page() -> None:
    import threading

    import streamlit as st

    from specdec_core.server.room_limits import RUNS

    st.write(f"held {threading.get_ident() in RUNS._runs}")


def test_every_script_run_takes_its_turn_at_the_start_of_its_thread():
    from streamlit.runtime.scriptrunner import script_runner

    from specdec_core.ui import run_gate

    assert run_gate.install_run_gate() and run_gate.install_run_gate()  # once, whatever the calls
    gated = script_runner.ScriptRunner._run_script
    assert gated.__qualname__.endswith("gated")
    at = AppTest.from_function(_gated_page, default_timeout=30).run()
    assert [m.value for m in at.markdown] == ["held True"]
    assert script_runner.ScriptRunner._run_script is gated


def test_every_fragment_takes_its_browsers_turn():
    """A fragment's rerun is a run too: every ``st.fragment`` is ``run_gate.fragment``."""
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


def _other_tab_holds(hold_s: float) -> threading.Event:
    """The browser's other tab takes the turn and holds it until ``hold_s`` after a run of
    the browser starts waiting; the event is set when it let go."""
    from specdec_core.server.room_limits import RUNS

    holding, done = threading.Event(), threading.Event()

    def other_tab() -> None:
        RUNS.acquire("one-browser")
        holding.set()
        _until(lambda: RUNS.waiting("one-browser") == 1, timeout=20)
        time.sleep(hold_s)
        RUNS.release()
        done.set()

    threading.Thread(target=other_tab, daemon=True).start()
    holding.wait(5)
    return done


def _waiting_page(lang: str) -> None:
    import streamlit as st

    from specdec_core.ui import run_gate

    st.session_state["lang"] = lang
    with run_gate.one_run_per_browser():
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
    from specdec_core.ui import run_gate

    run_gate.install_run_gate()  # the thread waits 1 s, then its page waits on and says so
    monkeypatch.setattr(run_gate, "browser_key", lambda: "one-browser")
    monkeypatch.setattr(run_gate, "thread_browser_key", lambda session: "one-browser")
    done = _other_tab_holds(1.5)
    at = AppTest.from_function(_waiting_page, args=(lang,), default_timeout=30)
    started = time.monotonic()
    at.run()
    assert done.is_set() and time.monotonic() - started >= 1.5
    assert [x.value for x in at.toast] and line in at.toast[0].value
    assert [m.value for m in at.markdown] == ["page drawn"]
    assert room_limits.RUNS.waiting("one-browser") == 0 and not room_limits.RUNS._runs
    at.run()  # alone now: no wait, no line
    assert not at.toast and [m.value for m in at.markdown] == ["page drawn"]


def _clicking_page() -> None:
    import threading

    import streamlit as st

    from specdec_core.server.room_limits import RUNS
    from specdec_core.ui import run_gate

    def act() -> None:  # a step click's callback (model forwards): whether it holds the turn
        held = RUNS._holder.get("one-browser")
        st.session_state["turn"] = held is not None and held[0] == threading.get_ident()

    st.button("step", on_click=act)
    st.session_state["lang"] = "zh"  # set in the page (the sidebar): the toast follows it
    with run_gate.one_run_per_browser():
        st.write(f"callback held the turn: {st.session_state.get('turn')}")


def test_a_waiting_tabs_callback_runs_only_in_its_turn(monkeypatch):
    """Streamlit runs a rerun's callbacks before its script body: a tab still waiting after
    1 s waits on before them, not beside the tab that holds the turn."""
    from specdec_core.server.room_limits import RUNS
    from specdec_core.ui import run_gate

    run_gate.install_run_gate()
    monkeypatch.setattr(run_gate, "browser_key", lambda: "one-browser")
    monkeypatch.setattr(run_gate, "thread_browser_key", lambda session: "one-browser")
    at = AppTest.from_function(_clicking_page, default_timeout=30).run()
    assert [m.value for m in at.markdown] == ["callback held the turn: None"]
    done = _other_tab_holds(1.5)  # past the thread's 1 s at its start
    started = time.monotonic()
    at.button[0].click().run()
    assert done.is_set() and time.monotonic() - started >= 1.5
    assert [m.value for m in at.markdown] == ["callback held the turn: True"]
    assert [x.value for x in at.toast] and "正在等待此浏览器的其他标签页" in at.toast[0].value
    assert RUNS.waiting("one-browser") == 0 and not RUNS._runs and not RUNS._pending
