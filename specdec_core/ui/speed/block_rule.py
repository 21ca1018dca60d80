"""The speed page's note on the verification rule: token-wise against block verification
(Sun et al. 2025), tokens per round and ms per token per chain drafter at T = 0.7 and
T = 1, as measured by ``benchmarks/block_verification.py`` on held-out prompts (the file
``assets/measured/block_verification.json`` is that script's ``--json`` output, with the
machine's load). Drawing only."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import streamlit as st

from specdec_core.ui.i18n import t
from specdec_core.ui.option_labels import option_label
from specdec_core.ui.render import html_table

MEASURED = Path(__file__).resolve().parents[3] / "assets" / "measured" / "block_verification.json"


@cache
def measured() -> dict | None:
    """The benchmark's JSON (read once per process), ``None`` when it is missing."""
    try:
        return json.loads(MEASURED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def show_block_rule() -> None:
    """An expander: what block verification changes, and the measured table."""
    data = measured()
    with st.expander(t("sp_bv_title")):
        st.markdown(t("sp_bv_help"))
        if data is None:
            return
        rows = data["rows"]
        columns = {
            t("sp_bv_col_drafter"): [option_label("drafter", r["drafter"]) for r in rows],
            "T": [r["temperature"] for r in rows],
            t("sp_bv_col_tpr_token"): [f"{r['token_tokens_per_round']:.2f}" for r in rows],
            t("sp_bv_col_tpr_block"): [f"{r['block_tokens_per_round']:.2f}" for r in rows],
            t("sp_bv_col_gain"): [
                f"{r['block_tokens_per_round'] / r['token_tokens_per_round'] - 1:+.1%}"
                for r in rows
            ],
            t("sp_bv_col_ms_token"): [f"{r['token_ms_per_token']:.1f}" for r in rows],
            t("sp_bv_col_ms_block"): [f"{r['block_ms_per_token']:.1f}" for r in rows],
        }
        st.html(html_table(columns, name="sp-bv heads-wrap"))  # headers wrap: fits 1024 px
        st.caption(
            t(
                "sp_bv_how",
                prompts=data["prompts"],
                seeds=data["seeds"],
                tokens=data["max_new_tokens"],
                gamma=data["gamma"],
                before=f"{data['load_before']:.1f}",
                after=f"{data['load_after']:.1f}",
            )
        )
