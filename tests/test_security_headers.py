"""Security headers of the deployment (``deploy/nginx-specdec.conf``): nginx hides its
version and sends a Content-Security-Policy, X-Frame-Options and X-Content-Type-Options on
every response (the replica's own copies hidden); the policy's script hash is the one of
the installed Streamlit's inline script; and the app's pages run under that policy in
Chromium with no violation (a step round clicked, a Plotly chart drawn)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import streamlit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
import replicas as deploy  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _policy() -> str:
    """The Content-Security-Policy the nginx snippet sends (its one add_header line)."""
    found = re.findall(
        r'add_header Content-Security-Policy "([^"]+)" always;', deploy.SNIPPET.read_text()
    )
    assert len(found) == 1
    return found[0]


def _directives(policy: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}


def test_the_policy_allows_streamlits_own_inline_script_by_hash_and_nothing_inline_else():
    html = (Path(streamlit.__file__).parent / "static" / "index.html").read_text()
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in inline
    }
    d = _directives(_policy())
    assert hashes and hashes <= set(d["script-src"]), "re-hash index.html's inline scripts"
    assert "'unsafe-inline'" not in d["script-src"] and "'unsafe-eval'" not in d["script-src"]
    assert d["frame-ancestors"] == ["'self'"] and d["object-src"] == ["'none'"]
    assert d["default-src"] == ["'self'"] and d["connect-src"] == ["'self'"]


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A stand-in replica that sends its own (weaker) copies of the headers."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b"<html>replica</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("X-Frame-Options", "ALLOWALL")
        self.send_header("Content-Security-Policy", "default-src *")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _nginx(upstream: str) -> Iterator[str]:
    """nginx with the rendered snippet in front of ``upstream`` (HOST:PORT), checked with
    ``nginx -t`` first; yields its URL. Its prefix is a folder of its own under /tmp (not
    pytest's 0700 tree: workers running as "nobody" buffer large responses there)."""
    binary = deploy.nginx_binary()
    if binary is None:
        pytest.skip("nginx is not installed: run `apt-get install -y nginx`")
    with tempfile.TemporaryDirectory(prefix="specdec-csp-") as folder:
        yield from _serve(binary, upstream, Path(folder))


def _serve(binary: str, upstream: str, prefix: Path) -> Iterator[str]:
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / sub).mkdir(parents=True)
    for d in [prefix, *prefix.rglob("*")]:  # workers run as "nobody" when we are root
        d.chmod(0o777)
    listen = f"127.0.0.1:{deploy.free_port()}"
    conf = prefix / "nginx.conf"
    conf.write_text(deploy.render_main(deploy.render_snippet([upstream], listen), prefix))
    argv = [binary, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)]
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0 and "test is successful" in checked.stderr, checked.stderr
    nginx = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://{listen}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/", timeout=2)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        nginx.terminate()
        nginx.wait(20)


@pytest.fixture(scope="module")
def proxy():
    """nginx in front of :class:`_Upstream`."""
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with _nginx(f"127.0.0.1:{upstream.server_address[1]}") as url:
            yield url
    finally:
        upstream.shutdown()


def _get(url: str) -> tuple[int, dict[str, list[str]], bytes]:
    try:
        r = urllib.request.urlopen(url, timeout=10)
    except urllib.error.HTTPError as err:
        r = err
    headers: dict[str, list[str]] = {}
    for k, v in r.headers.items():
        headers.setdefault(k.lower(), []).append(v)
    return r.status, headers, r.read()


@pytest.mark.parametrize("path, status", [("/", 200), ("/_stcore/metrics", 404)])
def test_nginx_sends_the_headers_once_and_hides_its_version(proxy, path, status):
    got, headers, body = _get(proxy + path)
    assert got == status
    assert headers["content-security-policy"] == [_policy()]  # the replica's copy hidden
    assert headers["x-frame-options"] == ["SAMEORIGIN"]
    assert headers["x-content-type-options"] == ["nosniff"]
    assert headers["server"] == ["nginx"]  # no version
    assert b"nginx/" not in body
    assert headers["set-cookie"][0].startswith("specdec_route=")  # affinity still set


# ------------------------------------------------------------------ the app under the policy
PAGES = ["/lessons", "/acceptance_lab", "/speed", "/drafters", "/lossless"]
VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e =>
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture
def app_proxy(server):
    """nginx (this snippet) in front of the session's ``streamlit run app.py``."""
    with _nginx(server.removeprefix("http://")) as url:
        yield url


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_runs_under_the_policy(app_proxy, new_page, tmp_path, lang):
    """Through nginx: a round clicked on the step page, a tree proposed (a Plotly figure
    drawn) and every other page drawn, with no CSP violation and no CSP or websocket
    console error; an injected inline script is blocked (the policy is in force)."""
    page = new_page(1400, 2000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.add_init_script(VIOLATIONS)
    page.goto(app_proxy + ("/?lang=zh" if lang == "zh" else "/"))
    labels = {"en": ("① Propose", "② Verify"), "zh": ("① 提议", "② 验证")}[lang]
    page.get_by_role("button", name=labels[0]).wait_for(timeout=90_000)
    for label in labels:
        page.get_by_role("button", name=label).click()
        page.wait_for_function(
            "label => [...document.querySelectorAll('button')].some("
            "b => b.innerText.includes(label) && b.disabled)",
            arg=label,
            timeout=30_000,
        )
    assert page.locator("span.tok").count() > 10
    tree = {"en": "a tree", "zh": "树"}[lang]  # tree mode draws a Plotly figure
    page.locator(".st-key-step_mode_row button").filter(has_text=tree).click()
    page.locator(".st-key-btn_tree_propose button").wait_for(timeout=60_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
    )
    page.locator(".st-key-btn_tree_propose button").click()
    try:
        page.locator(".st-key-tree_chart .js-plotly-plot .main-svg").first.wait_for(timeout=60_000)
    finally:
        page.screenshot(path=str(tmp_path / f"csp_step_{lang}.png"), full_page=True)
    for path in PAGES:
        page.goto(app_proxy + path + ("?lang=zh" if lang == "zh" else ""))
        page.locator("[data-testid='stMain'] [data-testid='stMarkdown']").first.wait_for(
            timeout=60_000
        )
        page.wait_for_timeout(1500)  # charts and late styles
        assert page.locator("[data-testid='stException']").count() == 0, path
    page.screenshot(path=str(tmp_path / f"csp_last_{lang}.png"), full_page=True)
    assert page.evaluate("window.__csp") == []
    assert [m for m in console if "Content Security Policy" in m or "WebSocket" in m] == []
    page.evaluate(
        "document.body.appendChild(Object.assign(document.createElement('script'),"
        " {textContent: 'window.__ran = 1'}))"
    )
    assert page.evaluate("window.__ran") is None
    assert any(v.startswith("script-src") for v in page.evaluate("window.__csp"))
