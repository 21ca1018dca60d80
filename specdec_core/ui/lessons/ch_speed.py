"""Chapter 5: speed and sources — a higher acceptance rate is not always faster (a small
measured run), where drafts come from, and what to measure when evaluating a system.

The measured run (:mod:`specdec_core.bench.lesson_speed`: a warm-up, interleaved repeats,
one measured target step behind every ``c``, "too busy" instead of a conclusion) is a job
on the server's measurement queue (``ui/background``): it starts at the first reveal,
runs off the page's thread under a time budget with its progress shown, and its result is
kept in the session; the chapter's other questions work meanwhile, and Cancel says so."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specdec_core.bench.lesson_speed import GAMMA, TOKENS, SpeedRun
from specdec_core.core.models import ModelPair
from specdec_core.server import tasks as T
from specdec_core.ui import background
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import Check, ask, choice
from specdec_core.ui.speed.view import busy_message, how_label, spread_text

CHECKS = ("c5_faster", "c5_source", "c5_eval")
RUN = "ls_c5_run"  # the SpeedRun kept in the session; its job: ls_c5_run_job
ASKED = "ls_c5_started"  # the reveal has started one measurement (not again by itself)
ACCEPT_LEN, ROUND_COST = 3.2, 2.5  # the evaluation question's numbers
SOURCES = ("model", "lookup", "early_exit", "feature_head", "tree")
METRICS = ("accept_len", "forwards", "ttft", "ms_token", "tok_s", "equality", "batch")


def _measure(pair: ModelPair) -> None:
    background.submit(RUN, lambda owner: T.lesson_job(owner, pair))


def _measurement(pair: ModelPair) -> SpeedRun | None:
    """The kept result (a finished job's taken first); the first reveal queues one; the
    button measures again; progress, Cancel and messages while it runs."""
    S = st.session_state
    job = background.take(RUN)
    if job is not None:
        S[RUN] = job.result
    run = S.get(RUN)
    if not isinstance(run, SpeedRun):
        S.pop(RUN, None)
        run = None
    if run is None and not S.get(ASKED) and not background.running(RUN):
        S[ASKED] = True
        _measure(pair)
    st.button(
        t("ls_c5_measure"),
        key="ls_c5_measure",
        on_click=_measure,
        args=(pair,),
        disabled=background.running(RUN),
    )
    if background.running(RUN):
        st.caption(t("ls_c5_meanwhile"))
    background.show(RUN, t("ls_c5_running"))
    return run


def _faster(pair: ModelPair) -> None:
    st.subheader(t("ls_c5_faster_title"))
    question, why = t("ls_c5_faster_q"), t("ls_c5_faster_why")
    if not ask(choice("c5_faster", question, "no", why, ("yes", "no"), "ls_c5_")):
        return
    run = _measurement(pair)
    if run is None:
        return
    rows = run.rows
    st.caption(
        t("ls_c5_measure_hint", n=TOKENS, gamma=GAMMA, r=run.how.repeats, t=run.target_step_ms)
        + " "
        + how_label(run.how)
    )
    if run.partial:
        st.warning(
            t(
                "ls_c5_partial",
                budget=f"{run.budget_s or 0:.0f}",
                r=run.how.repeats,
                planned=run.planned,
            )
        )
    st.dataframe(
        pd.DataFrame(
            {
                t("ls_c5_col_run"): [t("ls_c5_run_" + r["name"]) for r in rows],
                "α": ["—" if r["alpha"] is None else f"{r['alpha']:.2f}" for r in rows],
                t("ls_c5_col_forwards"): [r["forwards"] for r in rows],
                t("ls_c5_col_ms"): [spread_text(r["spread"]) for r in rows],
                "c": ["—" if r["c"] is None else f"{r['c']:.2f}" for r in rows],
                t("ls_c5_col_predicted"): [f"{r['predicted']:.2f}×" for r in rows],
            }
        ),
        hide_index=True,
    )
    if run.verdict.busy:  # no conclusion from times that describe the load
        st.warning(busy_message(run.verdict.reasons, "ls_c5_busy"))
        return
    if not run.conclusive:  # one pass: no spread to judge the load by
        st.warning(t("ls_c5_few"))
        return
    alone = rows[0]["ms_token"]
    best = max(rows[1:], key=lambda r: r["alpha"] or 0.0)
    st.markdown(
        t(
            "ls_c5_measured",
            alpha=f"{best['alpha']:.2f}",
            ms=f"{best['ms_token']:.2f}",
            alone=f"{alone:.2f}",
            x=f"{best['predicted']:.2f}",
        )
    )


def _sources() -> None:
    st.subheader(t("ls_c5_sources_title"))
    question, why = t("ls_c5_source_q"), t("ls_c5_source_why")
    if ask(choice("c5_source", question, "lookup", why, SOURCES[:3], "ls_c5_src_")):
        st.dataframe(
            pd.DataFrame(
                {
                    t("ls_c5_col_source"): [t("ls_c5_src_" + s) for s in SOURCES],
                    t("ls_c5_col_how"): [t("ls_c5_how_" + s) for s in SOURCES],
                    t("ls_c5_col_here"): [t("ls_c5_here_" + s) for s in SOURCES],
                }
            ),
            hide_index=True,
        )


def _evaluate() -> None:
    st.subheader(t("ls_c5_eval_title"))
    answer = round(ACCEPT_LEN / ROUND_COST, 2)
    if ask(
        Check(
            "c5_eval",
            "number",
            t("ls_c5_eval_q", n=ACCEPT_LEN, c=ROUND_COST),
            answer,
            t("ls_c5_eval_why", n=ACCEPT_LEN, c=ROUND_COST, x=f"{answer:g}"),
            tol=0.05,
            unit="×",
        )
    ):
        st.markdown(t("ls_c5_eval_reveal"))
        st.dataframe(
            pd.DataFrame(
                {
                    t("ls_c5_col_metric"): [t("ls_c5_m_" + m) for m in METRICS],
                    t("ls_c5_col_tells"): [t("ls_c5_t_" + m) for m in METRICS],
                }
            ),
            hide_index=True,
        )


def render(pair: ModelPair) -> None:
    background.prewarm(pair.name)  # the worker loads while the question is read
    st.markdown(t("ls_c5_intro"))
    _faster(pair)
    _sources()
    _evaluate()
