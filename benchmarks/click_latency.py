"""Click latency in a real browser: Chromium (Playwright) against a fresh
``streamlit run app.py`` on 127.0.0.1, on the pair the screen's language opens on
(``--lang en``: the embedded pair; ``--lang zh``: a Chinese browser, the Chinese pair).

Measures:
- cold start: server process start → the server answers its health check → the step page
  usable in the browser (① Propose visible and enabled), the browser arriving as soon as
  the health check answers (a first visitor); and whether the sidebar ever showed the raw
  ``pages/`` file names (Streamlit's legacy navigation) before ``app.py`` took over; with
  ``--warm`` the server first gets one warm-up session (``deploy/warm_up.py``, what
  ``deploy/replicas.py`` does before nginx sends it students), and the browser arrives
  after it;
- per shape (``--shapes chain,tree``) and step button (① Propose, ② Verify, ③ Commit)
  over ``--rounds`` rounds, after one untimed round of that shape (the chart's JavaScript
  loaded, the server warm): click → panel settled, i.e. the last DOM change in the main
  area after the click, once the clicked step's button is disabled and the main area has
  been quiet for ``QUIET_MS`` (a MutationObserver timestamps every change, in the page's
  own clock); also click → the first DOM change (the server's answer arriving) and the
  number of elements in the main area once settled. Buttons are found by their widget
  keys, so both languages run the same code.

Prints p50/p95 per button and shape, over all clicks, the cold start, and the server's
part of a step click (the fragment's run, from the server log that ``SPECDEC_PROFILE=1``
writes); writes a JSON (``--json``). A benchmark, not a timed test. Traffic goes to
127.0.0.1 only; every wait is bounded.

    python benchmarks/click_latency.py [--rounds 20] [--shapes chain,tree] [--lang en|zh]
        [--warm] [--json out.json]
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
STEPS = ["propose", "verify", "commit"]
KEYS = {"chain": "btn_", "tree": "btn_tree_"}  # + the step: the buttons' widget keys
TREE_MODE = {"en": "a tree", "zh": "树"}  # the mode row's label for a tree
RAW_NAV = {"step through", "acceptance lab", "speed", "drafters", "lessons"}
QUIET_MS = 300
OBSERVER = """() => {
  window.__last = performance.now();
  new MutationObserver(() => {
    window.__last = performance.now();
    if (window.__first === null) window.__first = window.__last;
  }).observe(document.querySelector('[data-testid="stMain"]'),
             {subtree: true, childList: true, attributes: true, characterData: true});
}"""
CLICK = """b => { window.__t0 = performance.now(); window.__last = window.__t0;
  window.__first = null; b.click(); }"""
SETTLED = """([key, enabled, quiet]) => {
  const b = document.querySelector(`[data-testid="stMain"] .st-key-${key} button`);
  return b !== null && b.disabled !== enabled && performance.now() - window.__last > quiet;
}"""
TIMES = """() => [window.__last - window.__t0, (window.__first ?? window.__last) - window.__t0,
  document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length]"""
NAV_TEXTS = """() => [...document.querySelectorAll(
  '[data-testid="stSidebarNav"] a, [data-testid="stSidebar"] a')]
  .map(a => a.innerText.trim().toLowerCase())"""  # Streamlit's menu or app.py's own links


def pct(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def cold_start(browser, warm: bool, lang: str) -> tuple[dict, object, object]:
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
    locale = "zh-CN" if lang == "zh" else "en-US"  # a Chinese browser: the Chinese screen
    page = browser.new_page(viewport={"width": 1400, "height": 2000}, locale=locale)
    t_goto = time.perf_counter()
    page.goto(f"http://127.0.0.1:{proc.server_port}/", wait_until="commit")
    nav_seen: set[str] = set()
    button = page.locator(f'[data-testid="stMain"] .st-key-{KEYS["chain"]}propose button')
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


def _click(page, key: str) -> tuple[float, float, int]:
    """Click the button ``key``; returns (click → settled ms, click → first change ms,
    elements in the main area once settled)."""
    page.locator(f'[data-testid="stMain"] .st-key-{key} button').evaluate(CLICK)
    # Done: the clicked step's button is disabled (the phase moved on; after the last
    # round of the text, ① Propose stays disabled too) and the main area quiet.
    page.wait_for_function(SETTLED, arg=[key, False, QUIET_MS], timeout=60_000, polling=50)
    settled, first, elements = page.evaluate(TIMES)
    return settled, first, int(elements)


def click_rounds(page, shape: str, rounds: int, lang: str) -> dict[str, dict[str, list]]:
    """One untimed round of ``shape`` (switching the mode row to it first), then ``rounds``
    timed ones: per step, the three lists of :func:`_click`."""
    page.evaluate(OBSERVER)
    keys = KEYS[shape]
    if shape == "tree" and page.locator(f".st-key-{keys}propose button").count() == 0:
        row = page.locator(".st-key-step_mode_row button").filter(has_text=TREE_MODE[lang])
        row.first.click()
        page.locator(f".st-key-{keys}propose button").wait_for(timeout=60_000)
        page.wait_for_function(SETTLED, arg=[f"{keys}propose", True, QUIET_MS], timeout=60_000)
    times: dict[str, dict[str, list]] = {
        s: {"settled_ms": [], "first_change_ms": [], "elements": []} for s in STEPS
    }
    for i in range(rounds + 1):
        for step in STEPS:
            key = f"{keys}{step}"
            if not page.locator(f".st-key-{key} button").is_enabled():  # text finished
                reset = page.locator(f".st-key-{keys}reset button").first  # (+ its help)
                reset.evaluate("b => b.click()")  # start over (not timed)
                page.wait_for_function(
                    SETTLED, arg=[f"{keys}propose", True, QUIET_MS], timeout=60_000
                )
            figures = _click(page, key)
            if i:  # round 0 is the untimed one
                for name, value in zip(times[step], figures, strict=True):
                    times[step][name].append(value)
    return times


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(pct(values, 50)), "p95": round(pct(values, 95)), "n": len(values)}


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--shapes", default="chain,tree", help="chain, tree or both")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    parser.add_argument("--warm", action="store_true", help="warm-up session first")
    parser.add_argument(
        "--json", type=Path, default=Path(tempfile.gettempdir()) / "click_latency.json"
    )
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if not shapes or any(s not in KEYS for s in shapes):
        parser.error("--shapes: a comma-separated list of chain, tree")
    load_before = os.getloadavg()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        cold, server_cm, page = cold_start(browser, args.warm, args.lang)
        try:
            times = {shape: click_rounds(page, shape, args.rounds, args.lang) for shape in shapes}
        except Exception:
            page.screenshot(path=str(args.json.with_suffix(".failed.png")), full_page=True)
            raise
        finally:
            browser.close()
            server_cm.__exit__(None, None, None)
    every = [t for by_step in times.values() for f in by_step.values() for t in f["settled_ms"]]
    server_ms = [  # the step fragment's server time per click (not the page's first run)
        float(line.split()[1])
        for line in Path(cold["server_log"]).read_text().splitlines()
        if line.startswith("specdec-render-ms") and "fragment=step_panel" in line
    ]
    result = {
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "lang": args.lang,
        "rounds": args.rounds,
        "cold_start": cold,
        "per_button_ms": {
            f"{shape} {step}": {
                **_summary(f["settled_ms"]),
                "first_change_p50": round(pct(f["first_change_ms"], 50)),
                "elements": round(statistics.mean(f["elements"]), 1),
            }
            for shape, by_step in times.items()
            for step, f in by_step.items()
        },
        "all_clicks_ms": {**_summary(every), "max": round(max(every))},
        "server_fragment_ms": {
            "p50": round(pct(server_ms, 50), 1),
            "p95": round(pct(server_ms, 95), 1),
            "n": len(server_ms),
        },
        "raw": times,
    }
    args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "raw"}, ensure_ascii=False))
    print(f"written to {args.json}")


if __name__ == "__main__":
    sys.exit(main())
