"""The tree's part of the step panel (:mod:`specdec_core.ui.step.panel`): its refusal
when the settings cannot draft a tree, its phase line, the committed text, the drafted
tree (Plotly), the tree attention mask (an HTML grid), the target's KV cache before and
after the path compaction, and the round's outcome -- one tree round. The statistics and "chain
vs tree on this prompt" below it are :mod:`specdec_core.ui.step.tree_stats`. Drawing only;
every number comes from the :class:`TreeSession`'s views."""

from __future__ import annotations

import html

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.core.words import StripState
from specdec_core.engine.session import Session
from specdec_core.engine.tree.records import tree_strip_states
from specdec_core.engine.tree.views import TreeView
from specdec_core.ui.figures.tree import STATE_STYLE, tree_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.render import StripItem, token_strip_html
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_lesson as TL
from specdec_core.ui.step import tree_stats
from specdec_core.ui.step.header import Heading
from specdec_core.ui.step.strip_checks import alert, line_html, note, section_html
from specdec_core.ui.step.tree_tables import kv_panel, mask_html
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import FIGURE_STATE, PHASE, ROUND_KIND, STOP_REASON, TREE_REFUSAL, say


# ------------------------------------------------------------------ the tree panel
def ready(config: SessionConfig) -> bool:
    """Whether the sidebar's drafter and ``config`` (its settings) can draft a tree; if
    not, say why once (prompt lookup, the block drafter, a greedy draft method at T > 0)
    with a button back to the chain."""
    why = TL.tree_ready(L.drafter_name(), config)
    if why is None:
        return True
    st.warning(say(TREE_REFUSAL, why))
    st.button(t("tree_use_chain"), on_click=TL.use_chain, type="primary", key="btn_tree_use_chain")
    return False


def phase_line(session: Session, phase: str) -> str:
    """The phase line above the tree (Propose names the shape and the node budget)."""
    shape = ",".join(map(str, session.steps.shape))
    return say(PHASE, ("tree", phase), shape=shape, budget=session.steps.budget)


def draw(pair: ModelPair, lesson: L.Lesson, phase: str, presenter: bool, heading: Heading) -> None:
    """Everything of the tree below the step panel's Lesson panel."""
    session: Session = lesson.session
    if not presenter:
        st.caption(t("tree_intro"))
        with st.expander(t("tree_rule_title"), icon=":material/account_tree:"):
            st.markdown(t("tree_rule_body"))
    tree = session.steps.tree_view()
    mask = session.steps.attention_mask()
    last = session.history[-1] if session.history and tree is None else None
    if last is not None:  # after a commit: the round just committed, as verified
        tree, mask = last.verify.tree, last.propose.mask
    outcome = _outcome(session, tree, last, presenter) if tree is not None else ""
    st.html(_strip(session, phase, outcome, presenter))  # one element: strip and outcome
    # presenter mode (no sidebar): the tree and the mask side by side, the outcome below;
    # otherwise the tree, its outcome and the mask stacked across the page (a 13-column
    # grid fits beside nothing next to an open sidebar at 1024 px: it ran under the outcome)
    if presenter:
        tree_box, mask_box = st.columns([3, 2], gap="medium")
    else:
        tree_box, mask_box = st.container(), st.container()
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
    with mask_box:  # one element: its title, the grid and what a ✓ means
        size = "1.2rem" if presenter else "1rem"
        grid = mask_html(mask, tree, presenter) if mask is not None else ""
        st.html(
            f'<p style="font-weight:600;font-size:{size};margin:0 0 0.5rem">'
            f"{html.escape(t('tree_mask_heading'))}</p>{grid}"
            + note(line_html("tree_mask_caption"), presenter)
        )
    kv_panel(session, phase, heading)
    tree_stats.section(pair, session, lesson, heading)


def _strip(session: Session, phase: str, outcome: str, presenter: bool) -> str:
    """The strip element's HTML: the committed text; after verify what the commit will
    append (as the chain's strip: the accepted path, then the ★ token, its KV not computed
    yet), after a commit what it appended; ``outcome`` (the round's) below it."""
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    record = last.record if last is not None else session.current_record  # None before verify
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    n_new = len(last.record.appended) if last is not None else 0  # verified: not in ids yet
    items += [StripItem(session.token(i), "committed") for i in generated[: len(generated) - n_new]]
    if record is not None:  # the engine's rule: path accepted, then the round's ★ token
        items += [StripItem(session.token(tok), s) for tok, s in tree_strip_states(record)]
    legend: list[StripState] = ["prompt", "committed", "accepted", "correction", "bonus"]
    strip = token_strip_html(items, legend)
    return section_html(t("st_strip"), strip, below=outcome, presenter=presenter)


#: The tree figure's other words, each the string ``tree_<word>``.
FIGURE_WORDS = "root root_tick depth node position accept not_checked next_correction next_bonus"


def _labels() -> dict[str, str]:
    """The tree figure's words in the page's language: its node states, then the rest."""
    states = {state: say(FIGURE_STATE, state) for state in STATE_STYLE}
    return states | {word: t(f"tree_{word}") for word in FIGURE_WORDS.split()}


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


def _outcome(session: Session, tree: TreeView, last, presenter: bool) -> str:
    """The round's outcome as HTML (a box coloured as st.success / st.warning / st.info),
    its near-ties and, after the commit, its timing ("" before Verify)."""
    record = last.record if last is not None else session.current_record
    if record is None:
        return ""
    depth = max((n.depth for n in tree.nodes), default=0)
    tok = {"tok": token_in_sentence(tree.next_token, "html")}
    if record.kind == "stopped":  # ★ was never appended: name the rule's verdict on it
        reason = last.commit.stop_reason if last is not None else session.current_stop_reason
        reason = reason or "eos"
        kind = say(ROUND_KIND, ("tree", tree.next_kind or "correction"))
        line = line_html(
            "tree_outcome_stopped",
            tok,
            reason=say(STOP_REASON, reason),
            n=len(record.appended),
            kind=kind,
        )
        parts = [alert("info", line, presenter)]
    else:
        line = line_html(
            "tree_outcome",
            tok,
            k=record.accepted,
            depth=depth,
            nodes=record.nodes,
            kind=say(ROUND_KIND, ("tree", record.kind)),
            n=len(record.appended),
        )
        parts = [alert("success" if record.kind == "bonus" else "warning", line, presenter)]
    ties = [token_in_sentence(n.token, "html") for n in tree.nodes if n.near_tie]
    if ties:
        parts.append(note(line_html("near_tie_node_note", {"tokens": ", ".join(ties)}), presenter))
    if last is not None:
        timing = line_html(
            "tree_timing",
            d=last.propose.draft_ms,
            f=record.draft_forwards,
            v=last.verify.verify_ms,
            n=record.nodes,
        )
        parts.append(note(timing, presenter))
    return "".join(parts)
