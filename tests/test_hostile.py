"""No student, link or file can break the class: what a
hostile probe sent, replayed against the parsers, the engine's replay and the pages.

Each test fails on the code before the fix: a lone surrogate's ``TypeError`` escaped
``replay()``, 30,000 nested ``[`` raised ``RecursionError``, ``1e400`` raised
``OverflowError``, a trace's pair rendered as a live link, two script threads entered one
session's engine, uploads were unbounded, a 515-round trace drew every round, a replay
ran 200 rounds, and the rule lab ran any number of 200,000-draw Monte Carlos."""

from __future__ import annotations

import base64
import json
import threading
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import open_app
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.testing.v1 import AppTest

from specdec_core.core.errors import PromptError, TokenTextError
from specdec_core.core.inputs import encode_prompt, single_token_id
from specdec_core.core.settings import SessionConfig
from specdec_core.core.untrusted_json import load_json
from specdec_core.engine.chain.session import ChainSteps, SpeculativeSession
from specdec_core.lessons import replay as replay_mod
from specdec_core.lessons.link import LessonState, decode
from specdec_core.lessons.replay import replay
from specdec_core.lessons.tracefile import TraceFile, TraceFileError, export_json, parse
from specdec_core.ui import guards
from specdec_core.ui.step import lesson as L

APP = str(Path(__file__).resolve().parents[1] / "app.py")
OFFERED = ["embedded"]
PROMPT = "ROMEO:\nBut soft, what light"
# the probe's poisoned link: {"prompt": "AB\ud800CD"} (a lone surrogate)
POISONED = {"v": "1", "lang": "en", "s": "eNqrViooys8tKFGyUnJ0iilNsTAwcHZRqgUAXIsHNA"}


def _pack(text: str) -> str:
    raw = base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9))
    return raw.rstrip(b"=").decode("ascii")


def _trace_bytes(model_pair, n_rounds: int = 2, **changes) -> bytes:
    session = SpeculativeSession(model_pair, PROMPT, SessionConfig(gamma=3, max_new_tokens=40))
    for _ in range(n_rounds):
        session.run_round()
    state = LessonState(gamma=3, max_new_tokens=40, prompt=PROMPT, round=n_rounds)
    doc = json.loads(export_json(session, state))
    doc.update(changes)
    return json.dumps(doc).encode("utf-8")


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


# ------------------------------------------------------------------ 2 · valid Unicode
def test_the_poisoned_link_is_refused_at_the_border():
    state, problems = decode(POISONED, OFFERED)
    assert state.prompt == ""  # the default prompt; the rest of the link is kept
    assert [(p.code, p.params.get("name")) for p in problems] == [("bad_value", "prompt")]


def test_text_with_a_lone_surrogate_is_refused_with_its_own_message(embedded_pair):
    with pytest.raises(PromptError) as err:
        encode_prompt(embedded_pair, "AB\ud800CD")
    assert err.value.code == "prompt_bad_text"
    with pytest.raises(TokenTextError) as err:
        single_token_id(embedded_pair, "\udfff")
    assert err.value.code == "bad_text"
    assert encode_prompt(embedded_pair, "AB\U0001f600CD")  # a real astral character is fine


def test_replay_never_raises_what_it_does_not_expect(embedded_pair, monkeypatch):
    out = replay(embedded_pair, LessonState(prompt="AB\ud800CD"))  # was a TypeError
    assert out.session is None and [p.code for p in out.problems] == ["prompt_dropped"]

    def broken(self, s):
        raise IndexError("list index out of range")  # any bug a crafted state may hit

    monkeypatch.setattr(ChainSteps, "verify", broken)
    out = replay(embedded_pair, LessonState(prompt=PROMPT, round=1, phase="commit"))
    assert out.session is None and [p.code for p in out.problems] == ["replay_failed"]


def test_the_poisoned_link_leaves_a_usable_page(embedded_pair):
    at = open_app(POISONED)  # before: TypeError on every rerun, no widgets
    assert any("prompt" in w.value for w in at.warning), [w.value for w in at.warning]
    button(at, "btn_propose").click().run()
    assert not at.exception
    assert at.session_state["lesson"].session.phase == "verify"


def test_a_trace_file_with_a_lone_surrogate_is_refused(embedded_pair):
    data = _trace_bytes(embedded_pair).replace(b'"embedded"', b'"emb\\ud800"', 1)
    with pytest.raises(TraceFileError) as err:
        parse(data)
    assert err.value.code == "trace_malformed"


