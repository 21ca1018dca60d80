"""The tree mode's tables on the step page: the tree attention mask grid and the target's KV
cache before → after the compaction (the views come from
:mod:`specdec_core.engine.tree.views`; this module only draws them).
"""

from __future__ import annotations

import html

import streamlit as st

from specdec_core.engine.session import Session
from specdec_core.engine.tree.views import CompactionView, KVSlot, MaskView, TreeView
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.tree import STATE_COLORS, STATE_STYLE
from specdec_core.ui.i18n import t
from specdec_core.ui.render import KV_ROW_COLORS, html_table, kv_table_html
from specdec_core.ui.step import processors_view
from specdec_core.ui.step.header import Heading
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import (
    SLOT_STATE,
    STOP_REASON,
    say,
)


def mask_html(mask: MaskView, tree: TreeView | None, presenter: bool = False) -> str:
    """The tree attention mask as a small HTML grid: rows = nodes (token and position id,
    coloured by state), columns = the committed prefix + every node; ✓ where the row's
    node attends, · where it does not. All token text is escaped."""
    states = [n.state for n in tree.nodes] if tree is not None else ["tentative"] * len(mask.labels)
    size = 14 if presenter else 13
    cell = f"padding:1px 3px;text-align:center;font-size:{size}px;border:1px solid #e5e7eb;"
    head = (
        f'<th style="{cell}">{html.escape(t("tree_mask_node"))}</th>'
        f'<th style="{cell}" title="{mask.prefix_len}">'
        f"{html.escape(t('tree_mask_prefix', n=mask.prefix_len))}</th>"
    )
    # node tokens (a byte of a multi-byte character shows as ‹E6›, not "�"), else the labels
    toks = [n.token for n in tree.nodes] if tree is not None else list(mask.labels)
    head += "".join(
        f'<th style="{cell}" title="{html.escape(visible_token(lab))}">{j}</th>'
        for j, lab in enumerate(toks)
    )
    rows = []
    for i, lab in enumerate(toks):
        fill, border, color = STATE_COLORS[STATE_STYLE.get(states[i], "tentative")]
        text = visible_token(lab)
        text = text if len(text) <= 9 else text[:8] + "…"
        name = (
            f'<td style="{cell}text-align:left;white-space:pre;font-family:monospace;'
            f'background:{fill};color:{color};border-left:3px solid {border}">'
            f"{i} {html.escape(text)} · {mask.positions[i]}</td>"
        )
        cells = "".join(
            f'<td style="{cell}background:#dcfce7;color:#14532d;font-weight:700">✓</td>'
            if v
            else f'<td style="{cell}color:#9ca3af">·</td>'
            for v in mask.grid[i].tolist()
        )
        rows.append(f"<tr>{name}{cells}</tr>")
    return (
        f'<div class="tree-mask" style="overflow:visible"><table style="border-collapse:'
        f'collapse;line-height:1.25"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
        "</tbody></table></div>"
    )


# ------------------------------------------------------------------ KV before / after
_KEEP_COMMITTED = 2  # committed rows shown before the tree's rows


def _slot_state(state: str) -> str:
    return say(SLOT_STATE, state)


def _rows(plan: CompactionView) -> tuple[list[KVSlot], list[KVSlot]]:
    """(before, after) slots shown: the last committed rows and one per node; the rows the
    commit keeps, in their new slots, from the first one shown."""
    slots = list(plan.slots)
    first_node = next((i for i, s in enumerate(slots) if s.node is not None), len(slots))
    shown = slots[max(0, first_node - _KEEP_COMMITTED) :]
    kept = sorted((s for s in slots if s.new_slot is not None), key=lambda s: s.new_slot)
    return shown, [s for s in kept if shown and s.new_slot >= shown[0].slot]


