"""Chapter 5: speed and sources — a higher acceptance rate is not always faster (a small
measured run), where drafts come from, and what to measure when evaluating a system.

The measured run follows the speed page's rules (issue 24.6): one untimed warm-up run of
each variant first (the first run of a cold process was 131 ms/token against 10.5 after),
the variants interleaved and repeated, each time shown as median (min–max), ONE measured
target step feeding every ``c``, and "this machine is too busy to measure this now" instead
of a conclusion when the repeats disagree (``bench.judge``). Measured per session, on
request, and labelled with how it was measured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from specdec_core.bench import HowMeasured, Spread, Verdict, ignoring_eos, judge
from specdec_core.core.models import ModelPair
from specdec_core.drafters import ModelDrafter
from specdec_core.engine.chain.generate import generate
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.scenarios import PROMPTS
from specdec_core.rules.costmodel import walltime_improvement
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import Check, ask, choice
from specdec_core.ui.speed.view import busy_message, how_label, spread_text

CHECKS = ("c5_faster", "c5_source", "c5_eval")
TOKENS, GAMMA = 32, 4
REPEATS = 3  # timed runs of each variant, interleaved, after one warm-up run of each
RUN = "ls_c5_run"
ACCEPT_LEN, ROUND_COST = 3.2, 2.5  # the evaluation question's numbers
SOURCES = ("model", "lookup", "early_exit", "feature_head", "tree")
METRICS = ("accept_len", "forwards", "ttft", "ms_token", "tok_s", "equality", "batch")
VARIANTS = ("alone", "model", "self")  # target alone; the pair's draft; the target as draft


@dataclass(frozen=True)
class SpeedRun:
    """Chapter 5's measurement: one row per variant (``name``, ``alpha`` (None alone),
    ``forwards`` (target forwards), ``ms_token`` (median ms per generated token),
    ``spread`` (:class:`Spread` of it), ``c`` (draft step / the one target step; None
    alone), ``predicted`` (Leviathan's Thm 3.8 with that ``c``)), the target step every
    ``c`` divides by (ms), how it was measured and the verdict on the repeats."""

    rows: tuple[dict, ...]
    target_step_ms: float
    how: HowMeasured
    verdict: Verdict


def _steady_step(stats) -> float:
    """A target-only run's mean target forward after the prompt's (ms)."""
    n = stats.target_forwards - 1
    return (stats.target_forward_ms - stats.prefill_ms) / n if n > 0 else stats.target_forward_ms


def measure(pair: ModelPair, repeats: int = REPEATS) -> SpeedRun:
    """Target alone, the pair's draft model and the target as its own draft (α = 1),
    greedy, :data:`TOKENS` tokens each (fast path, end-of-text ignored): one untimed
    warm-up run of each, then ``repeats`` passes running each once (interleaved).

    Step times: the target step is the target-alone runs' steady step (median over
    repeats); the draft model's step is its runs' mean draft forward (median); the target
    as its own draft steps with that same target step, so its ``c`` is exactly 1."""
    config = LessonState(pair=pair.name, gamma=GAMMA, max_new_tokens=TOKENS).config()
    timed = ignoring_eos(pair)
    drafts = {"alone": None, "model": pair.draft, "self": pair.target}

    def once(name: str):
        model = drafts[name]
        mode = "autoregressive" if model is None else "speculative"
        drafter = ModelDrafter(model) if model is not None else None
        return generate(timed, PROMPTS[0], config, mode=mode, drafter=drafter).stats  # type: ignore[arg-type]

    for name in VARIANTS:  # warm-up: every variant once, untimed
        once(name)
    runs: dict[str, list] = {name: [] for name in VARIANTS}
    for _ in range(max(1, repeats)):
        for name in VARIANTS:
            runs[name].append(once(name))
    target_step = statistics.median(_steady_step(s) for s in runs["alone"])
    draft_step = statistics.median(
        s.draft_forward_ms / max(1, s.draft_forwards) for s in runs["model"]
    )
    steps = {"alone": None, "model": draft_step, "self": target_step}
    rows = []
    for name in VARIANTS:
        first = runs[name][0]
        spread = Spread.of([s.total_ms / max(1, s.new_tokens) for s in runs[name]])
        alpha = None if name == "alone" else first.acceptance_rate
        step = steps[name]
        c = None if step is None else (step / target_step if target_step > 0 else 0.0)
        rows.append(
            {
                "name": name,
                "alpha": alpha,
                "forwards": first.target_forwards,
                "ms_token": spread.median,
                "spread": spread,
                "c": c,
                "predicted": 1.0 if alpha is None else walltime_improvement(alpha, GAMMA, c or 0.0),
            }
        )
    verdict = judge([r["spread"] for r in rows])
    return SpeedRun(tuple(rows), target_step, HowMeasured.now(max(1, repeats), 1, TOKENS), verdict)


def _faster(pair: ModelPair) -> None:
    st.subheader(t("ls_c5_faster_title"))
    question, why = t("ls_c5_faster_q"), t("ls_c5_faster_why")
    if not ask(choice("c5_faster", question, "no", why, ("yes", "no"), "ls_c5_")):
        return
    again = st.button(t("ls_c5_measure"), key="ls_c5_measure")
    run = st.session_state.get(RUN)
    if again or not isinstance(run, SpeedRun):  # measured at the reveal, on request again
        with st.spinner(t("ls_c5_measuring")):
            run = st.session_state[RUN] = measure(pair)
    rows = run.rows
    st.caption(
        t("ls_c5_measure_hint", n=TOKENS, gamma=GAMMA, r=run.how.repeats, t=run.target_step_ms)
        + " "
        + how_label(run.how)
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
    st.markdown(t("ls_c5_intro"))
    _faster(pair)
    _sources()
    _evaluate()
