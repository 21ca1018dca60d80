"""How long a fresh server takes to be usable: from ``streamlit run app.py`` (started here,
as the README's "Run the app" says, on a free local port) to the first page showing the
step-through page's token strip with ① Propose enabled, in Debian's Chromium (started
before the server, so its own start is not counted; the page is opened as soon as the
server answers its health check, like a teacher who opens the URL at once). Also when the
server's warm-up (``ui/loader.warm_up``) logged the scenario search done. Prints one line
per run, then the median with the min–max spread and the load average before each run.

    python benchmarks/startup.py [--runs 3] [--threads N] [--compare DIR]

``--threads`` sets ``SPECDEC_TORCH_THREADS`` for the server (default: unset, so the app's
own default applies: one torch thread on a machine with ≤ 2 cores). ``--compare DIR``
(another checkout, e.g. ``git archive COMMIT | tar -x -C DIR``) alternates its runs with
this checkout's, so both see the same load.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
WARM_LINE = re.compile(r"specdec-warm .*scenarios=(\d+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all its threads) the process ``pid`` has used (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(browser, threads: int | None, app_dir: Path = REPO) -> dict[str, float]:
    """One fresh server: seconds from its start to health, to the strip, to the warm-up
    line (``nan`` when the server never logged one within 30 s), and the CPU seconds the
    server had used when the strip showed (on an idle machine its wall time is about
    that: the server is mostly one busy thread until then)."""
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("SPECDEC_TORCH_THREADS", None)
    if threads:
        env["SPECDEC_TORCH_THREADS"] = str(threads)
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    cmd += ["--server.port", str(port), "--server.address", "127.0.0.1"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=app_dir, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                if time.perf_counter() - started > 120:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        health = time.perf_counter() - started
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(url)
        page.locator("div.strip span.tok").first.wait_for(timeout=120_000)
        page.wait_for_function(
            "() => { const b = document.querySelector('.st-key-btn_propose button');"
            " return b && !b.disabled; }",
            timeout=120_000,
        )
        strip = time.perf_counter() - started
        cpu = cpu_s(proc.pid)
        warm = float("nan")
        while time.perf_counter() - started < strip + 30:
            if WARM_LINE.search(Path(log.name).read_text()):
                warm = time.perf_counter() - started
                break
            time.sleep(0.1)
        context.close()
        return {"health": health, "strip": strip, "warm": warm, "cpu": cpu}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        os.unlink(log.name)


def _spread(values: list[float]) -> str:
    ok = [v for v in values if v == v]
    if not ok:
        return "—"
    return f"{statistics.median(ok):.1f} s ({min(ok):.1f}–{max(ok):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="SPECDEC_TORCH_THREADS")
    parser.add_argument("--compare", type=Path, default=None, help="another checkout")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, SPECDEC_TORCH_THREADS: {args.threads or 'unset'}")
    dirs = {"this checkout": REPO} | ({"compared": args.compare} if args.compare else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in dirs}
    loads: dict[str, list[float]] = {name: [] for name in dirs}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for i in range(args.runs):
            for name, app_dir in dirs.items():
                loads[name].append(os.getloadavg()[0])
                run = one_run(browser, args.threads, app_dir)
                runs[name].append(run)
                print(
                    f"{name} run {i + 1}: load {loads[name][-1]:.2f} · health "
                    f"{run['health']:.1f} s · strip {run['strip']:.1f} s · "
                    f"warm-up done {run['warm']:.1f} s · server CPU at the strip "
                    f"{run['cpu']:.1f} s",
                    flush=True,
                )
                time.sleep(5)  # let the last server's exit settle
        browser.close()
    for name in dirs:
        print(f"== {name} ({dirs[name]})")
        print(f"health check answered: {_spread([r['health'] for r in runs[name]])}")
        print(f"first page with the step strip: {_spread([r['strip'] for r in runs[name]])}")
        print(f"warm-up (pair + scenarios) logged done: {_spread([r['warm'] for r in runs[name]])}")
        print(f"server CPU seconds at the strip: {_spread([r['cpu'] for r in runs[name]])}")
        print(f"load average (1 min) before each run: {', '.join(f'{x:.2f}' for x in loads[name])}")


if __name__ == "__main__":
    main()
