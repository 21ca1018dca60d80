"""The guided lessons: seven chapters, each its own section and link (``?chapter=N``),
with predict-then-reveal checkpoints (:mod:`specdec_core.ui.lessons.checkpoint`) on the
real pair.

The chapter is read from the URL once per browser session (validated: 1..7, anything
else opens chapter 1 with a message), then kept in ``st.session_state``; each run hands it
to :func:`specdec_core.ui.step.links.write_url` through ``ui/step/links.py``'s ``EXTRA_PARAMS``, so
a reload keeps the chapter.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.ui.i18n import lang, t
from specdec_core.ui.lessons import (
    ch_cache,
    ch_drafts,
    ch_greedy,
    ch_lossless,
    ch_rule,
    ch_speed,
    ch_state,
)
from specdec_core.ui.lessons.checkpoint import ANSWERS, chapter_progress, progress_bar
from specdec_core.ui.step.lesson import own_action
from specdec_core.ui.step.links import EXTRA_PARAMS

CHAPTERS = (ch_greedy, ch_rule, ch_cache, ch_lossless, ch_speed, ch_state, ch_drafts)
PAGE = "lessons"
CHAPTER = "ls_chapter"  # the chapter shown (1-based)
URL_READ = "ls_url_read"
BAD_URL = "ls_bad_url"


def read_chapter() -> int:
    """The chapter to show: from ``?chapter=`` on the first run of this browser session
    (a bad value → chapter 1 and a message), then from session state."""
    S = st.session_state
    if not S.get(URL_READ):
        S[URL_READ] = True
        raw = st.query_params.get("chapter")
        if raw is not None:
            ok = raw.strip().isdigit() and 1 <= int(raw) <= len(CHAPTERS)
            S[CHAPTER] = int(raw) if ok else 1
            if not ok:
                S[BAD_URL] = raw[:20]
    S.setdefault(CHAPTER, 1)
    return S[CHAPTER]


def chapter_link(n: int) -> str:
    """The shareable URL of chapter ``n`` on this server (in the language on screen)."""
    base = (st.context.url or "").split("?")[0] or "http://localhost:8501/"
    if not base.rstrip("/").endswith("/" + PAGE):
        base = base.rstrip("/") + "/" + PAGE
    params = {"chapter": n, **({"lang": "zh"} if lang() == "zh" else {})}
    return f"{base}?{urlencode(params)}"


def _go(n: int) -> None:
    st.session_state[CHAPTER] = n
    own_action()  # a following student reads on alone now: the line offers "Follow again"


def _picked(key: str) -> None:
    st.session_state[CHAPTER] = st.session_state[key]
    own_action()


def picker(current: int) -> None:
    key = f"ls_pick_{lang()}"
    st.session_state[key] = current
    labels = {n: f"{n} · {t(f'ls_ch{n}_short')}" for n in range(1, len(CHAPTERS) + 1)}
    st.radio(
        t("ls_chapter_pick"),
        list(labels),
        key=key,
        horizontal=True,
        format_func=labels.__getitem__,
        on_change=_picked,
        args=(key,),
    )


def summary() -> None:
    st.header(t("ls_summary_title"))
    rows = []
    for n, chapter in enumerate(CHAPTERS, 1):
        done, right, first = chapter_progress(chapter.CHECKS)
        rows.append((t(f"ls_ch{n}_title"), f"{done}/{len(chapter.CHECKS)}", right, first))
    st.dataframe(
        pd.DataFrame(
            rows,
            columns=[
                t("ls_col_chapter"),
                t("ls_col_answered"),
                t("ls_col_right"),
                t("ls_col_first"),
            ],
        ),
        hide_index=True,
    )
    total = sum(len(c.CHECKS) for c in CHAPTERS)
    right = sum(chapter_progress(c.CHECKS)[1] for c in CHAPTERS)
    st.markdown(t("ls_summary_total", right=right, total=total))
    st.button(t("ls_reset"), key="ls_reset", on_click=lambda: st.session_state.pop(ANSWERS, None))


def render(pair: ModelPair) -> None:
    """The whole page below the title: picker, chapter, navigation, summary."""
    n = read_chapter()
    bad = st.session_state.pop(BAD_URL, None)
    if bad is not None:
        st.warning(t("ls_bad_chapter", value=bad, n=len(CHAPTERS)))
    picker(n)
    st.session_state[EXTRA_PARAMS] = (PAGE, {"chapter": str(n)})
    chapter = CHAPTERS[n - 1]
    st.header(t(f"ls_ch{n}_title"))
    st.caption(t("ls_chapter_link", url=chapter_link(n)))
    head = st.empty()  # filled below with the footer: both from one count, after the chapter
    chapter.render(pair)
    st.divider()
    progress_bar(chapter.CHECKS)
    with head:
        progress_bar(chapter.CHECKS)
    cols = st.columns(2)
    if n > 1:
        cols[0].button(t("ls_prev"), key="ls_prev", on_click=_go, args=(n - 1,))
    if n < len(CHAPTERS):
        cols[1].button(t("ls_next"), key="ls_next", on_click=_go, args=(n + 1,))
    else:
        summary()
