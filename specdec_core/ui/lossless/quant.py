"""The lossless page's section 3: a weight-quantized copy of the target (int8 / int4).
Speculative decoding with it equals its own greedy output and matches its own distribution
(χ² at T = 1), while its distance to the float32 target and the draft's acceptance against
each are measured. Widgets and rendering only: every number comes from
:mod:`specdec_core.bench.lossless` and :mod:`specdec_core.core.quant`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.lossless import (
    MAX_PROMPTS,
    first_tokens_test,
    held_out_prompts,
    quant_figures,
    spec_matches_own_greedy,
)
from specdec_core.core.inputs import SessionConfig, whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import quantized_pair
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import runs as RU

S = st.session_state
SLOT = "ll_res_quant"
KINDS = ("int8", "int4")
MAX_UI_PROMPTS = 100
MAX_UI_CHI_SEEDS = 500
TOKENS = 16


def show_quant(pair: ModelPair, config: SessionConfig, prompt: str) -> None:
    """Section 3: both quantized targets against the float32 one, and against themselves."""
    st.header(t("ll_sec_quant"))
    st.markdown(t("ll_quant_help"))
    c1, c2, c3 = st.columns([1, 1, 1.2], vertical_alignment="bottom")
    n_prompts = c1.number_input(
        t("ll_q_prompts"), 5, MAX_UI_PROMPTS, 20, 5, key="ll_q_prompts", help=t("ll_q_prompts_help")
    )
    n_seeds = c2.number_input(
        t("ll_q_seeds"), 0, MAX_UI_CHI_SEEDS, 100, 50, key="ll_q_seeds", help=t("ll_q_seeds_help")
    )
    if c3.button(t("ll_run_quant"), key="ll_run_quant", type="primary", width="stretch"):
        try:
            n_prompts = whole_number(n_prompts, 5, MAX_UI_PROMPTS, t("ll_q_prompts"))
            n_seeds = whole_number(n_seeds, 0, MAX_UI_CHI_SEEDS, t("ll_q_seeds"))
            prompts = held_out_prompts(min(MAX_PROMPTS, n_prompts))
            key = ("quant", pair.name, n_prompts, n_seeds, prompt, config.gamma)
            steps = []
            for kind in KINDS:
                steps.append(
                    (
                        t("ll_step_quant", kind=kind, n=n_prompts),
                        lambda kind=kind: quant_figures(pair, kind, prompts, TOKENS),
                    )
                )
                steps.append(
                    (
                        t("ll_step_own", kind=kind, n=n_prompts),
                        lambda kind=kind: spec_matches_own_greedy(
                            pair, kind, prompts, TOKENS, config.gamma
                        ),
                    )
                )
                if n_seeds:
                    steps.append(
                        (
                            t("ll_step_chi", kind=kind, n=n_seeds),
                            lambda kind=kind: first_tokens_test(
                                quantized_pair(pair, kind), prompt, n_seeds, 1, config.gamma
                            ),
                        )
                    )
            RU.run_steps(SLOT, key, steps)
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            S[SLOT + "_error"] = error_message(exc)
    RU.show_error(SLOT)
    if SLOT not in S:
        st.caption(t("ll_press_run"))
        return
    key, out = S[SLOT]
    _, _, n_prompts, n_seeds, shown_prompt, _ = key
    per_kind = 3 if n_seeds else 2
    rows = [out[i * per_kind : (i + 1) * per_kind] for i in range(len(KINDS))]
    figs = [r[0] for r in rows]
    own = [r[1] for r in rows]
    chi = [r[2] if n_seeds else None for r in rows]
    LV.table(
        "ll_quant_table",
        {
            "kind": (list(KINDS), t("ll_col_kind")),
            "weight_error": ([f.weight_error for f in figs], LV.number(t("ll_col_werr"), "%.4f")),
            "tv_first": ([f.tv_first_mean for f in figs], LV.number(t("ll_col_tv_first"), "%.4f")),
            "divergence": (
                [f.greedy_divergence for f in figs],
                LV.number(t("ll_col_divergence"), "%.2f"),
            ),
            "acc_f32": (
                [f.acceptance_float32 for f in figs],
                LV.number(t("ll_col_acc_f32"), "%.4f"),
            ),
            "acc_own": ([f.acceptance_quant for f in figs], LV.number(t("ll_col_acc_own"), "%.4f")),
        },
    )
    st.caption(t("ll_quant_table_note", n=n_prompts, tokens=TOKENS))
    LV.table(
        "ll_quant_own_table",
        {
            "kind": (list(KINDS), t("ll_col_kind")),
            "greedy_equal": ([f"{a} / {b}" for a, b in own], t("ll_col_greedy_equal")),
            "chi_p": (
                [c.p_value if c else None for c in chi],
                LV.number(t("ll_col_chi_p"), "%.3g"),
            ),
            "tv": ([c.tv if c else None for c in chi], LV.number(t("ll_col_tv_own"), "%.4f")),
        },
    )
    if n_seeds:
        st.caption(t("ll_quant_chi_note", n=n_seeds, prompt=plain(RU.prompt_label(shown_prompt))))
    all_equal = all(a == b for a, b in own)
    (st.success if all_equal else st.warning)(
        t("ll_quant_verdict" if all_equal else "ll_quant_verdict_odd")
    )
