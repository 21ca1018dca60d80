"""Real browsers in a live class: two app replicas behind nginx (loopback,
``deploy/replicas.py``) sharing one SQLite room store (``SPECDEC_ROOM_DB`` in a temp
folder), a teacher and two students in three Chromium contexts, each student pinned to
a different replica by nginx's route cookie. The teacher starts a live class from the
step page's Lesson panel; both students open the join link (one in Chinese) and follow
(their page shows the teacher's round and phase, and the same drafted tokens); the
teacher asks "will position 1 be accepted?", both answer (the teacher's projector says
2 of 2), the reveal shows each student the real outcome (right for one, wrong for the
other: they answered differently); one student explores on their own (their own rounds,
the teacher's kept) and follows again."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import CHROMIUM, CHROMIUM_FLAGS, REPO
from test_page_live import where_said

from specdec_core.lessons.link import LessonState, encode
from specdec_core.ui.i18n import plural, tr

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

import sys  # noqa: E402

sys.path.insert(0, str(REPO / "deploy"))
import replicas as deploy  # noqa: E402

PROMPT = "ROMEO:\nBut soft, what light"
WAIT_MS = 60_000  # a loaded 2-core machine: a step with two followers replaying it


@pytest.fixture(scope="module")
def live_cluster(tmp_path_factory):
    """Two replicas + nginx, one SQLite room store file for both."""
    if deploy.nginx_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is missing: .ci/run must install it")
        pytest.skip("nginx is not installed: run `apt-get install -y nginx`")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed")
    db = tmp_path_factory.mktemp("rooms") / "rooms.sqlite3"
    env = {"SPECDEC_ROOM_DB": str(db), "SPECDEC_REDIS_URL": ""}
    with deploy.cluster(2, env=env) as run:
        yield run


def _replica(url: str, route: str) -> str:
    req = urllib.request.Request(
        url + "/_specdec/replica", headers={"Cookie": f"{deploy.COOKIE}={route}"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["X-Specdec-Replica"]


def _routes_on_two_replicas(url: str) -> dict[str, str]:
    """replica address → a route cookie value nginx sends there."""
    by_replica: dict[str, str] = {}
    for i in range(64):
        by_replica.setdefault(_replica(url, f"live-{i}"), f"live-{i}")
        if len(by_replica) == 2:
            return by_replica
    raise AssertionError(f"64 cookies all went to {list(by_replica)}")


def _idle(page) -> None:
    """Wait until the page's script run is over (no running-man status widget)."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=WAIT_MS
    )


def _text(page) -> str:
    return page.inner_text("body")


def _wait_text(page, text: str, timeout: int = WAIT_MS) -> float:
    """Wait until the page shows ``text``; seconds it took."""
    started = time.perf_counter()
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=timeout)
    return time.perf_counter() - started


def _strip(page) -> str:
    """The first token strip's text (the round on screen: committed and drafted tokens)."""
    return page.locator(".strip").first.inner_text()


def _rounds(page) -> int:
    found = re.search(r"Rounds: (\d+)", _text(page))
    return int(found.group(1)) if found else 0


def _wait_rounds(page, n: int, timeout: int = WAIT_MS) -> None:
    """Wait until the page's stats line says ``Rounds: n`` (a click's run shows no
    status widget for a moment after the click, so :func:`_idle` alone can return
    before it has begun)."""
    page.wait_for_function(
        "n => { const m = document.body.innerText.match(/Rounds: (\\d+)/);"
        " return m !== null && Number(m[1]) === n; }",
        arg=n,
        timeout=timeout,
    )
    _idle(page)


def _click_until_rounds(page, name: str, n: int) -> None:
    """Click the step button ``name`` and wait for ``Rounds: n``; click once more if
    nothing ran after 15 s. Known gap (in the closing note): an explorer's click that
    lands while the follower's 1 s fragment poll is running was once lost in a full
    suite run (not reproduced alone); a second click must then work."""
    page.get_by_role("button", name=name).click()
    try:
        _wait_rounds(page, n, timeout=15_000)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: one retry
        page.get_by_role("button", name=name).click()
        _wait_rounds(page, n)


