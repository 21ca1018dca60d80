"""Scale-out: two app replicas behind Debian's nginx on loopback (``deploy/replicas.py``,
``deploy/nginx-specdec.conf``). Two browser sessions pinned to different replicas by
their route cookie step through different lessons; each keeps its own state across
several clicks, and a cookie always reaches the same replica. Hardening: the
rendered nginx.conf passes ``nginx -t``; 1,200 half-open requests from one address leave
new visitors their page and websocket; a half-open request is closed after 10 s; the
replica's address and Streamlit's metrics stay away from the public."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
import replicas as deploy  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

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
    with deploy.cluster(2) as run:
        yield run


def _replica(url: str, cookie: str) -> str:
    """The replica a route cookie reaches (nginx's loopback-only debug path)."""
    req = urllib.request.Request(url + "/_specdec/replica", headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["X-Specdec-Replica"]


def test_the_rendered_nginx_conf_passes_nginx_t(tmp_path):
    _require("nginx", deploy.nginx_binary() is not None)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / "tmp" / sub).mkdir(parents=True)
    snippet = deploy.render_snippet(["127.0.0.1:8501", "127.0.0.1:8502"], "127.0.0.1:8540")
    for conf_text, name in (
        (deploy.render_main(snippet, tmp_path), "loopback.conf"),
        (deploy.render_main(snippet), "container.conf"),
    ):
        conf = tmp_path / name
        conf.write_text(conf_text)
        out = subprocess.run(
            [
                deploy.nginx_binary(),
                "-t",
                "-p",
                str(tmp_path),
                "-e",
                str(tmp_path / "error.log"),
                "-c",
                str(conf),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0 and "test is successful" in out.stderr, out.stderr
    text = deploy.render_main(snippet, tmp_path)
    for line in (
        "worker_processes auto;",
        "worker_rlimit_nofile 16384;",
        "worker_connections 8192;",
        "client_header_timeout 10s;",
        "client_body_timeout 10s;",
        "reset_timedout_connection on;",
        "keepalive_timeout 30s;",
        "send_timeout 30s;",
        "client_max_body_size 5200k;",
        "limit_conn specdec_conn 1000;",
        "proxy_set_header X-Real-IP $remote_addr;",
        "error_log " + str(tmp_path / "error.log") + " error;",
    ):
        assert line in text, line
    public = text.split("location / {")[1].split("}")[0]
    assert "X-Specdec-Replica" not in public  # only on the loopback-only debug path


def _status(url: str, source: str = "127.0.0.1") -> tuple[int, dict]:
    """GET ``url`` from the loopback address ``source``: (status, headers)."""
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    path = "/" + url.removeprefix("http://").split("/", 1)[1]
    with socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0)) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    return int(head[0].split()[1]), {k.lower(): v for k, v in headers.items()}


def test_the_replica_address_and_metrics_stay_private(cluster):
    for path in ("/", "/_stcore/health", "/_stcore/host-config"):
        status, headers = _status(cluster.url + path)
        assert status == 200 and "x-specdec-replica" not in headers, (path, headers)
    for path in ("/_stcore/metrics", "/_stcore/metrics/", "/_stcore/%6detrics"):
        assert _status(cluster.url + path)[0] == 404, path
    for replica in cluster.replica_urls:  # the replica itself still has them (same machine)
        with urllib.request.urlopen(replica + "/_stcore/metrics", timeout=10) as r:
            assert r.status == 200
    # the debug path: the machine itself sees the replica, any other address gets 403
    status, headers = _status(cluster.url + "/_specdec/replica")
    assert status == 200 and headers["x-specdec-replica"].startswith("127.0.0.1:")
    assert _status(cluster.url + "/_specdec/replica", source="127.0.0.2")[0] == 403


def test_half_open_requests_leave_new_visitors_their_page(cluster):
    """1,200 half-open requests held from 127.0.0.2 (above the old config's 1,024
    connections): 10 of 10 page loads and websocket handshakes from 127.0.0.1 within 5 s
    each; one half-open request is closed by nginx after client_header_timeout (10 s)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import classroom_ws as W

    ws = cluster.url.replace("http", "ws", 1) + "/_stcore/stream"

    async def flood() -> dict:
        ctx = W.ProbeContext(cluster.url, ws, cluster.replicas[0].pid, cluster.logs)
        task = asyncio.ensure_future(W.half_open_flood(ctx, 1200))
        await asyncio.wait_for(ctx.ready.wait(), 120)
        ctx.release.set()
        return await task

    result = asyncio.run(asyncio.wait_for(flood(), 180))
    assert result["held"] >= 1200 and (result["pages"], result["sockets"]) == (10, 10), result
    host, port = cluster.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(W.HALF_OPEN)
        started = time.monotonic()
        try:
            assert s.recv(1) == b""  # closed by nginx, nothing sent …
        except ConnectionResetError:  # … or reset (reset_timedout_connection)
            pass
        waited = time.monotonic() - started
    assert 8 < waited < 15, waited  # nginx's default was 60 s


def test_nginx_snippet_pins_sessions_by_cookie_and_upgrades_websockets():
    conf = deploy.render_snippet(["127.0.0.1:1", "127.0.0.1:2"], "127.0.0.1:3")
    assert "ip_hash" not in conf.split("# Websocket")[1]  # a class behind one NAT
    assert "hash $specdec_route consistent;" in conf
    assert "server 127.0.0.1:1;" in conf and "server 127.0.0.1:2;" in conf
    for line in (
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
        "proxy_set_header Host $http_host;",
        "listen 127.0.0.1:3;",
    ):
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
        arg=rounds,
        timeout=60_000,
    )


def test_no_cross_talk_through_the_proxy(cluster):
    """Four sessions through nginx (spread over both replicas) click different sequences
    at the same time; replayed alone afterwards, each sees exactly what it saw."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import classroom_ws as W

    url = cluster.url.replace("http", "ws", 1) + "/_stcore/stream"
    plans = [
        ["① Propose", "② Verify", "③ Commit / reject", "Run one round"],
        ["Run one round", "Run one round", "① Propose"],
        ["① Propose", "② Verify", "③ Commit / reject"],
        ["Run one round", "① Propose", "② Verify"],
    ]

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

    _require("Chromium", Path(CHROMIUM).exists())
    host = cluster.url.removeprefix("http://").split(":")[0]
    routes = _cookies_on_two_replicas(cluster.url)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pages = []
        for route in routes:
            context = browser.new_context(viewport={"width": 1400, "height": 1800})
            context.add_cookies(
                [{"name": deploy.COOKIE, "value": route, "domain": host, "path": "/"}]
            )
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
