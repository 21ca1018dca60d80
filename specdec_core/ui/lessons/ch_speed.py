"""Chapter 5: speed and sources — a higher acceptance rate is not always faster (a small
measured run), where drafts come from, and what to measure when evaluating a system."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specdec_core.costmodel import walltime_improvement
from specdec_core.drafters import ModelDrafter
from specdec_core.generate import generate
from specdec_core.lesson_link import LessonState
from specdec_core.models import ModelPair
from specdec_core.scenarios import PROMPTS

from ..i18n import t
from .checkpoint import Check, ask

CHECKS = ("c5_faster", "c5_source", "c5_eval")
TOKENS, GAMMA = 32, 4
RUN = "ls_c5_run"
ACCEPT_LEN, ROUND_COST = 3.2, 2.5  # the evaluation question's numbers
SOURCES = ("model", "lookup", "early_exit", "feature_head", "tree")
METRICS = ("accept_len", "forwards", "ttft", "ms_token", "tok_s", "equality", "batch")


def measure(pair: ModelPair) -> list[dict]:
    """Target alone, the pair's draft model and the target as its own draft (α = 1),
    greedy, 32 tokens each (fast path; a warm-up run first). One row per run."""
    config = LessonState(pair=pair.name, gamma=GAMMA, max_new_tokens=TOKENS).config()
    generate(pair, PROMPTS[0], LessonState(max_new_tokens=4).config(), mode="autoregressive")
    n_target = pair.target.config.n_layer
    runs = (
        ("alone", "autoregressive", None, 0.0),
        ("model", "speculative", ModelDrafter(pair.draft), pair.draft.config.n_layer / n_target),
        ("self", "speculative", ModelDrafter(pair.target), 1.0),
    )
    rows = []
    for name, mode, drafter, c in runs:
        s = generate(pair, PROMPTS[0], config, mode=mode, drafter=drafter).stats  # type: ignore[arg-type]
        alpha = s.acceptance_rate if mode == "speculative" else None
        rows.append({
            "name": name, "alpha": alpha, "forwards": s.target_forwards,
            "ms_token": s.total_ms / max(1, s.new_tokens),
            "predicted": 1.0 if alpha is None else walltime_improvement(alpha, GAMMA, c),
        })  # fmt: skip
    return rows


def _faster(pair: ModelPair) -> None:
    st.subheader(t("ls_c5_faster_title"))
    if not ask(Check("c5_faster", "choice", t("ls_c5_faster_q"), "no", t("ls_c5_faster_why"),
                     options=("yes", "no"), label=lambda s: t("ls_c5_" + str(s)))):  # fmt: skip
        return
    again = st.button(t("ls_c5_measure"), key="ls_c5_measure")
    if again or RUN not in st.session_state:  # measured once at the reveal, on request again
        st.session_state[RUN] = measure(pair)
    rows = st.session_state[RUN]
    st.caption(t("ls_c5_measure_hint", n=TOKENS, gamma=GAMMA))
    st.dataframe(pd.DataFrame({
        t("ls_c5_col_run"): [t("ls_c5_run_" + r["name"]) for r in rows],
        "α": ["—" if r["alpha"] is None else f"{r['alpha']:.2f}" for r in rows],
        t("ls_c5_col_forwards"): [r["forwards"] for r in rows],
        "ms/token": [f"{r['ms_token']:.2f}" for r in rows],
        t("ls_c5_col_predicted"): [f"{r['predicted']:.2f}×" for r in rows],
    }), hide_index=True)  # fmt: skip
    alone = rows[0]["ms_token"]
    best = max(rows[1:], key=lambda r: r["alpha"] or 0.0)
    st.markdown(t("ls_c5_measured", alpha=f"{best['alpha']:.2f}", ms=f"{best['ms_token']:.2f}",
                  alone=f"{alone:.2f}", x=f"{best['predicted']:.2f}"))  # fmt: skip


def _sources() -> None:
    st.subheader(t("ls_c5_sources_title"))
    if ask(Check("c5_source", "choice", t("ls_c5_source_q"), "lookup", t("ls_c5_source_why"),
                 options=SOURCES[:3], label=lambda s: t("ls_c5_src_" + str(s)))):  # fmt: skip
        st.dataframe(pd.DataFrame({
            t("ls_c5_col_source"): [t("ls_c5_src_" + s) for s in SOURCES],
            t("ls_c5_col_how"): [t("ls_c5_how_" + s) for s in SOURCES],
            t("ls_c5_col_here"): [t("ls_c5_here_" + s) for s in SOURCES],
        }), hide_index=True)  # fmt: skip


def _evaluate() -> None:
    st.subheader(t("ls_c5_eval_title"))
    answer = round(ACCEPT_LEN / ROUND_COST, 2)
    if ask(Check("c5_eval", "number", t("ls_c5_eval_q", n=ACCEPT_LEN, c=ROUND_COST), answer,
                 t("ls_c5_eval_why", n=ACCEPT_LEN, c=ROUND_COST, x=f"{answer:g}"),
                 tol=0.05, unit="×")):  # fmt: skip
        st.markdown(t("ls_c5_eval_reveal"))
        st.dataframe(pd.DataFrame({
            t("ls_c5_col_metric"): [t("ls_c5_m_" + m) for m in METRICS],
            t("ls_c5_col_tells"): [t("ls_c5_t_" + m) for m in METRICS],
        }), hide_index=True)  # fmt: skip


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c5_intro"))
    _faster(pair)
    _sources()
    _evaluate()
