"""The step-through page's tree mode, its statistics: the tree session's summary and
round history, and "chain vs tree on this prompt" -- the chain (gamma = the tree's depth)
and the tree measured once per process and key on the fast paths (``generate.generate``
and ``tree.generate_tree``), cached here, drawn as a chart."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import streamlit as st

from specdec_core.bench.runs import ignoring_eos
from specdec_core.drafters import make_named_drafter
from specdec_core.figures.tree import chain_tree_figure
from specdec_core.generate import generate
from specdec_core.models import ModelPair
from specdec_core.tree_generate import generate_tree
from specdec_core.tree_session import TreeSession

from . import tree_lesson as TL
from .i18n import t

COMPARE_TOKENS = 32  # new tokens per fast-path run in "chain vs tree"


@dataclass(frozen=True)
class CompareRow:
    label: str
    tokens_per_target_forward: float
    ms_per_token: float
    tokens: int
    target_forwards: int


_compare_lock = threading.Lock()
_compared: dict[tuple, tuple[CompareRow, CompareRow]] = {}


def compare_key(pair: ModelPair, prompt: str, drafter: str, shape: tuple[int, ...]) -> tuple:
    return (pair.name, prompt, drafter, tuple(shape), COMPARE_TOKENS)


def chain_vs_tree(pair: ModelPair, prompt: str, config, drafter: str,
                  shape: tuple[int, ...]) -> tuple[CompareRow, CompareRow]:  # fmt: skip
    """The chain (γ = the tree's depth) and the tree, greedy, ``COMPARE_TOKENS`` new tokens
    each (end-of-text ignored), on the fast paths; measured once per process and key."""
    key = compare_key(pair, prompt, drafter, shape)
    with _compare_lock:
        if key not in _compared:
            timed = ignoring_eos(pair)
            cfg = replace(config, gamma=len(shape), temperature=0.0, top_k=0, top_p=1.0,
                          max_new_tokens=COMPARE_TOKENS)  # fmt: skip
            chain = generate(timed, prompt, cfg, mode="speculative",
                             drafter=make_named_drafter(pair, drafter)).stats  # fmt: skip
            tree = generate_tree(timed, prompt, cfg, shape, TL.BUDGET, drafter)
            text = ",".join(map(str, shape))
            _compared[key] = (
                CompareRow(f"chain γ={len(shape)}", chain.new_tokens / chain.target_forwards,
                           chain.total_ms / chain.new_tokens, chain.new_tokens,
                           chain.target_forwards),
                CompareRow(f"tree {text}", tree.tokens_per_target_forward, tree.ms_per_token,
                           len(tree.output_ids), tree.target_forwards),
            )  # fmt: skip
        return _compared[key]


def _run_compare() -> None:
    st.session_state["tree_compare_wanted"] = True


def section(pair: ModelPair, session: TreeSession, lesson, heading: Callable[[str], None]) -> None:
    """The tree mode's statistics (summary and per-round history) and "chain vs tree on
    this prompt": a button, then the measured pair as a chart and a caption."""
    heading(t("tree_stats_heading"))
    if session.history:
        s = session.summary()
        st.markdown(t("tree_stats", tpf=s.tokens_per_target_forward, tokens=s.tokens,
                      rounds=s.rounds, forwards=s.target_forwards, mean=s.mean_accepted,
                      nodes=s.mean_nodes))  # fmt: skip
        with st.expander(t("st_history"), expanded=False):
            for r in reversed(session.history):
                rec = r.record
                st.markdown(t("tree_history_round", r=r.round_index + 1, k=rec.accepted,
                              depth=rec.depth, nodes=rec.nodes, n=len(rec.appended),
                              kind=t("tree_kind_" + rec.kind)))  # fmt: skip
    else:
        st.caption(t("tree_stats_empty"))
    st.markdown(f"**{t('tree_compare_heading')}**")
    key = compare_key(pair, lesson.prompt, lesson.drafter, lesson.shape)
    have = key in _compared
    if not have and st.session_state.pop("tree_compare_wanted", False):
        with st.spinner(t("tree_compare_running")):
            chain_vs_tree(pair, lesson.prompt, lesson.config, lesson.drafter, lesson.shape)
        have = True
    if not have:
        st.button(
            t("tree_compare_button", n=COMPARE_TOKENS), on_click=_run_compare,
            help=t("tree_compare_help", n=COMPARE_TOKENS), key="btn_tree_compare",
        )  # fmt: skip
        return
    chain, tree = _compared[key]
    shape = ",".join(map(str, lesson.shape))
    labels = [t("tree_compare_chain", g=len(lesson.shape)), t("tree_compare_tree", shape=shape)]
    shown = [replace(chain, label=labels[0]), replace(tree, label=labels[1])]
    # built once per result and language (a rerun of the panel draws the same figure)
    fig_key = (key, tuple(labels), t("tree_compare_ms"))
    cached = st.session_state.get("tree_compare_fig")
    if cached is None or cached[0] != fig_key:
        names = {"per_forward": t("tree_compare_per_forward"), "ms_per_token": t("tree_compare_ms")}
        cached = (fig_key, chain_tree_figure(shown, names))
        st.session_state["tree_compare_fig"] = cached
    fig = cached[1]
    st.plotly_chart(fig, width="stretch", key="tree_compare_chart",
                    config={"displaylogo": False, "displayModeBar": False})  # fmt: skip
    st.caption(t("tree_compare_result", g=len(lesson.shape), c_tpf=chain.tokens_per_target_forward,
                 c_ms=chain.ms_per_token, shape=shape, t_tpf=tree.tokens_per_target_forward,
                 t_ms=tree.ms_per_token) + " — " + t("tree_compare_note"))  # fmt: skip
