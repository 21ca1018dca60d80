"""The grammar compile bomb against a real server: CPU after the tabs close.

    python benchmarks/grammar_bomb.py [--repo DIR] [--tabs 2] [--open-s 4] [--watch-s 15]
        [--groups 250] [--max-optional N] [--compile-table 40,80,120]

Starts ``streamlit run app.py`` from ``--repo`` (default this checkout; give an export of
an older commit to measure "before"), opens a lesson link whose grammar is the regex
``(.?)`` × ``--groups`` (the link is ≈ 74 characters of query) in ``--tabs`` Chromium
tabs, keeps them open ``--open-s`` seconds, closes them, and samples the CPU time of the
server and all its child processes (``/proc``) every 0.5 s for ``--watch-s`` seconds.
``--max-optional`` sets ``SPECDEC_GRAMMAR_MAX_OPTIONAL`` (lift the cost bound so the bomb
reaches the compiler and the kill at the bound is what is timed).

Prints one JSON object: CPU-s of the server tree while the tabs were open (the compile
and the pages), CPU-s per second after the close, ``idle_after_s`` (the first
moment from which every later 1 s window used < 0.05 CPU-s; ``null`` if never), and with
``--compile-table`` the in-process xgrammar compile time of ``(.?)`` × N on the embedded
tokenizer (CPU-s, each in a child capped at 30 CPU-s). Figures are printed, never asserted;
the machine is shared, so wall times are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CHROMIUM = "/usr/bin/chromium"
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and every live descendant, from ``/proc``."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        # utime, stime, cutime, cstime: the reaped children's time counts as well
        cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / TICK
    keep, total = [root], 0.0
    while keep:
        pid = keep.pop()
        total += cpu.get(pid, 0.0)
        keep.extend(p for p, parent in parents.items() if parent == pid)
    return total


def bomb_query(groups: int) -> str:
    from specdec_core.lessons.link import LessonState, encode

    return urlencode(encode(LessonState(grammar=("regex", "(.?)" * groups))))


def start_server(repo: Path, port: int, env: dict) -> subprocess.Popen:
    argv = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    argv += ["--server.port", str(port), "--server.address", "127.0.0.1"]
    argv += ["--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(
        argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("streamlit did not start")


def compile_table(ns: list[int]) -> dict[str, float | str]:
    """CPU-s of an unbounded xgrammar compile of ``(.?)`` × n (a child per n)."""
    child = (
        "import resource,sys,time,xgrammar as x;from transformers import AutoTokenizer as A;"
        "t=A.from_pretrained(sys.argv[1]);c=x.GrammarCompiler(x.TokenizerInfo.from_huggingface"
        "(t,vocab_size=4096),max_threads=1,cache_enabled=False);"
        "resource.setrlimit(resource.RLIMIT_CPU,(30,31));s=time.process_time();"
        "c.compile_regex('(.?)'*int(sys.argv[2]));print(round(time.process_time()-s,2))"
    )
    out: dict[str, float | str] = {}
    target = str(REPO / "assets" / "models" / "embedded" / "target")
    for n in ns:
        run = subprocess.run(
            [sys.executable, "-c", child, target, str(n)], capture_output=True, text=True
        )
        out[str(n)] = float(run.stdout) if run.stdout.strip() else "over 30 CPU-s"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--tabs", type=int, default=2)
    ap.add_argument("--open-s", type=float, default=4.0)
    ap.add_argument("--watch-s", type=float, default=15.0)
    ap.add_argument("--groups", type=int, default=250)
    ap.add_argument("--max-optional", type=int, default=None)
    ap.add_argument("--compile-table", default="")
    args = ap.parse_args()
    import socket

    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_TORCH_THREADS": "1"}
    if args.max_optional is not None:
        env["SPECDEC_GRAMMAR_MAX_OPTIONAL"] = str(args.max_optional)
    server = start_server(args.repo, port, env)
    url = f"http://127.0.0.1:{port}/?{bomb_query(args.groups)}"
    result: dict[str, object] = {"repo": str(args.repo), "tabs": args.tabs, "url_query": url}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless"])
            warm = browser.new_context().new_page()  # the pair loads: not the bomb's cost
            warm.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            warm.wait_for_selector("[data-testid='stSidebar']", timeout=120_000)
            warm.context.close()
            time.sleep(2.0)
            opened = tree_cpu_s(server.pid)
            contexts = [browser.new_context() for _ in range(args.tabs)]
            for ctx in contexts:
                ctx.new_page().goto(url, wait_until="domcontentloaded")
            time.sleep(args.open_s)
            for ctx in contexts:
                ctx.close()
            browser.close()
        closed, series = tree_cpu_s(server.pid), [(0.0, 0.0)]
        result["cpu_s_while_open"] = round(closed - opened, 2)
        start = time.monotonic()
        while time.monotonic() - start < args.watch_s:
            time.sleep(0.5)
            series.append((round(time.monotonic() - start, 1), tree_cpu_s(server.pid) - closed))
        per_s = [round(b[1] - a[1], 2) for a, b in zip(series[::2], series[2::2], strict=False)]
        idle = None
        for i in range(len(series) - 2):  # windows of 1 s (two samples)
            later = [series[j + 2][1] - series[j][1] for j in range(i, len(series) - 2)]
            if all(w < 0.05 for w in later):
                idle = series[i][0]
                break
        result.update(
            cpu_s_per_s_after_close=per_s,
            cpu_s_total_after_close=round(series[-1][1], 2),
            idle_after_s=idle,
        )
    finally:
        server.terminate()
        server.wait(20)
    if args.compile_table:
        result["compile_cpu_s"] = compile_table([int(n) for n in args.compile_table.split(",")])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
