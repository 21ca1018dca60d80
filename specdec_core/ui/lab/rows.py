"""The rule lab's first section: the rows ``p`` and ``q`` over a few tokens -- a preset,
or one drafted position of the step page's verified round -- in an editable table (its
state checked before Streamlit applies it), and their normalised values."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specdec_core.rules.lab.rows import MAX_TOKENS, MIN_TOKENS, PRESETS, normalise
from specdec_core.ui.errors import show_error
from specdec_core.ui.guards import SHORT_CHARS, table_state_ok
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.token_text import token_in_sentence

NUM = LV.NUM


def _sources() -> None:
    """The section's heading, the presets and "load a position of the step page"."""
    S = st.session_state
    st.header(t("rl_sec_rows"))
    st.caption(t("rl_presets"))
    pcols = st.columns(len(PRESETS))
    for col, name in zip(pcols, PRESETS, strict=True):
        col.button(
            t(f"rl_preset_{name}"),
            key=f"rl_preset_{name}",
            on_click=LV.preset,
            args=(name,),
            help=t(f"rl_preset_help_{name}"),
            width="stretch",
        )

    verify = LV.step_verify()
    st.caption(t("rl_from_step"))
    s1, s2, s3 = st.columns([1, 1, 3], vertical_alignment="bottom")
    if verify is None or not verify.checks:
        s1.selectbox(t("rl_step_pos"), [1], key="rl_step_pos_off", disabled=True)
        s2.button(t("rl_step_load"), key="rl_preset_step", disabled=True, width="stretch")
        s3.caption(t("rl_step_none" if verify is None else "rl_step_no_drafts"))
    else:
        positions = [c.position for c in verify.checks]
        if S.get("rl_step_pos") not in positions:
            S["rl_step_pos"] = positions[0]
        s1.selectbox(t("rl_step_pos"), positions, key="rl_step_pos")
        s2.button(t("rl_step_load"), key="rl_preset_step", on_click=LV.from_step, width="stretch")


def section() -> tuple[list[str], np.ndarray, np.ndarray, tuple]:
    """Section 1 · the rows. Returns the token names, the normalised ``p`` and ``q``
    (float arrays, one entry per name) and the rows' source (``("preset", name)`` or the
    step page's position); a table that does not normalise stops the page with its
    message."""
    S = st.session_state
    _sources()
    if "rl_error" in S:
        st.error(S.pop("rl_error"))
    # A crafted client can store any edit state: check it before Streamlit applies it (a new
    # editor key drops it), so thousands of added rows cost nothing.
    editor_key = f"rl_editor_{S['rl_ver']}"
    try:
        edits = S.get(editor_key)
    except Exception:  # noqa: BLE001 - a state that does not even parse
        edits = "unparsable"
    if not table_state_ok(edits, len(S["rl_base"]), {"name": "text", "p": "number", "q": "number"}):
        S["rl_ver"] += 1
        editor_key, edits = f"rl_editor_{S['rl_ver']}", None
        st.error(f"{t('error_prefix')} {t('err_table_state')}")
    edits = edits or {}
    source = S.get("rl_source", ("preset", "textbook"))
    edited_mark = " " + t("rl_source_edited") if edits.get("edited_rows") else ""
    if source[0] == "preset":
        st.info(t("rl_source_preset", name=t(f"rl_preset_{source[1]}")) + edited_mark)
    else:
        _, r, k, tok, n_named, a_full, greedy = source
        st.info(
            t("rl_step_source", r=r, k=k, tok=token_in_sentence(tok), n=n_named, a_full=a_full)
            + edited_mark
        )
        if greedy:
            st.caption(t("rl_step_greedy"))

    left, right = st.columns([3, 2])
    with left:
        st.number_input(
            t("rl_n_tokens"),
            MIN_TOKENS,
            MAX_TOKENS,
            key="rl_ntok",
            on_change=LV.resize,
            help=t("rl_n_tokens_help"),
        )
        st.caption(t("rl_edit_help"))
        edited = st.data_editor(
            S["rl_base"],
            key=editor_key,
            num_rows="fixed",
            hide_index=True,
            width="stretch",
            column_config={
                "name": st.column_config.TextColumn(t("rl_col_name"), max_chars=SHORT_CHARS),
                "p": st.column_config.NumberColumn(t("rl_col_p_weight"), min_value=0.0, format=NUM),
                "q": st.column_config.NumberColumn(t("rl_col_q_weight"), min_value=0.0, format=NUM),
            },
        )
        S["rl_current"] = edited
    try:
        p = normalise(LV.weights(edited["p"].tolist(), "p"), "p")
        q = normalise(LV.weights(edited["q"].tolist(), "q"), "q")
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        show_error(exc)
        st.stop()
    names = LV.unique_names(edited["name"].tolist())
    with right:
        st.markdown(f"**{t('rl_normalised')}**")
        LV.table(
            "rl_norm_table",
            {
                "token": (names, t("rl_col_name")),
                "p": (p, LV.number(t("rl_lab_p"))),
                "q": (q, LV.number(t("rl_lab_q"))),
            },
        )
    return names, p, q, source
