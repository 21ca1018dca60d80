"""The lossless page's section 3: a weight-quantized copy of the target (int8 / int4).
Speculative decoding with it equals its own greedy output and matches its own distribution
(χ² at T = 1), while its distance to the float32 target and the draft's acceptance against
each are measured. Widgets and rendering only: every number comes from
:mod:`specdec_core.bench.quantized` and :mod:`specdec_core.core.quant`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.lossless import MAX_PROMPTS, held_out_prompts
from specdec_core.bench.quantized import quant_figures, spec_matches_own_greedy
from specdec_core.bench.same_seed import first_tokens_test
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import quantized_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.i18n import t
from specdec_core.ui.lossless import readings as RD
from specdec_core.ui.lossless import runs as RU

S = st.session_state
SLOT = "ll_res_quant"
KINDS = ("int8", "int4")
MAX_UI_PROMPTS = 100
MAX_UI_CHI_SEEDS = 500
TOKENS = 16


def show_quant(pair: ModelPair, config: SessionConfig, prompt: str) -> None:
    """Section 3: a quantized target against the float32 one, and against itself (one
    kind per run; the table keeps a row per kind run)."""
    st.header(t("ll_sec_quant"))
    st.markdown(t("ll_quant_help"))
    c0, c1, c2, c3 = st.columns([0.8, 1, 1, 1.2], vertical_alignment="bottom")
    kind = c0.radio(t("ll_q_kind"), KINDS, key="ll_q_kind", horizontal=True)
    n_prompts = c1.number_input(
        t("ll_q_prompts"), 5, MAX_UI_PROMPTS, 20, 5, key="ll_q_prompts", help=t("ll_q_prompts_help")
    )
    n_seeds = c2.number_input(
        t("ll_q_seeds"), 0, MAX_UI_CHI_SEEDS, 100, 50, key="ll_q_seeds", help=t("ll_q_seeds_help")
    )
    if c3.button(t("ll_run_quant"), key="ll_run_quant", type="primary", width="stretch"):
        try:
            if kind not in KINDS:  # a crafted state
                quantized_pair(pair, str(kind))  # raises the translated quant_unknown
            n_prompts = whole_number(n_prompts, 5, MAX_UI_PROMPTS, t("ll_q_prompts"))
            n_seeds = whole_number(n_seeds, 0, MAX_UI_CHI_SEEDS, t("ll_q_seeds"))
            prompts = held_out_prompts(min(MAX_PROMPTS, n_prompts), pair.name)
            key = ("quant", pair.name, kind, n_prompts, n_seeds, prompt, config.gamma)
            steps = [
                (
                    t("ll_step_quant", kind=kind, n=n_prompts),
                    lambda: quant_figures(pair, kind, prompts, TOKENS),
                ),
                (
                    t("ll_step_own", kind=kind, n=n_prompts),
                    lambda: spec_matches_own_greedy(pair, kind, prompts, TOKENS, config.gamma),
                ),
            ]
            if n_seeds:
                steps.append(
                    (
                        t("ll_step_chi", kind=kind, n=n_seeds),
                        lambda: first_tokens_test(
                            quantized_pair(pair, kind), prompt, n_seeds, 1, config.gamma
                        ),
                    )
                )
            RU.run_steps(f"{SLOT}_{kind}", key, steps)
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            S[f"{SLOT}_{KINDS[0]}_error"] = error_message(exc)
    for k in KINDS:
        RU.show_error(f"{SLOT}_{k}")
    done = [S[f"{SLOT}_{k}"] for k in KINDS if f"{SLOT}_{k}" in S]
    if not done:
        st.caption(t("ll_press_run"))
        return
    _show_table(done)


def _show_table(done: list) -> None:
    """One column per quantization run (measures as rows, so the table stays narrow):
    distance to float32, the draft's acceptance, and the target against itself."""
    keys = [key for key, _ in done]
    figs = [out[0] for _, out in done]
    own = [out[1] for _, out in done]
    chi = [out[2] if len(out) > 2 else None for _, out in done]

    def fmt(values, spec: str) -> list[str]:
        return ["—" if v is None else format(v, spec) for v in values]

    rows = {
        "ll_col_werr": fmt([f.weight_error for f in figs], ".4f"),
        "ll_col_tv_first": fmt([f.tv_first_mean for f in figs], ".4f"),
        "ll_col_divergence": fmt([f.greedy_divergence for f in figs], ".0%"),
        "ll_col_acc_f32": fmt([f.acceptance_float32 for f in figs], ".4f"),
        "ll_col_acc_own": fmt([f.acceptance_quant for f in figs], ".4f"),
        "ll_col_greedy_equal": [f"{a} / {b}" for a, b in own],
        "ll_col_chi_p": fmt([c.p_value if c else None for c in chi], ".3g"),
        "ll_col_tv_own": fmt([c.tv if c else None for c in chi], ".4f"),
        "ll_col_null_own": [
            "—" if c is None else f"{c.null_quantiles[0]:.4f} – {c.null_quantiles[2]:.4f}"
            for c in chi
        ],
    }
    RU.table(
        "ll_quant_table",
        {
            "measure": ([t(k) for k in rows], t("ll_col_measure")),
            **{
                f.kind: (
                    [v[i] for v in rows.values()],
                    t("ll_col_kind_run", kind=f.kind, n=f.prompts, seeds=keys[i][4]),
                )
                for i, f in enumerate(figs)
            },
        },
    )
    st.caption(t("ll_quant_table_note", tokens=TOKENS))
    prompts = {key[5] for key, c in zip(keys, chi, strict=True) if c is not None}
    for shown in prompts:
        st.caption(t("ll_quant_chi_note", prompt=plain(RU.prompt_label(shown))))
    _explain_equal_rows(keys, figs, chi)
    all_equal = all(a == b for a, b in own)
    (st.success if all_equal else st.warning)(
        t("ll_quant_verdict" if all_equal else "ll_quant_verdict_odd")
    )


def _explain_equal_rows(keys: list, figs: list, chi: list) -> None:
    """When χ² rows (and section ①'s float32 run on the same prompt) drew the same first
    tokens, say so and why (:func:`readings.chi_agreement`)."""
    rows = []
    seed_run = S.get("ll_res_seed")
    shown = {key[5] for key, c in zip(keys, chi, strict=True) if c is not None}
    if seed_run is not None and seed_run[0][2] in shown:
        rows.append((t("ll_chi_row_f32"), seed_run[1][1]))
    rows += [(f.kind, c) for f, c in zip(figs, chi, strict=True) if c is not None]
    tvs = {f.kind: f.tv_first_mean for f, c in zip(figs, chi, strict=True) if c is not None}
    text = RD.chi_agreement(rows, tvs)
    if text:
        st.info(text)
