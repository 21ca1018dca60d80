"""Click latency in a real browser: Chromium (Playwright) against a fresh
``streamlit run app.py`` on 127.0.0.1, with the embedded pair.

Measures:
- cold start: server process start → the step-through page usable in the browser
  (① Propose visible and enabled), and whether the sidebar ever showed the raw
  ``pages/`` file names (Streamlit's legacy navigation) before ``app.py`` took over;
  with ``--warm`` the server first gets one warm-up session (``deploy/warm_up.py``,
  what ``deploy/replicas.py`` does before nginx sends it students), and the browser
  arrives after it;
- per button (① Propose, ② Verify, ③ Commit / reject) over ``--rounds`` rounds: click →
  the chart and KV table updated, i.e. the last DOM change in the main area after the
  click, once the clicked step's button is disabled and the main area has been quiet for
  ``QUIET_MS`` (a MutationObserver timestamps every change, in the page's own clock).

Prints p50/p95 per button and the cold start, the first click after the page opened on
its own (it also loads the chart's JavaScript), and the server's part of a step click
(the fragment's run, from the server log that ``SPECDEC_PROFILE=1`` writes); writes a
JSON (``--json``). A benchmark, not a timed test. Traffic goes to 127.0.0.1 only; every
wait is bounded.

    python benchmarks/click_latency.py [--rounds 20] [--warm] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import classroom_ws as W

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from warm_up import warm_up  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STEPS = ["① Propose", "② Verify", "③ Commit / reject"]
RAW_NAV = {"step through", "acceptance lab", "speed", "drafters", "lessons"}
QUIET_MS = 300
OBSERVER = """() => {
  window.__last = performance.now();
  new MutationObserver(() => { window.__last = performance.now(); })
    .observe(document.querySelector('[data-testid="stMain"]'),
             {subtree: true, childList: true, attributes: true, characterData: true});
}"""
CLICK = "b => { window.__t0 = performance.now(); window.__last = window.__t0; b.click(); }"
SETTLED = """([label, enabled, quiet]) => {
  const ready = [...document.querySelectorAll('[data-testid="stMain"] button')]
    .some(b => b.innerText.includes(label) && b.disabled !== enabled);
  return ready && performance.now() - window.__last > quiet;
}"""
NAV_TEXTS = """() => [...document.querySelectorAll(
  '[data-testid="stSidebarNav"] a, [data-testid="stSidebar"] a')]
  .map(a => a.innerText.trim().toLowerCase())"""  # Streamlit's menu or app.py's own links


def pct(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def cold_start(browser, warm: bool) -> tuple[dict, object, object]:
    """Start the server, open the page; returns (figures, server context, page)."""
    log = Path(tempfile.mkdtemp(prefix="click-")) / "server.log"
    t_launch = time.perf_counter()
    server_cm = W.app_server(log)
    proc = server_cm.__enter__()
    t_health = time.perf_counter()
    if warm:
        with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
            pool.submit(asyncio.run, warm_up(f"http://127.0.0.1:{proc.server_port}")).result()
    t_ready = time.perf_counter()
    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    t_goto = time.perf_counter()
    page.goto(f"http://127.0.0.1:{proc.server_port}/", wait_until="commit")
    nav_seen: set[str] = set()
    button = page.get_by_role("button", name=STEPS[0])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # sample the sidebar while the app loads
        try:
            nav_seen.update(page.evaluate(NAV_TEXTS))
            if button.count() and button.first.is_enabled():
                break
        except Exception:  # noqa: BLE001 - the page is navigating: sample again
            pass
        time.sleep(0.05)
    else:
        raise TimeoutError("the step-through page did not become usable in 180 s")
    t_usable = time.perf_counter()
    figures = {
        "server_log": str(log),
        "warm_up_before_first_visitor": warm,
        "server_start_to_health_s": round(t_health - t_launch, 2),
        "warm_up_s": round(t_ready - t_health, 2) if warm else None,
        "server_start_to_usable_s": round(t_usable - t_launch, 2),
        "first_visit_to_usable_s": round(t_usable - t_goto, 2),
        "raw_page_names_seen_in_nav": sorted(nav_seen & RAW_NAV),
    }
    return figures, server_cm, page


def click_rounds(page, rounds: int) -> dict[str, list[float]]:
    page.evaluate(OBSERVER)
    times: dict[str, list[float]] = {s: [] for s in STEPS}
    for _ in range(rounds):
        for label in STEPS:
            button = page.get_by_role("button", name=label)
            if not button.is_enabled():  # the text is finished: start over (not timed)
                page.get_by_role("button", name="Reset", exact=True).click()
                page.wait_for_function(SETTLED, arg=[STEPS[0], True, QUIET_MS], timeout=60_000)
            button.evaluate(CLICK)
            # Done: the clicked step's button is disabled (the phase moved on; after the
            # last round of the text, ① Propose stays disabled too) and the main area quiet.
            page.wait_for_function(
                SETTLED, arg=[label, False, QUIET_MS], timeout=60_000, polling=50
            )
            times[label].append(page.evaluate("window.__last - window.__t0"))
    return times


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warm", action="store_true", help="warm-up session first")
    parser.add_argument(
        "--json", type=Path, default=Path(tempfile.gettempdir()) / "click_latency.json"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        cold, server_cm, page = cold_start(browser, args.warm)
        try:
            times = click_rounds(page, args.rounds)
        finally:
            browser.close()
            server_cm.__exit__(None, None, None)
    every = [t for ts in times.values() for t in ts]
    server_ms = [  # the step fragment's server time per click (not the page's first run)
        float(line.split()[1])
        for line in Path(cold["server_log"]).read_text().splitlines()
        if line.startswith("specdec-render-ms") and "fragment=step_panel" in line
    ]
    result = {
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "rounds": args.rounds,
        "cold_start": cold,
        "per_button_ms": {
            k: {"p50": round(pct(v, 50)), "p95": round(pct(v, 95)), "n": len(v)}
            for k, v in times.items()
        },
        "all_clicks_ms": {
            "p50": round(pct(every, 50)),
            "p95": round(pct(every, 95)),
            "max": round(max(every)),
        },
        "first_click_ms": round(times[STEPS[0]][0]),
        "after_first_click_ms": {
            "p50": round(pct(every[1:], 50)),
            "p95": round(pct(every[1:], 95)),
        },
        "server_fragment_ms": {
            "p50": round(pct(server_ms, 50), 1),
            "p95": round(pct(server_ms, 95), 1),
            "n": len(server_ms),
        },
        "raw_ms": times,
    }
    args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "raw_ms"}, ensure_ascii=False))
    print(f"written to {args.json}")


if __name__ == "__main__":
    sys.exit(main())
