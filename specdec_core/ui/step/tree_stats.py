"""The step-through page's tree mode, its statistics: the tree session's summary and
round history, and "chain vs tree on this prompt" -- the chain (gamma = the tree's depth)
and the tree timed interleaved on the fast paths (``bench.tree_vs_chain.chain_vs_tree``), drawn as a
chart with the timing's spread and how it was measured.

A timing is never shared between sessions: one measured while another student flooded the
server (138 / 245 ms per token against 1.9 / 2.7 idle) must not become every later
student's figure. Each session keeps its own few results in ``st.session_state``
(:data:`CACHE_SIZE`, the newest), and "Measure again" replaces one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import streamlit as st

from specdec_core.bench.timing import judge
from specdec_core.bench.tree_vs_chain import TreeBenchRow, chain_vs_tree
from specdec_core.core.models import ModelPair
from specdec_core.engine.session import Session
from specdec_core.lessons.replay import TREE_BUDGET
from specdec_core.ui.figures.tree import chain_tree_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.speed.view import busy_message, how_label, spread_text
from specdec_core.ui.step.header import Heading
from specdec_core.ui.step.lesson import Lesson
from specdec_core.ui.words import ROUND_KIND, say

COMPARE_TOKENS = 32  # new tokens per fast-path run in "chain vs tree"
COMPARE_REPEATS = 3  # timed runs of each, interleaved, after one warm-up run of each
CACHE_KEY = "tree_compare_cache"  # this session's results: {compare_key: (chain, tree)}
CACHE_SIZE = 4  # results kept per session (the newest)

# one measurement at a time in this process: two at once would time each other
_measure_lock = threading.Lock()


def compare_key(pair: ModelPair, prompt: str, drafter: str, shape: tuple[int, ...]) -> tuple:
    return (pair.name, prompt, drafter, tuple(shape), COMPARE_TOKENS)


def _measure(pair: ModelPair, lesson: Lesson) -> tuple[TreeBenchRow, TreeBenchRow]:
    """The benchmark's :func:`specdec_core.bench.tree_vs_chain.chain_vs_tree` for the
    lesson's prompt, settings, drafter and shape (:data:`COMPARE_TOKENS` new tokens,
    :data:`COMPARE_REPEATS` timed runs each), one measurement at a time."""
    with _measure_lock:
        return chain_vs_tree(
            pair,
            lesson.prompt,
            lesson.config,
            lesson.drafter,
            lesson.shape,
            TREE_BUDGET,
            COMPARE_TOKENS,
            COMPARE_REPEATS,
        )


def _cache() -> dict:
    """This session's results (a crafted or stale value of another type is replaced)."""
    cache = st.session_state.get(CACHE_KEY)
    if not isinstance(cache, dict):
        cache = st.session_state[CACHE_KEY] = {}
    return cache


def _remember(key: tuple, rows: tuple[TreeBenchRow, TreeBenchRow]) -> None:
    cache = _cache()
    cache.pop(key, None)
    cache[key] = rows
    while len(cache) > CACHE_SIZE:  # the oldest goes
        cache.pop(next(iter(cache)))


@dataclass(frozen=True)
class Bar:
    """One bar pair of the chart (``ui.figures.tree.chain_tree_figure``)."""

    label: str
    tokens_per_target_forward: float
    ms_per_token: float


def _run_compare() -> None:
    st.session_state["tree_compare_wanted"] = True


def section(pair: ModelPair, session: Session, lesson: Lesson, heading: Heading) -> None:
    """The tree mode's statistics (summary and per-round history) and "chain vs tree on
    this prompt": a button, then the measured pair as a chart and a caption."""
    heading(t("tree_stats_heading"))
    if session.history:
        s = session.steps.summary()
        st.markdown(
            t(
                "tree_stats",
                tpf=s.tokens_per_target_forward,
                tokens=s.tokens,
                rounds=s.rounds,
                forwards=s.target_forwards,
                mean=s.mean_accepted,
                nodes=s.mean_nodes,
            )
        )
        if s.target_forwards > s.rounds:  # one verification per round; the rest: a prefill
            st.caption(
                t("tree_stats_prefill", forwards=s.target_forwards, n=s.target_forwards - s.rounds)
            )
        with st.expander(t("st_history"), expanded=False):
            for r in reversed(session.history):
                rec = r.record
                st.markdown(
                    t(
                        "tree_history_round",
                        r=r.round_index + 1,
                        k=rec.accepted,
                        depth=rec.depth,
                        nodes=rec.nodes,
                        n=len(rec.appended),
                        kind=say(ROUND_KIND, ("tree", rec.kind)),
                    )
                )
    else:
        st.caption(t("tree_stats_empty"))
    st.markdown(f"**{t('tree_compare_heading')}**")
    key = compare_key(pair, lesson.prompt, lesson.drafter, lesson.shape)
    cache = _cache()
    if st.session_state.pop("tree_compare_wanted", False):  # first time, or measure again
        with st.spinner(t("tree_compare_running")):
            _remember(key, _measure(pair, lesson))
    if key not in cache:
        st.button(
            t("tree_compare_button", n=COMPARE_TOKENS),
            on_click=_run_compare,
            help=t("tree_compare_help", n=COMPARE_TOKENS, r=COMPARE_REPEATS),
            key="btn_tree_compare",
        )
        return
    chain, tree = cache[key]
    shape = ",".join(map(str, lesson.shape))
    labels = [t("tree_compare_chain", g=len(lesson.shape)), t("tree_compare_tree", shape=shape)]
    shown = [
        Bar(label, r.tokens_per_target_forward, r.ms_per_token)
        for label, r in zip(labels, (chain, tree), strict=True)
    ]
    # built once per result and language (a rerun of the panel draws the same figure)
    stamp = chain.how.at if chain.how is not None else 0.0
    fig_key = (key, stamp, tuple(labels), t("tree_compare_ms"))
    cached = st.session_state.get("tree_compare_fig")
    if not isinstance(cached, tuple) or cached[0] != fig_key:
        names = {"per_forward": t("tree_compare_per_forward"), "ms_per_token": t("tree_compare_ms")}
        cached = (fig_key, chain_tree_figure(shown, names))
        st.session_state["tree_compare_fig"] = cached
    fig = cached[1]
    st.plotly_chart(
        fig,
        width="stretch",
        key="tree_compare_chart",
        config={"displaylogo": False, "displayModeBar": False},
    )
    st.caption(
        t(
            "tree_compare_result",
            g=len(lesson.shape),
            c_tpf=chain.tokens_per_target_forward,
            c_ms=chain.ms_per_token,
            shape=shape,
            t_tpf=tree.tokens_per_target_forward,
            t_ms=tree.ms_per_token,
        )
        + " — "
        + t("tree_compare_note")
    )
    spreads = [r.spread for r in (chain, tree) if r.spread is not None]
    if len(spreads) == 2:
        st.caption(
            t(
                "tree_compare_spread",
                c=spread_text(spreads[0], 1),
                t=spread_text(spreads[1], 1),
                how=how_label(chain.how),
            )
        )
    verdict = judge(spreads)
    if verdict.busy:
        st.warning(busy_message(verdict.reasons, "tree_compare_busy"))
    st.button(
        t("tree_compare_again"),
        on_click=_run_compare,
        key="btn_tree_compare_again",
        help=t("tree_compare_again_help"),
    )
