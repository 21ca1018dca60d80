"""The speed page's device story: on a GPU (the pair on CUDA) the regime is not the CPU's
and not the textbook's, so the page says why before anything is measured; on a CPU the
same story sits folded under "On a GPU", with the reference device's measured figures
(``rules.costmodel.REFERENCE_DEVICES``) in both."""

from __future__ import annotations

import streamlit as st

from specdec_core.rules.costmodel import REFERENCE_DEVICES, ReferenceDevice
from specdec_core.ui.i18n import t
from specdec_core.ui.render import html_table


def regime_text(ref: ReferenceDevice) -> str:
    """The GPU regime explained with ``ref``'s figures (markdown, current language)."""
    speed = dict(ref.speedup)
    return t(
        "sp_gpu_regime",
        device=ref.device,
        tps=ref.target_tokens_per_s,
        t1=ref.target_step_ms,
        dstep=ref.draft_step_ms,
        c=ref.c,
        lo=ref.verify_ratio[0],
        hi=ref.verify_ratio[1],
        model=speed["model"],
        ngram=speed["ngram"],
        block=speed["block"],
        eagle=speed["eagle"],
        mtp=speed["mtp"],
    )


def reference_table(ref: ReferenceDevice) -> dict[str, list[str]]:
    """One row per draft source: its measured speed-up over the target alone on ``ref``
    (header → cells)."""
    return {
        t("sp_ref_col_source"): [t(f"sp_ref_src_{name}") for name, _ in ref.speedup],
        t("sp_ref_col_speedup"): [f"{x:.2f}×" for _, x in ref.speedup],
    }


def show_device_regime(device: str) -> None:
    """On CUDA (``device`` starts with ``cuda``): the GPU regime in a box, with the
    reference table; elsewhere the same under a folded "On a GPU" expander."""
    ref = REFERENCE_DEVICES[0]
    on_gpu = device.startswith("cuda")
    box = st.container(border=True) if on_gpu else st.expander(t("sp_gpu_expander"))
    with box:
        if on_gpu:
            st.subheader(t("sp_gpu_header"))
        st.markdown(regime_text(ref))
        st.html(html_table(reference_table(ref), name="sp-ref heads-wrap"))  # fits a phone
        st.caption(
            t(
                "sp_ref_caption",
                device=ref.device,
                software=ref.software,
                tps=ref.target_tokens_per_s,
            )
        )