# ------------------------------------------------------------------ 3 · parser errors
@pytest.mark.parametrize(
    "text",
    [
        '{"edits":' + "[" * 30_000,  # the probe's link: RecursionError
        '{"edits":' + "[" * 17 + "]" * 17 + "}",  # just over the bound
        '{"prompt":"' + "]" * 40 + '",' + '"edits":' + "[" * 30 + "]" * 30 + "}",  # "]" in a string
    ],
)
def test_deep_nesting_in_a_link_is_refused_before_parsing(text):
    state, problems = decode({"v": "1", "s": _pack(text)}, OFFERED)
    assert state == LessonState() and [p.code for p in problems] == ["unreadable"]


def test_nesting_at_the_bound_is_read():
    assert load_json("[" * 16 + "]" * 16) == [[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]
    assert load_json('["[[[[[[[[[[[[[[[[[[\\"", 1]') == ['[[[[[[[[[[[[[[[[[["', 1]


@pytest.mark.parametrize(
    ("change", "raw"),
    [
        (None, b"[" * 100_000 + b"]" * 100_000),  # RecursionError before
        ({"prompt_len": "@INF@"}, None),  # "prompt_len": 1e400 → OverflowError before
        ({"prompt_ids": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}, None),
        ({"rounds": [{"round_index": "x"}]}, None),
        ({"rounds": 7}, None),
    ],
)
def test_every_parse_error_is_one_trace_error(embedded_pair, change, raw):
    if raw is None:
        raw = _trace_bytes(embedded_pair, **change).replace(b'"@INF@"', b"1e400")
    with pytest.raises(TraceFileError) as err:
        parse(raw)
    assert err.value.code == "trace_malformed"


def test_an_exported_trace_still_parses(embedded_pair):
    trace = parse(_trace_bytes(embedded_pair, n_rounds=3))
    assert len(trace.rounds) == 3 and trace.state is not None and trace.state.round == 3


# ------------------------------------------------------------------ 4 · no live markdown
def _view(pair, name: str, rounds: int = 1) -> TraceFile:
    trace = parse(_trace_bytes(pair, n_rounds=1))
    many = tuple(replace(trace.rounds[0], round_index=i) for i in range(rounds))
    return replace(trace, pair=name, state=None, rounds=many)


def test_text_from_a_trace_file_is_shown_literally(embedded_pair):
    at = open_app()
    at.session_state["lt_open"] = True
    at.session_state["trace_view"] = _view(embedded_pair, "[a](https://e.vil) :red[R] $x^2$")
    at.run()
    assert not at.exception
    [caption] = [c.value for c in at.caption if "vil" in c.value]
    assert "\\[a\\]\\(https\\:" in caption and "\\:red\\[R\\]" in caption and "\\$x" in caption


def test_names_from_a_link_are_shown_without_markup():
    state, problems = decode({"v": "[x](//e.vil)", "s": _pack('{"gamma": 3}')}, OFFERED)
    assert [p.code for p in problems] == ["version"]
    assert problems[0].params["version"] == "?x????e."
    text = json.dumps({"[a](https://e.vil)": 1, ":red[R]": 2, "gamma": 3})
    state, problems = decode({"v": "1", "s": _pack(text)}, OFFERED)
    assert state.gamma == 3 and [p.code for p in problems] == ["bad_value"]
    assert problems[0].params["name"] == "?red?R?, ?a??https???e.vil?"


# ------------------------------------------------------------------ 5 · one action at a time
def test_a_click_that_finds_its_session_busy_is_dropped(embedded_pair, monkeypatch):
    monkeypatch.setattr(L, "LOCK_WAIT_S", 0.3)
    at = open_app()
    lock = at.session_state[L.LOCK_KEY]  # before the fix: no lock at all
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another script thread of this tab, inside an action
        with lock:
            held.set()
            release.wait(60)

    worker = threading.Thread(target=hold)
    worker.start()
    assert held.wait(10)
    button(at, "btn_propose").click().run()
    busy = [i.value for i in at.info]
    release.set()
    worker.join()
    assert not at.exception
    assert at.session_state["lesson"].session.phase == "propose"  # nothing ran beside it
    assert any("Still working" in v for v in busy), busy
    at.run()
    assert any("dropped" in i.value for i in at.info)
    button(at, "btn_propose").click().run()  # free again: the click acts
    assert at.session_state["lesson"].session.phase == "verify"


def test_two_threads_on_one_session_never_interleave(embedded_pair):
    S: dict = {}
    session = SpeculativeSession(embedded_pair, PROMPT, SessionConfig(gamma=2, max_new_tokens=60))
    inside, overlaps, errors = [0], [0], []

    def student() -> None:
        for _ in range(4):
            with L.engine(S) as got:
                assert got
                inside[0] += 1
                overlaps[0] += inside[0] > 1
                try:
                    session.run_round()
                except Exception as exc:  # noqa: BLE001 - recorded, asserted below
                    errors.append(exc)
                inside[0] -= 1

    threads = [threading.Thread(target=student) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert overlaps[0] == 0 and not errors
    alone = SpeculativeSession(embedded_pair, PROMPT, SessionConfig(gamma=2, max_new_tokens=60))
    alone.run(max_rounds=8)  # the same eight rounds, one after another, no threads
    assert len(session.history) == len(alone.history) == 8
    assert session.ids == alone.ids
    assert S[L.LOCK_KEY] is L.engine_lock(S)  # one lock per session, created once


# ------------------------------------------------------------------ 6 · bounded uploads
def test_the_upload_store_keeps_two_files_per_session():
    store = MemoryUploadedFileManager("/upload")
    assert guards.install_upload_cap(store) and guards.install_upload_cap(store)
    blob = b"x" * 5_200_000
    for i in range(40):  # the probe: 40 × 5.2 MB to one's own session, all kept before
        store.add_file("attacker", UploadedFileRec(f"f{i}", "t.json", "application/json", blob))
    store.add_file("classmate", UploadedFileRec("c", "t.json", "application/json", b"{}"))
    held = store.file_storage["attacker"]
    assert list(held) == ["f38", "f39"] and len(store.file_storage["classmate"]) == 1
    assert sum(len(f.data) for f in held.values()) == 2 * 5_200_000


def test_uploads_are_parsed_once_dropped_and_rate_limited(embedded_pair, monkeypatch):
    from specdec_core.ui.step import files as lesson_files

    forgotten = []
    real = lesson_files.forget_upload

    def spy(file) -> None:
        forgotten.append(file.file_id)
        real(file)

    monkeypatch.setattr(lesson_files, "forget_upload", spy)
    at = open_app()
    at.session_state["lt_open"] = True
    at.run()
    data = _trace_bytes(embedded_pair, n_rounds=1, pair="elsewhere")  # read-only: no replay
    notices = []
    for i in range(lesson_files.MAX_UPLOADS_PER_MIN + 1):
        at.file_uploader[0].set_value((f"t{i}.json", data, "application/json")).run()
        assert not at.exception
        notices.append(" ".join(x.value for x in at.info))
    assert all("read-only" in n for n in notices[:-1]), notices
    assert "Too many trace files" in notices[-1]
    assert len(set(forgotten)) == len(notices)  # every file's bytes left the upload store
    assert at.session_state["trace_view"].pair == "elsewhere"  # the parsed trace is kept


def test_forget_upload_drops_the_bytes_from_the_store(monkeypatch):
    from types import SimpleNamespace

    store = MemoryUploadedFileManager("/upload")
    store.add_file("tab", UploadedFileRec("f1", "t.json", "application/json", b"x" * 1000))
    ctx = SimpleNamespace(uploaded_file_mgr=store, session_id="tab")
    monkeypatch.setattr(guards, "get_script_run_ctx", lambda: ctx)
    guards.forget_upload(SimpleNamespace(file_id="f1"))
    assert store.file_storage["tab"] == {} and store._total_bytes == 0


# ------------------------------------------------------------------ 10 · bounded work
def test_a_long_read_only_trace_draws_twenty_rounds_a_run(embedded_pair):
    at = open_app()
    at.session_state["lt_open"] = True
    at.session_state["trace_view"] = _view(embedded_pair, "embedded", rounds=515)
    at.run()
    assert not at.exception
    drawn = [m.value for m in at.markdown if m.value.startswith("**Round")]
    assert len(drawn) == 20 and drawn[0].startswith("**Round 515**")  # newest first
    at.selectbox(key="lt_trace_page").set_value("476–495").run()
    drawn = [m.value for m in at.markdown if m.value.startswith("**Round")]
    assert len(drawn) == 20 and drawn[0].startswith("**Round 495**")


def test_a_replay_runs_at_most_its_forward_budget(embedded_pair, monkeypatch):
    monkeypatch.setattr(replay_mod, "MAX_REPLAY_FORWARDS", 12)  # 2 rounds at γ = 4 (5 each)
    state = LessonState(prompt=PROMPT, gamma=4, max_new_tokens=200, round=200, phase="verify")
    out = replay(embedded_pair, state)
    assert [p.code for p in out.problems] == ["replay_capped"]
    assert out.problems[0].params["round"] == 2
    assert len(out.session.history) == 1 and out.session.phase == "commit"
    assert replay_mod.replay_forwards(state) == 201 * 5


def test_the_rule_labs_monte_carlo_is_bounded_per_tab(monkeypatch):
    from specdec_core.ui.lab import view as LV

    monkeypatch.setattr(LV, "MC_BUDGET_DRAWS", 3 * 30_000)
    LV._mc_results.clear()
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/acceptance_lab.py").run()
    assert not at.exception
    assert at.session_state["rl_mc"]["correct"].n == 20_000  # the default: 60,000 draws
    at.number_input(key="rl_mc_n").set_value(21_000).run()  # 63,000 more: over 90,000
    assert at.session_state["rl_mc"]["correct"].n == LV.MC_FLOOR_N
    assert any("lowered" in w.value for w in at.warning), [w.value for w in at.warning]
    spent = list(at.session_state["rl_mc_spent"])
    at.number_input(key="rl_mc_n").set_value(20_000).run()  # back: a cached seeded result
    assert at.session_state["rl_mc"]["correct"].n == 20_000
    assert list(at.session_state["rl_mc_spent"]) == spent  # nothing charged


def test_the_step_history_draws_the_newest_rounds_unless_asked(embedded_pair, monkeypatch):
    from specdec_core.ui.step import chain_view

    monkeypatch.setattr(chain_view, "HISTORY_SHOWN", 2)
    at = open_app()
    for _ in range(3):
        button(at, "btn_round").click().run()
    assert not at.exception and len(at.session_state["lesson"].session.history) == 3

    def rounds_drawn() -> int:
        return sum(h.value.count('class="history-round"') for h in at.get("html"))

    assert rounds_drawn() == 2  # before: every round, on every click
    at.toggle(key="st_history_older").set_value(True).run()
    assert rounds_drawn() == 3


def test_one_tab_runs_the_rule_lab_at_most_once_a_second(monkeypatch):
    from specdec_core.ui.lab import view as LV

    slept: list[float] = []
    monkeypatch.setattr(LV, "S", {})
    monkeypatch.setattr(LV.time, "sleep", slept.append)
    assert LV.pace() == 0.0  # the first run never waits
    started = LV.S[LV._LAST_RUN]
    assert LV.pace(now=started + 0.25) == pytest.approx(0.75)
    assert LV.pace(now=LV.S[LV._LAST_RUN] + 5.0) == 0.0  # a student who reads: no wait
    assert slept == [pytest.approx(0.75)]


def test_full_runs_are_paced_after_a_burst():
    """A tab sending full reruns at 10 a second is slowed to
    FULL_RUNS_PER_S once its burst is spent; a student's few runs never wait."""
    from specdec_core.ui.guards import FULL_RUN_BURST, FULL_RUNS_PER_S, pace_full_run

    state: dict = {}
    starts, waits, ready = [], [], 0.0
    for i in range(40):  # a request every 0.1 s; a tab's runs are one after another
        now = max(i * 0.1, ready)
        waits.append(pace_full_run(now=now, state=state))
        starts.append(now + waits[-1])
        ready = starts[-1]
    burst = int(FULL_RUN_BURST)
    assert waits[:burst] == [0.0] * burst  # the burst: no wait
    assert all(w > 0 for w in waits[-20:])  # the burst and its refill are spent
    gaps = [b - a for a, b in zip(starts[-20:], starts[-19:], strict=False)]
    assert gaps == pytest.approx([1 / FULL_RUNS_PER_S] * len(gaps))  # then 4 a second
    calm: dict = {}
    assert [pace_full_run(now=i * 2.0, state=calm) for i in range(20)] == [0.0] * 20


def test_a_file_whose_bytes_were_dropped_is_not_parsed_again(monkeypatch):
    """After ``forget_upload`` the widget holds a ``DeletedFile``; its change callback fires
    on the next click and must neither raise an error banner nor drop the parsed view."""
    from types import SimpleNamespace

    from streamlit.runtime.uploaded_file_manager import DeletedFile

    from specdec_core.ui.step import files as lesson_files

    state = {lesson_files.UPLOAD_KEY: DeletedFile("f1"), lesson_files.VIEW_KEY: "parsed"}
    monkeypatch.setattr(lesson_files, "st", SimpleNamespace(session_state=state))
    lesson_files._uploaded()
    assert state == {lesson_files.UPLOAD_KEY: DeletedFile("f1"), lesson_files.VIEW_KEY: "parsed"}
    state[lesson_files.UPLOAD_KEY] = None
    lesson_files._uploaded()
    assert lesson_files.VIEW_KEY not in state and "step_error" not in state
