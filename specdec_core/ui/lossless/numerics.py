"""The lossless page's section 2: the verification forward's logits against one-token
decode steps in float32 and lower precisions, and the bounded search for a near-tie where
greedy speculative decoding and the greedy target alone part ways in bfloat16. Widgets and
rendering only: every number comes from :mod:`specdec_core.bench.numerics`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.numerics import (
    MAX_SEARCH_PROMPTS,
    NEAR_TIE,
    find_flip,
    verify_vs_decode,
)
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import DTYPES, dtype_supported
from specdec_core.core.settings import SessionConfig
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.figures.lossless import logit_gap_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import runs as RU

S = st.session_state
SLOT, FLIP = "ll_res_num", "ll_res_flip"
DTYPE_COLORS = {"float32": "#1f77b4", "bfloat16": "#d62728", "float16": "#ff7f0e"}
SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
SEARCH_TOKENS = 16
SEARCH_DTYPE = "bfloat16"


def dtypes_here(pair: ModelPair) -> list[str]:
    """The precisions this device runs (float32 always; bfloat16 / float16 where the probe
    of ``core/quant.dtype_supported`` passes)."""
    return [name for name, dt in DTYPES.items() if dtype_supported(dt, pair.device)]


def show_numerics(pair: ModelPair, config: SessionConfig, prompt: str) -> None:
    """Section 2: max |Δlogit| per position, top-2 margins, flips; then the bf16 flip case."""
    st.header(t("ll_sec_numerics"))
    st.markdown(t("ll_numerics_help"))
    names = dtypes_here(pair)
    if "float16" not in names:
        st.caption(t("ll_no_float16", device=pair.device))
    c1, c2 = st.columns([3, 1.2], vertical_alignment="bottom")
    c1.caption(t("ll_numerics_settings", gamma=config.gamma, dtypes=", ".join(names)))
    if c2.button(t("ll_run_numerics"), key="ll_run_numerics", type="primary", width="stretch"):
        key = ("num", pair.name, prompt, config.gamma, tuple(names))
        steps = [
            (name, lambda name=name: verify_vs_decode(pair, prompt, name, config.gamma))
            for name in names
        ]
        RU.run_steps(SLOT, key, steps)
    RU.show_error(SLOT)
    if SLOT in S:
        _show_reports(pair, S[SLOT][1])
    else:
        st.caption(t("ll_press_run"))
    _show_search(pair, config)
    st.markdown(t("ll_numerics_levels"))


def flips_cell(dtypes: list[str]) -> str:
    """A row's "flips" cell: how many dtypes flipped the argmax there, and which ("0" when
    none: a blank cell read as "not measured")."""
    return f"{len(dtypes)} ({', '.join(dtypes)})" if dtypes else "0"


def _show_reports(pair: ModelPair, reports) -> None:
    text = RU.token_text(pair)
    base = reports[0]  # float32
    positions = [p.index for p in base.positions]
    series = {r.dtype: [p.max_abs_delta for p in r.positions] for r in reports}
    margins = [p.margin_decode for p in base.positions]
    labels = {
        "position": t("ll_col_row"),
        "logit": t("ll_fig_gap_y"),
        "margin": t("ll_margin"),
        "zero": t("ll_fig_gap_zero"),
    }
    st.plotly_chart(
        LV.figure(
            logit_gap_figure, positions, series, margins, DTYPE_COLORS, labels, t("ll_fig_gap")
        ),
        key="ll_fig_gap",
    )
    fed = [text(base.prompt_ids[-1]), *(text(x) for x in base.draft_ids)]
    columns: dict[str, tuple[object, object]] = {
        "row": (positions, t("ll_col_row")),
        "after": (fed, t("ll_col_after")),
        "margin": (margins, LV.number(t("ll_col_margin"), "%.4f")),
    }
    for r in reports:
        columns[f"delta_{r.dtype}"] = (
            [p.max_abs_delta for p in r.positions],
            LV.number(f"|Δ| {SHORT[r.dtype]}", "%.1e"),
        )
    columns["flips"] = (
        [
            flips_cell([SHORT[r.dtype] for r in reports if r.positions[i].flip])
            for i in range(len(positions))
        ],
        t("ll_col_flips"),
    )
    LV.table("ll_numerics_table", columns)
    st.caption(
        " · ".join(
            t("ll_max_delta", dtype=r.dtype, value=f"{r.max_abs_delta:.2e}", flips=len(r.flips))
            for r in reports
        )
    )


def _show_search(pair: ModelPair, config: SessionConfig) -> None:
    """The bounded, seeded search for a bf16 divergence, and the case it found."""
    st.subheader(t("ll_sub_flip"))
    st.markdown(t("ll_flip_help", near=NEAR_TIE))
    if SEARCH_DTYPE not in dtypes_here(pair):
        st.warning(t("err_dtype_unsupported", dtype=SEARCH_DTYPE, device=pair.device))
        return
    c1, c2, c3 = st.columns([1, 1, 1.2], vertical_alignment="bottom")
    seed = c1.number_input(t("ll_search_seed"), 0, 10_000, 0, key="ll_search_seed")
    limit = c2.number_input(
        t("ll_search_max"),
        1,
        MAX_SEARCH_PROMPTS,
        40,
        key="ll_search_max",
        help=t("ll_search_max_help"),
    )
    if c3.button(t("ll_run_flip"), key="ll_run_flip", type="primary", width="stretch"):
        try:
            limit = whole_number(limit, 1, MAX_SEARCH_PROMPTS, t("ll_search_max"))
            key = ("flip", pair.name, int(seed), limit, config.gamma)
            call = lambda: find_flip(  # noqa: E731 - one step of run_steps
                pair,
                held_out_prompts(MAX_SEARCH_PROMPTS, pair.name),
                SEARCH_DTYPE,
                int(seed),
                limit,
                SEARCH_TOKENS,
                config.gamma,
            )
            RU.run_steps(FLIP, key, [(t("ll_step_search", n=limit), call)])
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            S[FLIP + "_error"] = error_message(exc)
    RU.show_error(FLIP)
    if FLIP not in S:
        st.caption(t("ll_press_run"))
        return
    search = S[FLIP][1][0]
    st.caption(
        t(
            "ll_search_stats",
            tried=search.tried,
            positions=search.positions,
            near=search.near_ties,
            smallest=f"{search.smallest_margin:.4f}",
        )
    )
    case = search.case
    if case is None:
        st.info(t("ll_no_flip"))
        return
    text = RU.token_text(pair)
    a, s = text(case.alone_token), text(case.spec_token)
    st.markdown(
        t(
            "ll_flip_case",
            prompt=plain(RU.prompt_label(case.prompt)),
            pos=case.position + 1,
            a=plain(a),
            s=plain(s),
            round=case.round_index + 1,
        )
    )
    LV.table(
        "ll_flip_table",
        {
            "where": (
                [
                    t("ll_flip_decode", dtype=case.dtype),
                    t("ll_flip_verify", dtype=case.dtype),
                    t("ll_flip_f32"),
                ],
                t("ll_col_where"),
            ),
            "alone": (
                [case.decode_logits[0], case.verify_logits[0], case.float32_logits[0]],
                LV.number(t("ll_col_logit_of", tok=a), "%.4f"),
            ),
            "spec": (
                [case.decode_logits[1], case.verify_logits[1], case.float32_logits[1]],
                LV.number(t("ll_col_logit_of", tok=s), "%.4f"),
            ),
        },
    )
    decode = pair.tokenizer.decode
    st.html(
        RU.texts_html(
            decode(list(case.alone_ids)),
            decode(list(case.spec_ids)),
            (
                t("ll_label_alone_dtype", dtype=case.dtype),
                t("ll_label_spec_dtype", dtype=case.dtype),
            ),
        )
    )
    (st.success if case.float32_agree else st.warning)(
        t("ll_f32_agree" if case.float32_agree else "ll_f32_differ")
    )
