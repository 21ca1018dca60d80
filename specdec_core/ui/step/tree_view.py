"""The step-through page's tree mode, drawn inside the page's step fragment: the mode
control (chain | tree) and shape, the tree buttons, the committed text, the drafted tree
(Plotly), the tree attention mask (an HTML grid), the target's KV cache before and after
the path compaction, and the round's outcome -- one tree round. The statistics and "chain
vs tree on this prompt" below it are :mod:`specdec_core.ui.step.tree_stats`. Drawing only;
every number comes from the :class:`TreeSession`'s views."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.words import StripState
from specdec_core.engine.tree.records import tree_strip_states
from specdec_core.engine.tree.session import TreeSession
from specdec_core.engine.tree.views import TreeView
from specdec_core.ui import problems
from specdec_core.ui.errors import code_span, error_message
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.tree import STATE_STYLE, tree_figure
from specdec_core.ui.i18n import strings, t
from specdec_core.ui.render import StripItem, token_strip_html
from specdec_core.ui.sidebar import current_config
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_lesson as TL
from specdec_core.ui.step import tree_stats
from specdec_core.ui.step.tools import render_tree_lesson_tools, step_back_button
from specdec_core.ui.step.tree_tables import kv_panel, mask_html
from specdec_core.ui.words import (
    FIGURE_STATE,
    MODE,
    STOP_REASON,
    TREE_PHASE,
    TREE_REFUSAL,
    TREE_ROUND_KIND,
    TREE_STEP_BUTTON,
    say,
)

INTRO_MODE = "st_intro_mode"  # the mode the page's introduction was written for
TREE_HOW = ("model", "early-exit", "eagle", "mtp")  # the sources that draft a tree


def page_intro(drafter: str) -> str:
    """The step page's introduction for the shape on screen: the chain's (``st_intro`` with
    the drafter's ``st_intro_how_*``) or the tree's (``tree_page_intro`` with the
    drafter's ``tree_intro_how_*``). Records the mode it was written for, so
    :func:`mode_row` can redraw the page when a switch inside the fragment changes it."""
    mode = TL.mode()
    st.session_state[INTRO_MODE] = mode
    if mode == "tree":
        how = drafter if drafter in TREE_HOW else "none"
        return t("tree_page_intro", how=t("tree_intro_how_" + how))
    key = "st_intro_how_" + drafter
    return t("st_intro", how=t(key if key in strings() else "st_intro_how_model"))


def mode_row() -> str:
    """The "Verify: a chain | a tree" control (and, in tree mode, the shape box) in one
    row at the top of the step panel. Returns the mode."""
    TL.seed_widgets()
    row = st.container(
        horizontal=True, vertical_alignment="bottom", gap="medium", key="step_mode_row"
    )
    with row:
        names = {m: say(MODE, m) for m in TL.MODES}  # bound now: one widget per language
        st.segmented_control(
            t("tree_mode_label"),
            list(TL.MODES),
            key=TL.mode_key(),
            on_change=TL.switch_mode,
            format_func=names.__getitem__,
            help=t("tree_mode_help"),
        )
        mode = TL.mode()
        if mode == "tree":
            st.selectbox(
                t("tree_shape_label"),
                TL.shape_options(),
                key=TL.SHAPE_KEY,
                on_change=TL.keep_shape,
                help=t("tree_shape_help"),
                width=380,
            )
    if st.session_state.get(INTRO_MODE, mode) != mode:  # the page's introduction is stale
        st.rerun()  # inside the fragment: the whole page, with the other introduction
    return mode


# ------------------------------------------------------------------ the tree panel
def panel(
    pair: ModelPair,
    presenter: bool,
    heading: Callable[[str], None],
    live_tab: Callable[[str], None] | None = None,
) -> None:
    """Everything of tree mode below the mode row (``live_tab``: the Lesson panel's
    "Live class" tab, as in :func:`~specdec_core.ui.step.tools.render_lesson_tools`)."""
    S = st.session_state
    config = current_config(pair)
    why = TL.tree_ready(L.drafter_name(), config)
    if why is not None:  # prompt lookup (or a greedy draft method at T > 0): say so once
        st.warning(say(TREE_REFUSAL, why))
        st.button(
            t("tree_use_chain"), on_click=TL.use_chain, type="primary", key="btn_tree_use_chain"
        )
        return
    synced = TL.sync(pair, config, S[L.PROMPT_KEY])
    if synced.lesson is None:
        st.error(error_message(synced.error))
        return
    if synced.notice:
        S["step_notice"] = t(synced.notice, **(synced.notice_args or {}))
    if synced.blocked and synced.error is not None:
        S["step_error"] = error_message(synced.error)
    session: TreeSession = synced.lesson.session
    phase = "finished" if synced.blocked else session.phase
    _controls(session, phase)
    _messages(session, phase, synced.blocked)
    render_tree_lesson_tools(session, live_tab)
    if not presenter:
        st.caption(t("tree_intro"))
        with st.expander(t("tree_rule_title"), icon=":material/account_tree:"):
            st.markdown(t("tree_rule_body"))
    _strip(session, phase, heading)
    tree = session.tree_view()
    mask = session.attention_mask()
    last = session.history[-1] if session.history and tree is None else None
    if last is not None:  # after a commit: the round just committed, as verified
        tree, mask = last.tree, last.mask
    # presenter mode (no sidebar): the tree and the mask side by side, the outcome below;
    # otherwise the tree, its outcome and the mask stacked across the page (a 13-column
    # grid fits beside nothing next to an open sidebar at 1024 px: it ran under the outcome)
    if presenter:
        tree_box, mask_box = st.columns([3, 2], gap="medium")
    else:
        tree_box, mask_box = st.container(), st.container()
    outcome_box = tree_box
    with tree_box:
        heading(t("tree_fig_heading"))
        if tree is None:
            st.caption(t("tree_empty"))
        else:
            if last is not None:
                st.caption(t("tree_last_round", r=last.round_index + 1))
            # the root: the last committed token before the round (committed ids only grow)
            root = session.token(session.ids[tree.committed_len - 1])
            _tree_chart(tree, root, presenter)
    if tree is not None:
        with outcome_box:
            _outcome(session, tree, last)
    with mask_box:
        if not presenter:
            st.markdown(f"**{t('tree_mask_heading')}**")
        else:
            heading(t("tree_mask_heading"))
        if mask is not None:
            st.html(mask_html(mask, tree, presenter))
        st.caption(t("tree_mask_caption"))
    kv_panel(session, phase, heading)
    tree_stats.section(pair, session, synced.lesson, heading)


def _controls(session: TreeSession, phase: str) -> None:
    """The tree's buttons, in the chain's row (same key: presenter mode keeps it sticky),
    ending with ↶ Step back (the lesson one phase earlier, replayed: like the chain's)."""
    with st.container(
        horizontal=True, vertical_alignment="bottom", gap="small", key="step_controls"
    ):
        for step, label in TREE_STEP_BUTTON.items():
            st.button(
                t(label),
                on_click=TL.act,
                args=(step,),
                disabled=phase != step,
                type="primary" if phase == step else "secondary",
                key=f"btn_tree_{step}",
            )
        st.button(
            t("st_run_round"),
            on_click=TL.act,
            args=("round",),
            disabled=phase == "finished",
            key="btn_tree_round",
        )
        st.button(
            t("st_reset"),
            on_click=TL.act,
            args=("reset",),
            help=t("tree_reset_help"),
            key="btn_tree_reset",
        )
        step_back_button(st, session)


def _messages(session: TreeSession, phase: str, blocked: bool) -> None:
    S = st.session_state
    if "step_error" in S:
        st.error(S.pop("step_error"))
    if "step_notice" in S:
        st.info(S.pop("step_notice"))
    problems.show()  # what a lesson link or a replay dropped
    if blocked:
        return
    if phase == "finished":
        reason = say(STOP_REASON, session.stop_reason)
        st.success(t("st_phase") + say(TREE_PHASE, "finished", reason=reason))
    elif phase == "propose":
        shape = ",".join(map(str, session.shape))
        st.info(t("st_phase") + say(TREE_PHASE, "propose", shape=shape, budget=session.budget))
    else:
        st.info(t("st_phase") + say(TREE_PHASE, phase))


def _strip(session: TreeSession, phase: str, heading: Callable[[str], None]) -> None:
    """The committed text; after a commit the round's accepted path and ★ token."""
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    n_new = len(last.record.appended) if last is not None else 0
    items += [StripItem(session.token(i), "committed") for i in generated[: len(generated) - n_new]]
    if last is not None:  # the engine's rule: path accepted, then the round's ★ token
        items += [StripItem(session.token(tok), s) for tok, s in tree_strip_states(last.record)]
    heading(t("st_strip"))
    legend: list[StripState] = ["prompt", "committed", "accepted", "correction", "bonus"]
    st.html(token_strip_html(items, legend))


def _labels() -> dict[str, str]:
    return {
        **{state: say(FIGURE_STATE, state) for state in STATE_STYLE},
        "root": t("tree_root"),
        "root_tick": t("tree_root_tick"),
        "depth": t("tree_depth"),
        "node": t("tree_node"),
        "position": t("tree_position"),
        "accept": t("tree_accept"),
        "not_checked": t("tree_not_checked"),
        "next_correction": t("tree_next_correction"),
        "next_bonus": t("tree_next_bonus"),
    }


def _tree_chart(tree: TreeView, root, presenter: bool) -> None:
    """The tree figure, built once per (view, language, presenter) and kept in session
    state (a Plotly figure costs tens of ms; the views are frozen)."""
    labels = _labels()
    key = (id(tree), tuple(labels.items()), presenter)
    cached = st.session_state.get("tree_fig")
    if cached is None or cached[0] != key or cached[1] is not tree:
        cached = (key, tree, tree_figure(tree, root, labels, presenter))
        st.session_state["tree_fig"] = cached
    st.plotly_chart(
        cached[2],
        width="stretch",
        key="tree_chart",
        config={"displaylogo": False, "displayModeBar": False},
    )


def _outcome(session: TreeSession, tree: TreeView, last) -> None:
    record = last.record if last is not None else session.current_record
    if record is None:
        return
    depth = max((n.depth for n in tree.nodes), default=0)
    tok = code_span(visible_token(tree.next_token))
    if record.kind == "stopped":  # ★ was never appended: name the rule's verdict on it
        reason = last.stop_reason if last is not None else session.current_stop_reason
        reason = reason or "eos"
        st.info(
            t(
                "tree_outcome_stopped",
                reason=say(STOP_REASON, reason),
                n=len(record.appended),
                kind=say(TREE_ROUND_KIND, tree.next_kind or "correction"),
                tok=tok,
            )
        )
    else:
        box = st.success if record.kind == "bonus" else st.warning
        box(
            t(
                "tree_outcome",
                k=record.accepted,
                depth=depth,
                nodes=record.nodes,
                kind=say(TREE_ROUND_KIND, record.kind),
                tok=tok,
                n=len(record.appended),
            )
        )
    ties = [code_span(visible_token(n.token)) for n in tree.nodes if n.near_tie]
    if ties:
        st.caption(t("near_tie_node_note", tokens=", ".join(ties)))
    if last is not None:
        st.caption(
            t(
                "tree_timing",
                d=last.draft_ms,
                f=record.draft_forwards,
                v=last.verify_ms,
                n=record.nodes,
            )
        )
