"""Values a crafted client can put into its own session: each gives one clear
message on the page, never an exception element, and no student text is rendered as
markdown. Table-driven over AppTest on the embedded pair."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import shown_error
from streamlit.testing.v1 import AppTest

from specdec_core.core.errors import BusyError, InputError, PhaseError, PromptError
from specdec_core.server import jobs, tasks
from specdec_core.ui.errors import plain
from specdec_core.ui.guards import table_state_ok

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LAB = "pages/acceptance_lab.py"


def start(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def _propose(at: AppTest) -> None:
    [b] = [b for b in at.button if b.label == "① Propose"]
    b.click().run()


def _table(state):
    def craft(at):
        key = f"rl_editor_{at.session_state['rl_ver']}"
        at.session_state[key] = state
        at.run()

    return craft


def _weights(value):
    def craft(at):
        key = f"rl_editor_{at.session_state['rl_ver']}"
        at.session_state[key] = {
            "edited_rows": {0: {"p": value}, 1: {"p": value}},
            "added_rows": [],
            "deleted_rows": [],
        }
        at.run()

    return craft


def _ntok(at):
    at.number_input(key="rl_ntok").set_value(5).run()  # a valid resize first
    at.session_state["rl_ntok"] = 500
    at.run()


def _not_one_token(at):
    at.session_state["edit_keep_open"] = True  # the edit box open
    _propose(at)
    at.text_input(key="edit_text").set_value("$x^2$ ![i](http://127.0.0.1/x.png) **b**").run()
    at.button[-3].click().run()


CASES = [
    # (name, page, craft, text expected in the one message or None for "no message needed")
    (
        "table adds 20,000 rows",
        LAB,
        _table(
            {
                "edited_rows": {},
                "deleted_rows": [],
                "added_rows": [{"name": "r", "p": 1, "q": 1}] * 20_000,
            }
        ),
        "table was reset",
    ),
    (
        "table row index out of range",
        LAB,
        _table({"edited_rows": {"99": {"p": 1.0}}}),
        "table was reset",
    ),
    (
        "table row index not a number",
        LAB,
        _table({"edited_rows": {"x": {"p": 1.0}}}),
        "table was reset",
    ),
    (
        "table cell not a number",
        LAB,
        _table({"edited_rows": {"0": {"p": "lots"}}}),
        "table was reset",
    ),
    ("table state not a dict", LAB, _table(["nonsense"]), "table was reset"),
    ("weights whose sum overflows", LAB, _weights(1e308), "table was reset"),
    ("weights that are huge but finite", LAB, _weights(1e13), "table was reset"),
    ("rows resized to 500", LAB, _ntok, None),  # Streamlit resets it
    # (a select box value outside its options cannot even be sent: Streamlit drops it)
    ("edit text with markdown and LaTeX", None, _not_one_token, "not exactly one"),
]


@pytest.mark.parametrize(("name", "page", "craft", "expected"), CASES, ids=[c[0] for c in CASES])
def test_crafted_value_gives_one_message(embedded_pair, name, page, craft, expected):
    at = start(page)
    craft(at)
    assert not at.exception, (name, at.exception)
    errors = [e.value for e in at.error]
    if expected is None:
        assert not errors
    else:
        assert len(errors) == 1 and expected in errors[0], (name, errors)
        # no "/" after the first colon but inside the student's own link, quoted escaped
        shown = errors[0].replace(r"\(http\://127\.0\.0\.1/x\.png\)", "")
        assert "/" not in shown.replace("\\/", "").split(":", 1)[1], (name, errors)
    for text in errors:  # student text is escaped: no image, LaTeX or bold survives
        assert not re.search(r"(?<!\\)(!\[|\$|\*\*)", text), text


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            PromptError("too long", "prompt_too_many_chars", chars=3_000_000, limit=20_000),
            "3000000 characters",
        ),
        (PhaseError("cannot verify"), "① → ② → ③"),
        (BusyError("full", "busy", limit=4), "queue is full"),
        (InputError("odd", "no_such_code"), "not valid"),
        (RuntimeError("/srv/app/secret.py line 3"), "went wrong"),
    ],
)
def test_error_message_maps_codes_and_hides_server_details(exc, expected):
    box = shown_error(exc)
    assert expected in box and "/srv" not in box


def test_bad_numbers_become_one_clear_message():
    from specdec_core.core.inputs import whole_number

    at = AppTest.from_string(
        "import streamlit as st\n"
        "from specdec_core.ui.errors import show_error\n"
        "from specdec_core.core.inputs import whole_number\n"
        "for v in ('one', 3.5, None, 10**30, '7'):\n"
        "    try:\n"
        "        whole_number(v, 1, 4, 'position')\n"
        "    except Exception as exc:\n"
        "        show_error(exc)\n",
        default_timeout=30,
    )
    at.run()
    assert not at.exception and len(at.error) == 5
    assert all("whole number from 1 to 4" in e.value for e in at.error)
    assert whole_number("3", 1, 4, "position") == 3


def test_plain_escapes_markdown_latex_and_links():
    text = plain("$\\frac{1}{2}$ ![x](http://e/x.png) **b** :red[r] <b>")
    for raw in ("$\\frac", "![x]", "**b**", ":red[", "<b>"):
        assert raw not in text


def test_table_state_check():
    cols = {"name": "text", "p": "number", "q": "number"}
    assert table_state_ok(None, 3, cols)
    assert table_state_ok({"edited_rows": {0: {"p": 2.0, "name": "a"}}}, 3, cols)
    assert not table_state_ok({"edited_rows": {3: {"p": 2.0}}}, 3, cols)
    assert not table_state_ok({"edited_rows": {0: {"p": float("nan")}}}, 3, cols)
    assert not table_state_ok({"edited_rows": {0: {"name": "x" * 41}}}, 3, cols)
    assert not table_state_ok({"added_rows": [{}]}, 3, cols)
    assert not table_state_ok({"deleted_rows": [0]}, 3, cols)


def test_measurement_caps_and_queue(embedded_pair):
    with pytest.raises(InputError, match="exceeds"):
        tasks.check_work(256, 7)
    with pytest.raises(InputError):
        tasks.check_work("many", 1)
    assert tasks.check_work(8, 3) == (8, 3)
    queue = jobs.JobQueue()
    queue.alive = lambda _sid: True
    cfg = embedded_pair and __import__("specdec_core.core.settings", fromlist=["x"]).SessionConfig()
    a = tasks.make_job("gamma", "s1", embedded_pair, "ROMEO:", 4, 1, True, False, cfg)
    queue._queue.append(a)  # held in the queue (no worker started): position 1
    assert queue.position(a) == 1
    with pytest.raises(BusyError):
        queue.submit(tasks.make_job("measure", "s1", embedded_pair, "x", 4, 1, True, False, cfg))
    queue.cancel(a)
    assert a.state == "cancelled" and queue.position(a) == -1


def test_job_of_a_closed_session_is_cancelled(embedded_pair):
    from specdec_core.core.settings import SessionConfig

    queue = jobs.JobQueue()
    queue.alive = lambda sid: sid != "gone"
    job = tasks.make_job(
        "gamma", "gone", embedded_pair, "ROMEO:", 4, 1, True, False, SessionConfig()
    )
    queue.submit(job)
    for _ in range(200):
        if job.finished:
            break
        __import__("time").sleep(0.05)
    assert job.state == "cancelled" and job.done == 0
