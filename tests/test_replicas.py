"""Scale-out: two app replicas behind Debian's nginx on loopback (``deploy/replicas.py``,
``deploy/nginx-specdec.conf``). Two browser sessions pinned to different replicas by
their route cookie step through different lessons; each keeps its own state across
several clicks, and a cookie always reaches the same replica."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
import replicas as deploy  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.timeout(300)


PACKAGES = {"nginx": "nginx", "Chromium": "chromium fonts-noto-cjk"}  # Debian packages


def _require(what: str, present: bool) -> None:
    if not present:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing: .ci/run must install it")
        pytest.skip(f"{what} is not installed: run `apt-get install -y {PACKAGES[what]}`")


@pytest.fixture(scope="module")
def cluster():
    _require("nginx", deploy.nginx_binary() is not None)
    _require("Chromium", Path(CHROMIUM).exists())
    with deploy.cluster(2) as run:
        yield run


def _replica(url: str, cookie: str) -> str:
    req = urllib.request.Request(url + "/_stcore/health", headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["X-Specdec-Replica"]


def test_nginx_snippet_pins_sessions_by_cookie_and_upgrades_websockets():
    conf = deploy.render_snippet(["127.0.0.1:1", "127.0.0.1:2"], "127.0.0.1:3")
    assert "ip_hash" not in conf.split("# Websocket")[1]  # a class behind one NAT
    assert "hash $specdec_route consistent;" in conf
    assert "server 127.0.0.1:1;" in conf and "server 127.0.0.1:2;" in conf
    for line in ("proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;",
                 "proxy_set_header Connection $connection_upgrade;",
                 "proxy_set_header Host $http_host;", "listen 127.0.0.1:3;"):  # fmt: skip
        assert line in conf
    assert "__" not in conf


def test_a_route_cookie_always_reaches_one_replica(cluster):
    with urllib.request.urlopen(cluster.url + "/", timeout=10) as r:
        cookie = r.headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith(f"{deploy.COOKIE}=")
    seen = {_replica(cluster.url, cookie) for _ in range(6)}
    assert len(seen) == 1 and seen <= {u.removeprefix("http://") for u in cluster.replica_urls}
    with urllib.request.urlopen(cluster.url + "/", timeout=10) as r:  # a cookie is kept
        assert "Set-Cookie" in r.headers
    req = urllib.request.Request(cluster.url + "/", headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert "Set-Cookie" not in r.headers


def _cookies_on_two_replicas(url: str) -> list[str]:
    """Route cookie values that nginx sends to two different replicas."""
    by_replica: dict[str, str] = {}
    for i in range(64):
        by_replica.setdefault(_replica(url, f"{deploy.COOKIE}=class-{i}"), f"class-{i}")
        if len(by_replica) == 2:
            return list(by_replica.values())
    raise AssertionError(f"64 cookies all went to {list(by_replica)}")


def _rounds(page) -> int:
    found = re.search(r"Rounds: (\d+)", page.inner_text("body"))
    return int(found.group(1)) if found else 0


def _click(page, label: str, rounds: int) -> None:
    """Click and wait until the run is over and the page shows ``rounds`` finished rounds."""
    page.get_by_role("button", name=label).click()
    page.wait_for_function(
        "n => !document.querySelector('[data-testid=\"stStatusWidget\"]') &&"
        " (n === 0 ? !/Rounds: \\d/.test(document.body.innerText)"
        " : document.body.innerText.includes('Rounds: ' + n + ' '))",
        arg=rounds, timeout=60_000,
    )  # fmt: skip


def test_no_cross_talk_through_the_proxy(cluster):
    """Four sessions through nginx (spread over both replicas) click different sequences
    at the same time; replayed alone afterwards, each sees exactly what it saw."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import classroom_ws as W

    url = cluster.url.replace("http", "ws", 1) + "/_stcore/stream"
    plans = [["① Propose", "② Verify", "③ Commit / reject", "Run one round"],
             ["Run one round", "Run one round", "① Propose"],
             ["① Propose", "② Verify", "③ Commit / reject"],
             ["Run one round", "① Propose", "② Verify"]]  # fmt: skip

    async def lesson(plan: list[str]) -> list[str]:
        client, ws = await W.open_client(url)
        seen = []
        for label in plan:
            await client.rerun(click=label)
            assert not client.exceptions, client.exceptions
            seen.append(W.observe(client))
        await ws.close()
        return seen

    async def together() -> list[list[str]]:
        return list(await asyncio.gather(*(lesson(p) for p in plans)))

    async def alone() -> list[list[str]]:
        return [await lesson(p) for p in plans]

    loaded = asyncio.run(asyncio.wait_for(together(), 240))
    assert asyncio.run(asyncio.wait_for(alone(), 240)) == loaded
    assert len({tuple(s) for s in loaded}) == len(plans)  # different lessons indeed


@pytest.mark.browser
def test_two_sessions_on_two_replicas_keep_their_own_lessons(cluster):
    from playwright.sync_api import sync_playwright

    host = cluster.url.removeprefix("http://").split(":")[0]
    routes = _cookies_on_two_replicas(cluster.url)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pages = []
        for route in routes:
            context = browser.new_context(viewport={"width": 1400, "height": 1800})
            context.add_cookies([{"name": deploy.COOKIE, "value": route, "domain": host,
                                  "path": "/"}])  # fmt: skip
            page = context.new_page()
            page.goto(cluster.url)
            page.get_by_role("button", name="① Propose").wait_for(timeout=90_000)
            pages.append(page)
        a, b = pages
        # Interleaved: A runs whole rounds, B steps through one round button by button.
        _click(a, "Run one round", 1)
        _click(b, "① Propose", 0)
        _click(a, "Run one round", 2)
        _click(b, "② Verify", 0)
        _click(a, "Run one round", 3)
        _click(b, "③ Commit / reject", 1)
        _click(a, "Run one round", 4)
        assert (_rounds(a), _rounds(b)) == (4, 1)
        assert b.get_by_role("button", name="① Propose").is_enabled()
        assert a.get_by_text("KeyError").count() == b.get_by_text("Traceback").count() == 0
        browser.close()
    logs = [(cluster.logs / f"replica{i}.log").read_text() for i in range(2)]
    assert all("Error" not in log for log in logs), logs