def compaction_tables(plan: CompactionView) -> tuple[dict[str, list], dict[str, list]]:
    """(before, after) of a compaction plan as table columns (header → cells): before =
    the cache right after the verify forward (the last committed rows and one row per
    node) with what the commit does to each row; after = the rows it keeps, in their new
    slots. Tokens as :func:`visible_token` shows them (escaped by ``html_table``)."""
    shown, kept = _rows(plan)
    action = {
        "kept": lambda s: t("tree_action_kept"),
        "moved": lambda s: t("tree_action_moved", n=s.new_slot),
        "dropped": lambda s: t("tree_action_dropped"),
    }
    before = {
        t("tree_col_slot"): [s.slot for s in shown],
        t("col_token"): [visible_token(s.token) for s in shown],
        t("tree_col_state"): [_slot_state(s.state) for s in shown],
        t("tree_col_action"): [action[s.action](s) for s in shown],
    }
    after = {
        t("tree_col_slot"): [s.new_slot for s in kept],
        t("col_token"): [visible_token(s.token) for s in kept],
        t("tree_col_state"): [_slot_state(s.state) for s in kept],
        t("tree_col_from"): [s.slot for s in kept],
    }
    return before, after


_ROW_COLORS = {
    "accepted": KV_ROW_COLORS["accepted"],
    "rejected": KV_ROW_COLORS["rejected"],
    "unchecked": KV_ROW_COLORS["discarded"],
    "cut": KV_ROW_COLORS["cut"],
    "tentative": KV_ROW_COLORS["tentative"],
}


def compaction_html(plan: CompactionView) -> str:
    """Both tables of :func:`compaction_tables` side by side (wrapping on a phone), each
    under its title, rows coloured by state: one HTML element (two ``st.table`` in
    columns were seven elements, every cell a markdown element)."""
    shown, kept = _rows(plan)
    before, after = compaction_tables(plan)
    parts = []
    # side by side where both fit whole (a projector), else one above the other (1024 px
    # with the sidebar open: the "before" table's last column was cut in a 5:4 column)
    for title, columns, slots, name, basis in (
        ("tree_kv_before", before, shown, "tree-kv-before", 340),
        ("tree_kv_after", after, kept, "tree-kv-after", 240),
    ):
        colours = [_ROW_COLORS.get(s.state, "") for s in slots]
        parts.append(
            f'<div style="flex:1 1 {basis}px;min-width:0"><p style="font-weight:600;'
            f'margin:0 0 0.25rem">{html.escape(t(title))}</p>'
            f"{html_table(columns, colours, name)}</div>"
        )
    return f'<div style="display:flex;flex-wrap:wrap;gap:1rem">{"".join(parts)}</div>'


def kv_panel(session: Session, phase: str, heading: Heading) -> None:
    heading(t("tree_kv_heading"))
    state = session.kv_state()
    plan = session.steps.compaction() if phase != "verify" else None
    target_len = plan.rows_before if plan is not None and not plan.applied else state.target_kv_len
    st.markdown(t("tree_kv_counts", c=state.committed_len, t=target_len, d=state.draft_kv_len))
    if plan is None:
        if phase == "verify":
            st.caption(t("tree_kv_no_tree"))
        st.html(kv_table_html(state, 3))  # the chain's table: every cell escaped
        _processors(session, phase, heading)
        return
    if plan.applied:
        moved = sum(s.action == "moved" for s in plan.slots)
        dropped = sum(s.action == "dropped" for s in plan.slots)
        if session.stop_reason:  # no next round: nothing "is the next round's first input"
            tok = token_in_sentence(session.token(session.ids[-1]))
            st.caption(
                t(
                    "tree_kv_applied_end",
                    r=len(session.history),
                    moved=moved,
                    dropped=dropped,
                    reason=say(STOP_REASON, session.stop_reason),
                    tok=tok,
                )
            )
        else:
            st.caption(t("tree_kv_applied", r=len(session.history), moved=moved, dropped=dropped))
    else:
        st.caption(t("tree_kv_planned"))
    st.html(compaction_html(plan))
    _processors(session, phase, heading)


def _processors(session: Session, phase: str, heading: Heading) -> None:
    """The state beyond the KV cache (ui/step/processors_view.py)."""
    found = processors_view.tree_moments(session, phase)
    if found is None:
        return
    config = session.config
    processors_view.section(
        found[0],
        session.prompt_len,
        session.token,
        config.repetition_penalty == 1.0 and config.no_repeat_ngram_size == 0,
        heading,
        found[1],
    )
