"""The websocket bot reads a page as the browser shows it (``benchmarks/classroom_ws.py``,
``Client.page_texts``): the live-class benchmark compares a follower's token strips with
its teacher's from it. A run cut short by ``st.rerun`` is not what stays on screen: the
full run after it replaces it, and what it drew but the next full run does not draw goes.
Fed crafted ``ForwardMsg`` s, no server."""

from __future__ import annotations

import sys
from pathlib import Path

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import classroom_ws as W  # noqa: E402

DONE, EARLY = ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_EARLY_FOR_RERUN
FRAGMENT = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


def strip(text: str) -> str:
    return f'<div class="strip" style="line-height:2.0">{text}</div>'


def html(path: list[int], body: str, fragment: str = "") -> bytes:
    fm = ForwardMsg()
    fm.metadata.delta_path[:] = path
    fm.delta.fragment_id = fragment
    fm.delta.new_element.html.body = body
    return fm.SerializeToString()


def finished(status: int, fragments: tuple[str, ...] = ()) -> bytes:
    fm = ForwardMsg()
    fm.script_finished = status
    fm.metadata.run.fragment_ids[:] = list(fragments)
    return fm.SerializeToString()


def run(c: W.Client, *msgs: bytes) -> list[bool]:
    return [c.handle(m) for m in msgs]


def test_a_run_cut_short_leaves_only_what_the_next_full_run_draws():
    c = W.Client(ws=None)
    # state 1: the main strip and one history row
    run(c, html([0, 4], strip("s1 main")), html([0, 7], strip("s1 round 1")), finished(DONE))
    assert c.page_texts() == [strip("s1 main"), strip("s1 round 1")]
    c.reset_run()
    # a run that drew state 2's main strip, then st.rerun(); the rerun draws state 3
    ends = run(
        c,
        html([0, 4], strip("s2 main")),
        finished(EARLY),
        html([0, 4], strip("s3 main")),
        html([0, 5], "caption"),
        finished(DONE),
    )
    assert ends == [False, False, False, False, True]  # one finished run, as before
    # the run's own elements mix both runs (what the benchmark used to digest) ...
    assert [b for b in c.markdown if b.startswith('<div class="strip"')] == [
        strip("s2 main"),
        strip("s3 main"),
    ]
    # ... the page holds the last full run's only: state 1's history row is gone too
    assert c.page_texts() == [strip("s3 main"), "caption"]


def test_a_fragment_run_keeps_the_rest_of_the_page():
    c = W.Client(ws=None)
    run(c, html([0, 4], strip("main")), html([0, 9, 0], "poll 1", "f"), finished(DONE))
    run(c, html([0, 9, 0], "poll 2", "f"), finished(FRAGMENT, ("f",)))
    assert c.page_texts() == [strip("main"), "poll 2"]
    # a fragment run that no longer draws its element: only that one goes
    run(c, html([0, 9, 1], "answered", "f"), finished(FRAGMENT, ("f",)))
    assert c.page_texts() == [strip("main"), "answered"]