def _status(lang: str, r: int, phase_key: str, following: bool = True) -> str:
    where = where_said(lang, r, phase_key)
    key = "live_following" if following else "live_exploring"
    return tr(key, lang).format(where=where).replace("**", "")


def test_a_live_class_through_two_replicas(live_cluster):
    """Its own Playwright, started after the cluster (whose warm-up runs asyncio: the
    session's shared Chromium would hold an event loop)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            _live_class(live_cluster, browser)
        finally:
            browser.close()
    logs = [(live_cluster.logs / f"replica{i}.log").read_text() for i in range(2)]
    assert all("Traceback" not in log for log in logs), logs


def _live_class(live_cluster, browser) -> None:
    url = live_cluster.url
    host = url.removeprefix("http://").split(":")[0]
    routes = list(_routes_on_two_replicas(url).values())

    def context(route: str | None, width: int = 1400, height: int = 1800):
        ctx = browser.new_context(viewport={"width": width, "height": height})
        if route:
            ctx.add_cookies([{"name": deploy.COOKIE, "value": route, "domain": host, "path": "/"}])
        return ctx

    contexts = []
    try:
        # -- the teacher opens a lesson link and starts a live class from the Lesson panel
        tctx = context(None)
        contexts.append(tctx)
        teacher = tctx.new_page()
        teacher.goto(f"{url}/?{urlencode(encode(LessonState(prompt=PROMPT)))}")
        teacher.get_by_role("button", name="① Propose").wait_for(timeout=120_000)
        _idle(teacher)
        teacher.get_by_text(tr("lt_title", "en")).click()
        teacher.get_by_role("tab", name=tr("live_tab", "en")).click()
        teacher.get_by_role("button", name=tr("live_start", "en")).click()
        code_box = teacher.locator(".st-key-live_code")
        code_box.wait_for(timeout=WAIT_MS)
        code = code_box.inner_text().strip()
        assert re.fullmatch(r"[A-HJ-NP-Z2-9]{6}", code), code
        join = f"{url}/?room={code}"
        assert f"?room={code}" in _text(teacher)  # the join link on the card …
        assert "teacher=" not in teacher.url  # … and no key in the projector's address bar

        # -- two students, one on each replica (route cookies), one of them in Chinese
        sctx = [context(routes[0], 390, 844), context(routes[1], 390, 844)]
        contexts += sctx
        en, zh = sctx[0].new_page(), sctx[1].new_page()
        en.goto(join)
        zh.goto(join + "&lang=zh")
        _wait_text(en, _status("en", 1, "st_propose"), 120_000)
        _wait_text(zh, _status("zh", 1, "st_propose"), 120_000)
        assert len({_replica(url, r) for r in routes}) == 2  # one student per replica
        # the dashboard's students line (":material/groups: **2** students in room CODE"):
        # exactly 2 (no other digit before it), the room's own code
        students = tr("live_students_line", "en").split(" ", 1)[1]  # past the icon
        students = plural(students, {"n": 2}).format(n=2, code=code).replace("**", "")
        teacher.wait_for_function(
            "s => { const d = document.querySelector('.st-key-live_dash');"
            " if (!d) return false; const i = d.innerText.indexOf(s);"
            " return i >= 0 && (i === 0 || !/\\d/.test(d.innerText[i - 1])); }",
            arg=students,
            timeout=WAIT_MS,
        )

        # -- the teacher proposes: both followers show round 1, phase ② Verify, same drafts
        teacher.get_by_role("button", name="① Propose").click()
        _idle(teacher)
        took = [
            _wait_text(en, _status("en", 1, "st_verify")),
            _wait_text(zh, _status("zh", 1, "st_verify")),
        ]
        assert max(took) < WAIT_MS / 1000
        _idle(en)
        _idle(zh)
        assert _strip(en) == _strip(teacher) == _strip(zh)

        # -- a question: both answer differently; the projector counts 2 of 2
        teacher.get_by_role("button", name=tr("live_ask", "en")).click()
        question = tr("live_q_accept", "en").format(r=1, k=1)
        _wait_text(en, question)
        _wait_text(zh, tr("live_q_accept", "zh").format(r=1, k=1))
        yes, no = tr("live_yes", "en"), tr("live_no", "en")  # the teacher's own labels
        zh_word = {yes: tr("live_yes", "zh"), no: tr("live_no", "zh")}  # a zh screen's labels
        en.get_by_role("radiogroup").get_by_text(yes, exact=True).click()
        zh.get_by_role("radiogroup").get_by_text(zh_word[no], exact=True).click()
        answered = plural(tr("live_answered", "en"), {"m": 2}).format(n=2, m=2)
        answered = answered.replace("**", "")
        _wait_text(teacher, answered)

        # -- the reveal: ② Verify runs, every follower sees the real outcome
        teacher.get_by_role("button", name=tr("live_reveal", "en")).click()
        said = tr("live_outcome", "en").split("{")[0].replace("**", "")  # "The real outcome: "
        _wait_text(teacher, said)
        real = re.search(re.escape(said) + f"({yes}|{no})", _text(teacher)).group(1)
        right_en = tr("live_outcome_right", "en").format(answer=real).replace("**", "")
        wrong_en = tr("live_outcome_wrong", "en").format(answer=real, yours=yes).replace("**", "")
        right_zh = tr("live_outcome_right", "zh").format(answer=zh_word[real]).replace("**", "")
        wrong_zh = (
            tr("live_outcome_wrong", "zh")
            .format(answer=zh_word[real], yours=zh_word[no])
            .replace("**", "")
        )
        _wait_text(en, right_en if real == yes else wrong_en)
        _wait_text(zh, right_zh if real == no else wrong_zh)
        _wait_text(en, _status("en", 1, "st_commit"))  # the verified round, replayed
        _wait_text(zh, _status("zh", 1, "st_commit"))
        # the outcome is the verified round's: position 1's chip in the teacher's strip
        _idle(teacher)
        first = teacher.evaluate(
            "() => document.querySelector('.strip .tok-accepted, .strip .tok-rejected').className"
        )
        assert ("tok-accepted" in first) == (real == yes), first
        for page in (en, zh):
            _idle(page)
            assert _strip(page) == _strip(teacher)

        # -- one student explores on their own, then follows again
        en.get_by_role("button", name=tr("live_explore", "en")).click()
        _wait_text(en, _status("en", 1, "st_commit", following=False))
        _idle(en)
        _click_until_rounds(en, tr("st_commit", "en"), 1)  # round 1 committed
        _click_until_rounds(en, tr("st_run_round", "en"), 2)
        assert _rounds(en) == 2  # their own rounds
        teacher.get_by_role("button", name=tr("st_commit", "en")).click()
        # not _idle alone: it can return before the click's run has begun, and the page
        # redraws its history (the stats line read below) after the followers moved on
        _wait_rounds(teacher, 1)
        _wait_text(zh, _status("zh", 2, "st_propose"))  # the follower moves on
        _wait_text(en, _status("en", 2, "st_propose", following=False))
        assert _rounds(en) == 2 and _rounds(teacher) == 1  # the explorer kept their own
        en.get_by_role("button", name=tr("live_follow_again", "en")).click()
        _wait_text(en, _status("en", 2, "st_propose"))
        en.wait_for_function(  # the teacher's frame, not the explorer's page (no history)
            "() => !/Rounds: \\d+/.test(document.body.innerText)", timeout=WAIT_MS
        )
        _idle(en)
        assert _strip(en) == _strip(teacher)

        for page in (teacher, en, zh):
            assert page.get_by_text("Traceback").count() == 0
    finally:
        for ctx in contexts:
            ctx.close()
