"""SpecDec Lab — Streamlit entry: sidebar (pair, device, language, settings) and
``st.navigation`` over the lesson pages. Run with ``streamlit run app.py``.

Two roles in one file: ``streamlit run app.py`` finds the ``st.App`` at the bottom and
serves it (Streamlit's own routes plus a live class's push route,
``server/live_push``); every browser session then runs this file as its script
(``__name__ == "__main__"``, the block below)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import streamlit as st

from specdec_core.ui import warmup
from specdec_core.ui.context import app_context
from specdec_core.ui.i18n import t
from specdec_core.ui.live import follow as live_follow
from specdec_core.ui.live import room as live_room
from specdec_core.ui.run_gate import install_run_gate, one_run_per_browser
from specdec_core.ui.sidebar import adopt_browser_language, presenter_on, render_sidebar
from specdec_core.ui.step.links import FIRST_VISIT, PAGE, load_from_url, write_url

HERE = Path(__file__).resolve().parent

# CSS for every page (st.html sanitises, so only a <style> block). Always: a slightly
# smaller font in the sidebar's select boxes, so the model-pair label is not cut (the box
# is an <input>: it cannot wrap); a metric's change chip wraps instead of being cut with
# "…" in a narrow column (the speed page's "-9.0 ms（相比目标单步）" at 1024 px), and so do
# metric labels, widget labels and button labels (Streamlit 1.67 cuts them in their
# .stMarkdownEllipsis div: "speed-up …", "▶ Run the com…", zh toggles at 1024 px); the
# drafters page's cards share a wrapping row, each at least 215 px wide. A display formula
# (st.latex) never runs past its box: KaTeX's box scrolls sideways, but a phone shows no
# scrollbar, so the speed page's cost formula read as cut ("…验证 ms + 其他" at 390 px);
# below 640 px its type follows the screen's width (3.8vw: both languages' formula fit a
# 320–640 px phone), and where one still does not fit, a shadow at the cut edge and a
# thin scrollbar say that it scrolls. Below 640 px too: Plotly's toolbar is hidden (on a
# phone it sat over the charts' titles), and the drafters page's four-column table of
# other drafters becomes one card per row (each cell names its column) instead of
# columns two characters wide.
# Presenter mode: larger type, the step-through controls stay in view (sticky must go on
# the keyed container's wrapper: on the container itself it does nothing), less padding
# above the lesson, and the p/q chart as tall as the viewport below the sticky controls
# (ECharts follows its box; the element and its wrappers, fixed at st.echarts_chart's
# height, grow with it): 568 px at 768 px, its p = 1 bar ≈ 260 px instead of ≈ 75.
CSS = """
[data-testid="stSidebar"] .stSelectbox input { font-size: 0.85rem; }
[data-testid="stMetricDelta"] :is(div, p), .stButton button :is(div, span, p) {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
:is([data-testid="stMetricLabel"], [data-testid="stWidgetLabel"]) :is(.stMarkdownEllipsis, p) {
  white-space: normal !important; text-overflow: clip !important; }
[data-testid="stLayoutWrapper"]:has(> [class*="st-key-dr_card_"]) { flex: 1 1 215px !important;
  min-width: 215px; }
.katex-display { overflow-x: auto; overflow-y: hidden; max-width: 100%;
  background: linear-gradient(to right, #fff 30%, rgba(255,255,255,0)) left / 24px 100%,
    linear-gradient(to left, #fff 30%, rgba(255,255,255,0)) right / 24px 100%,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.25), transparent) left / 10px 100%,
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.25), transparent) right / 10px 100%;
  background-repeat: no-repeat; background-attachment: local, local, scroll, scroll;
  scrollbar-width: thin; }
@media (max-width: 640px) { .katex-display > .katex { font-size: min(1.21em, 3.8vw); } }
.sd-col { display: none; }
@media (max-width: 640px) {
  .js-plotly-plot .modebar-container { display: none !important; }
  .st-key-dr_other :is(table, tbody, tr, td) { display: block; width: auto; }
  .st-key-dr_other thead { display: none; }
  .st-key-dr_other tr { border-top: 1px solid #e5e7eb; padding: 0.4rem 0; }
  .st-key-dr_other td { border: none; padding: 0.1rem 0; }
  .st-key-dr_other .sd-col { display: inline; font-weight: 600; }
}
"""
PRESENTER_CSS = """
.block-container { padding: 3.2rem 2rem 2rem 2rem !important; }
[data-testid="stMain"] .stMarkdown p, [data-testid="stMain"] .stMarkdown li,
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stAlertContentInfo"] p { font-size: 1.2rem !important; }
[data-testid="stMain"] .stButton button p { font-size: 1.05rem !important; }
[data-testid="stMain"] .stButton button { padding: 0.2rem 0.55rem !important; }
[data-testid="stMain"] span.tok { font-size: 22px !important; }
[data-testid="stMain"] [data-testid="stTable"] table { font-size: 0.95rem; }
[data-testid="stMain"] [data-testid="stTable"] :is(td, th) { padding: 0.2rem 0.4rem; }
[data-testid="stMain"] table.sd-table { font-size: 1.05rem; }
[data-testid="stMain"] table.sd-table :is(td, th) { padding: 0.2rem 0.4rem; }
[data-testid="stMain"] details.history-round { font-size: 1.1rem; }
.st-key-dist_chart { flex: 0 0 auto !important; height: auto !important; }
.st-key-dist_chart :is([data-testid="stFullScreenFrame"], :has(> [data-testid="stEChartsChart"]),
  :has(> * > [data-testid="stEChartsChart"])) { height: auto !important; }
.st-key-dist_chart [data-testid="stEChartsChart"] {
  height: max(320px, calc(100vh - 200px)) !important; }
[data-testid="stLayoutWrapper"]:has(> .st-key-step_controls) { position: sticky;
  top: 3.75rem; z-index: 990; background: var(--background-color, #fff);
  padding: 0.3rem 0; border-bottom: 1px solid #e5e7eb; }
"""
PAGES = [
    ("pages/step_through.py", "nav_step", ":material/footprint:"),
    ("pages/lessons.py", "nav_lessons", ":material/menu_book:"),
    ("pages/acceptance_lab.py", "nav_rules", ":material/balance:"),
    ("pages/speed.py", "nav_speed", ":material/speed:"),
    ("pages/drafters.py", "nav_drafters", ":material/call_split:"),
    ("pages/lossless.py", "nav_lossless", ":material/verified:"),
]


if __name__ == "__main__":  # a script run: one browser session's page
    _started = time.perf_counter()
    install_run_gate()  # once per process: every later run waits its browser's turn first
    warmup.start()  # once per process: the opening pair and its scenarios, in the background

    load_from_url()  # a lesson link: seeds the settings once per browser session
    adopt_browser_language()  # a Chinese browser gets the Chinese screen (and pair)
    # one run at a time per browser: its other tabs wait their turn without the GIL
    with one_run_per_browser():
        live_room.on_load()  # ?room=CODE joins a live class (once)
        live_follow.before_sidebar()  # a following student gets the teacher's latest state
        presenter = presenter_on()  # ?presenter=1 on first load, then the sidebar toggle
        st.set_page_config(
            page_title="SpecDec Lab",
            page_icon="🔮",
            layout="wide",
            initial_sidebar_state="collapsed" if presenter else "auto",
        )

        st.html(f"<style>{CSS}{PRESENTER_CSS if presenter else ''}</style>")

        pages = [
            st.Page(
                str(HERE / path), title=t(key), icon=icon, default=i == 0, url_path=Path(path).stem
            )
            for i, (path, key, icon) in enumerate(PAGES)
            if (HERE / path).is_file()
        ]
        # Our own menu: `client.showSidebarNavigation = false` (.streamlit/config.toml) hides
        # Streamlit's, which on a cold server listed the raw `pages/` file names until a session
        # reached this line (streamlit#8388), and with it the st.navigation menu; these links
        # replace that menu (same pages, titles, icons, current page highlighted).
        nav = st.navigation(pages, position="hidden")
        for page in pages:
            st.sidebar.page_link(page)
        st.sidebar.divider()
        st.sidebar.title(t("app_title"))
        st.sidebar.caption(t("app_tagline"))
        render_sidebar()

        def _dismiss_welcome() -> None:
            st.session_state[FIRST_VISIT] = False

        def welcome(page: str) -> None:
            """A first visit (a bare URL, no lesson link) lands on the step-through page, the
            densest one: a box points to the Lessons until dismissed or the Lessons are opened.
            Always one container, so the page below never moves between runs (its fragment)."""
            S = st.session_state
            if page == "lessons":
                S[FIRST_VISIT] = False
            with st.container(key="welcome_box"):
                if not S.get(FIRST_VISIT) or presenter or page != "step_through":
                    return
                with st.container(border=True):
                    st.markdown(t("welcome_text"))
                    row = st.container(horizontal=True, gap="small")
                    row.page_link(lessons_page, label=t("welcome_go"), icon=":material/menu_book:")
                    row.button(
                        t("welcome_dismiss"), on_click=_dismiss_welcome, key="btn_welcome_dismiss"
                    )

        lessons_page = next(p for p in pages if p.url_path == "lessons")
        with app_context():
            st.session_state[PAGE] = nav.url_path or "step_through"
            welcome(st.session_state[PAGE])
            with st.container(key="live_bar"):  # a live class: the follower's line, a room error
                live_follow.bar(
                    st.session_state[PAGE], {p.url_path or "step_through": p for p in pages}
                )
            nav.run()
        # the state on screen (a reload keeps it); a teacher publishes it
        write_url(live_room.publisher())
        warmup.first_run_done()  # the warm-up's scenario search may start now
        if os.environ.get(
            "SPECDEC_PROFILE"
        ):  # server time of this rerun, for benchmarks/load_test.py
            print(
                f"specdec-render-ms {(time.perf_counter() - _started) * 1e3:.1f}", file=sys.stderr
            )
else:  # imported by `streamlit run app.py`: the server, with the live class's push route
    from specdec_core.ui.live.push_server import push_routes, warm_up

    install_run_gate()  # one script run at a time per browser, from the first session on
    app = st.App(__file__, routes=push_routes(), lifespan=warm_up)
