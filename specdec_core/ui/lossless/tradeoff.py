"""The lossless page's section 4b: the lossy rules on the pair, speed gained against TV
lost over δ. Widgets and rendering only: every number comes from
:func:`specdec_core.bench.lossy_tradeoff.lossy_tradeoff`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.lossy_tradeoff import lossy_tradeoff
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.rules.lab.lossy import LossyRules
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.lossless import tradeoff_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import runs as RU

S = st.session_state
SLOT = "ll_res_trade"
#: δ per rule on the pair. Typical: the bar δ·exp(−H) is small on 4,096-token rows.
#: Threshold: at T = 1 most drafted tokens have p(y) of a few thousandths (the rows are
#: flat), so a bar of 0.02 already rejects most of what the exact rule accepts; δ = 0
#: accepts every token p allows (the output is q).
DELTAS = {"typical": (0.05, 0.1, 0.3, 1.0), "threshold": (0.0, 0.001, 0.005, 0.02)}
MAX_UI_PROMPTS = 12
MAX_UI_SEEDS = 5
TOKENS = 32


def show_tradeoff(pair: ModelPair, config: SessionConfig, knobs: LossyRules) -> None:
    """Section 4b: each lossy rule over δ on the pair, against the exact rule."""
    st.subheader(t("ll_sub_pair"))
    st.markdown(t("ll_trade_help", eps=f"{knobs.epsilon:g}", k=knobs.top_k))
    c1, c2, c3 = st.columns([1, 1, 1.2], vertical_alignment="bottom")
    n_prompts = c1.number_input(t("ll_t_prompts"), 1, MAX_UI_PROMPTS, 3, key="ll_t_prompts")
    n_seeds = c2.number_input(t("ll_t_seeds"), 1, MAX_UI_SEEDS, 1, key="ll_t_seeds")
    if c3.button(t("ll_run_trade"), key="ll_run_trade", type="primary", width="stretch"):
        try:
            n_prompts = whole_number(n_prompts, 1, MAX_UI_PROMPTS, t("ll_t_prompts"))
            n_seeds = whole_number(n_seeds, 1, MAX_UI_SEEDS, t("ll_t_seeds"))
            prompts = held_out_prompts(n_prompts, pair.name)
            key = ("trade", pair.name, n_prompts, n_seeds, config.gamma, knobs)
            steps = [
                (
                    t("ll_step_trade", rule=t(f"ll_rule_{rule}"), n=len(deltas) + 1),
                    lambda rule=rule, deltas=deltas: lossy_tradeoff(
                        pair,
                        rule,
                        deltas,
                        prompts,
                        n_seeds,
                        TOKENS,
                        config.gamma,
                        1.0,
                        knobs.epsilon,
                        knobs.top_k,
                    ),
                )
                for rule, deltas in DELTAS.items()
            ]
            RU.run_steps(SLOT, key, steps)
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            S[SLOT + "_error"] = error_message(exc)
    RU.show_error(SLOT)
    if SLOT not in S:
        st.caption(t("ll_press_run"))
        return
    key, out = S[SLOT]
    _, _, n_prompts, n_seeds, gamma, shown = key
    points = [pt for run in out for pt in run]
    labels = {
        "tv": t("ll_fig_trade_x"),
        "speed": t("ll_fig_trade_y"),
        "exact": t("ll_rule_exact"),
        **{r: t(f"ll_rule_{r}") for r in DELTAS},
    }
    # speed as tokens per round against the exact rule's (deterministic for the seeds; the
    # wall-clock speed-up of a shared server is in the table)
    series = {
        run[1].rule: [
            (p.delta, p.tv_first_mean, p.tokens_per_round / run[0].tokens_per_round)
            for p in run[1:]
        ]
        for run in out
    }
    st.plotly_chart(
        LV.figure(tradeoff_figure, series, labels, t("ll_fig_trade")), key="ll_fig_trade"
    )
    RU.table(
        "ll_trade_table",
        {
            "rule": ([t(f"ll_short_{p.rule}") for p in points], t("rl_col_rule")),
            "delta": (["—" if p.delta is None else f"{p.delta:g}" for p in points], "δ"),
            "acceptance": (
                [p.acceptance_rate for p in points],
                LV.number(t("ll_col_alpha"), "%.3f"),
            ),
            "tokens": ([p.tokens_per_round for p in points], LV.number(t("ll_col_tpr"), "%.2f")),
            "ms": ([p.ms_per_token for p in points], LV.number(t("ll_col_ms"), "%.1f")),
            "speedup": ([p.speedup for p in points], LV.number(t("ll_col_speedup"), "×%.2f")),
            "tv": ([p.tv_first_mean for p in points], LV.number(t("ll_col_tv_first_p"), "%.4f")),
        },
    )
    st.markdown(t("ll_trade_read"))
    st.caption(
        t(
            "ll_trade_note",
            prompts=n_prompts,
            seeds=n_seeds,
            tokens=TOKENS,
            gamma=gamma,
            eps=f"{shown.epsilon:g}",
            k=shown.top_k,
        )
    )
