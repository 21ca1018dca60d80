"""Speed and cost: when does speculation pay? The cost model, then real measurements.

Widgets and rendering only: formulas live in ``specdec_core.rules.costmodel``, timings and
comparisons in ``specdec_core.bench``. Long measurements run as a queue of tasks kept in
``st.session_state``: each task is a checkpoint where the progress bar updates and where
Stop (or any other click) interrupts; a stopped sweep keeps the points it finished.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specdec_core.bench import HowMeasured
from specdec_core.drafters import drafters_for
from specdec_core.rules.costmodel import (
    WALLTIME_CASES,
    best_gamma,
    expected_tokens_per_round,
    improvement_curve,
    per_token_cost_ms,
    speedup_from_cost,
    walltime_improvement,
)
from specdec_core.server import jobs as J
from specdec_core.server import tasks as T
from specdec_core.ui.context import page_context
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.speed import speed_cost_figure, speed_gamma_curve_figure
from specdec_core.ui.guards import PROMPT_CHARS, prompt_ids
from specdec_core.ui.i18n import t
from specdec_core.ui.speed.queue import queue
from specdec_core.ui.speed.view import show_batch_sweep, show_gamma_sweep, show_measurement
from specdec_core.ui.speed.why import show_predictions, show_timeline, show_verify_curve

S = st.session_state
pair, config = page_context()
if S.get("sp_worker_for") != pair.name:  # imports and loads while the teacher sets options
    S["sp_worker_for"] = pair.name
    try:
        queue().start(pair.name)
    except OSError:  # no process could start: the first measurement says so
        pass

TEXTBOOK_COST = {"sp_tstep": 20.0, "sp_dms": 8.0, "sp_vms": 25.0, "sp_oms": 0.0, "sp_adv": 3}
WAIT_S = 0.2  # how often a waiting page redraws the queue position / progress
WAIT_STEPS = 9000  # 30 minutes at most, then the page stops waiting (the job goes on)


def _textbook() -> None:
    S.update(TEXTBOOK_COST)


def _use_measured() -> None:
    summary = S["sp_measured"].summary
    cm = summary.cost_model
    S["sp_alpha"] = round(min(max(cm.alpha, 0.0), 1.0), 2)
    if summary.timing is None or not summary.timing.busy:  # c is a ratio of step times
        S["sp_c"] = round(min(max(cm.c, 0.0), 1.0), 2)


# ------------------------------------------------------------------ header
st.title(t("sp_title"))
st.markdown(t("sp_intro"))

# ------------------------------------------------------------------ ① per-token cost
st.header(t("sp_cost_header"))
st.markdown(t("sp_cost_help"))
st.latex(t("sp_cost_formula"))
for key, value in TEXTBOOK_COST.items():
    S.setdefault(key, value)
c1, c2, c3, c4, c5 = st.columns(5)
target_step = c1.number_input(
    t("sp_target_step"), 0.1, 10000.0, step=1.0, key="sp_tstep", help=t("sp_target_step_help")
)
draft_ms = c2.number_input(
    t("sp_draft_ms"), 0.0, 10000.0, step=1.0, key="sp_dms", help=t("sp_draft_ms_help")
)
verify_ms = c3.number_input(
    t("sp_verify_ms"), 0.0, 10000.0, step=1.0, key="sp_vms", help=t("sp_verify_ms_help")
)
overhead_ms = c4.number_input(
    t("sp_overhead_ms"), 0.0, 10000.0, step=1.0, key="sp_oms", help=t("sp_overhead_ms_help")
)
advanced = c5.number_input(t("sp_advanced"), 1, 9, step=1, key="sp_adv", help=t("sp_advanced_help"))
st.button(t("sp_cost_reset"), on_click=_textbook, help=t("sp_cost_reset_help"))

cost = per_token_cost_ms(draft_ms, verify_ms, overhead_ms, advanced)
ratio = speedup_from_cost(target_step, cost) if cost > 0 else float("inf")
m1, m2 = st.columns([1, 3])
m1.metric(
    t("sp_cost_metric"),
    f"{cost:.1f} ms",
    t("sp_cost_vs", d=cost - target_step),
    delta_color="inverse",
    help=t("sp_cost_metric_help"),
)
if cost < target_step:
    m2.success(t("sp_cost_faster", cost=cost, target=target_step, x=ratio))
else:
    m2.error(t("sp_cost_slower", cost=cost, target=target_step, x=ratio))
span = list(range(1, max(5, int(advanced)) + 1))
costs = [per_token_cost_ms(draft_ms, verify_ms, overhead_ms, k) for k in span]
cost_labels = {
    "title": t("sp_cost_fig_title"),
    "x": t("sp_cost_fig_x"),
    "y": t("sp_cost_fig_y"),
    "target": t("sp_cost_fig_target"),
    "chosen": t("sp_cost_fig_chosen"),
}
st.plotly_chart(
    speed_cost_figure(span, costs, target_step, cost_labels, int(advanced)),
    width="stretch",
    key="sp_cost_fig",
)

# ------------------------------------------------------------------ ② Leviathan curves
st.header(t("sp_curve_header"))
st.markdown(t("sp_curve_help"))
st.latex(r"\mathbb{E}[\text{tokens}] = \frac{1-\alpha^{\gamma+1}}{1-\alpha}")
st.markdown(t("sp_curve_help2"))
st.latex(t("sp_improvement_formula"))
S.setdefault("sp_alpha", 0.8)
S.setdefault("sp_c", 0.05)
a1, a2, a3 = st.columns([2, 2, 1])
alpha = a1.slider(t("sp_alpha"), 0.0, 1.0, step=0.01, key="sp_alpha", help=t("sp_alpha_help"))
c_ratio = a2.slider(t("sp_c"), 0.0, 1.0, step=0.01, key="sp_c", help=t("sp_c_help"))
a3.button(
    t("sp_use_measured"),
    on_click=_use_measured,
    disabled="sp_measured" not in S,
    help=t("sp_use_measured_help"),
)
curve = improvement_curve(alpha, c_ratio, range(1, 17))
best = best_gamma(alpha, c_ratio, 16)
best_value = walltime_improvement(alpha, best, c_ratio)
curve_labels = {
    "title": t("sp_curve_fig_title", alpha=alpha, c=c_ratio),
    "x": t("sp_curve_fig_x"),
    "tokens": t("sp_curve_tokens"),
    "improvement": t("sp_curve_improvement"),
    "best": t("sp_curve_best"),
    "breakeven": t("sp_breakeven"),
}
st.plotly_chart(
    speed_gamma_curve_figure(curve, best, curve_labels), width="stretch", key="sp_curve_fig"
)
b1, b2, b3 = st.columns(3)
b1.metric(t("sp_best_gamma"), best)
b2.metric(t("sp_best_improvement"), f"{best_value:.3f}×")
b3.metric(t("sp_best_tokens"), f"{expected_tokens_per_round(alpha, best):.3f}")
if best_value < 1.0:
    st.warning(t("sp_never_pays"))
with st.expander(t("sp_cases_header")):
    st.dataframe(
        pd.DataFrame(
            {
                t("sp_col_alpha"): [a for a, _, _ in WALLTIME_CASES],
                t("sp_col_gamma"): [g for _, g, _ in WALLTIME_CASES],
                t("sp_col_c"): [c for _, _, c in WALLTIME_CASES],
                t("sp_col_tokens"): [
                    round(expected_tokens_per_round(a, g), 6) for a, g, _ in WALLTIME_CASES
                ],
                t("sp_col_improvement"): [
                    round(walltime_improvement(a, g, c), 6) for a, g, c in WALLTIME_CASES
                ],
            }
        ),
        hide_index=True,
        width="stretch",
    )


# ------------------------------------------------------------------ ③ measured: job queue
def _session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "local"


def _start(kind: str) -> None:
    """Queue a measurement on the server-wide queue (refused when full or invalid)."""
    try:
        prompt = str(S.get("sp_prompt", ""))
        if kind != "batch":
            prompt_ids(pair, prompt, "sp_prompt")
        job = T.make_job(
            kind,
            _session_id(),
            pair,
            prompt,
            S.get("sp_n"),
            S.get("sp_repeats"),
            bool(S.get("sp_eos")),
            bool(S.get("sp_hf")),
            config,
            str(S.get("sp_drafter", "model")),
        )
        queue().submit(job)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["sp_job_error"] = error_message(exc)
        return
    S["sp_job"] = job
    if kind in ("gamma", "batch"):  # the points fill in as the worker finishes them
        S["sp_" + kind] = {"params": job.params(), "points": job.points, "partial": True}


def _stop() -> None:
    job = S.pop("sp_job", None)
    if job is not None:
        if isinstance(job, T.Job):
            queue().cancel(job)
        sweep = not isinstance(job, T.Job) or job.kind != "measure"  # sweeps keep points
        S["sp_notice"] = t("sp_stopped" if sweep else "sp_stopped_measure")


def _label(job: T.Job) -> str:
    if job.done >= job.total:
        return t("sp_task_pair", g=job.config.gamma)
    name, arg = job.tasks[job.done]
    if name == "pair":
        return t("sp_task_pair", g=arg)
    if name == "hf":
        return t("sp_task_hf_assisted" if arg else "sp_task_hf_greedy")
    if name == "curve":
        return t("sp_task_curve", k=2 * arg + 1)
    return t("sp_task_batched", b=arg)


def _wait(job: T.Job) -> None:
    """Show the job's place in the queue / progress until it finishes (a click reruns the
    page and interrupts only this wait: the job goes on in the server's worker)."""
    bar = st.progress(0.0)
    for _ in range(WAIT_STEPS):
        if job.finished:
            break
        k = queue().position(job)
        if k > 0:
            bar.progress(0.0, text=t("sp_queued", k=k))
        else:
            text = t("sp_progress", what=_label(job), i=min(job.done + 1, job.total), n=job.total)
            bar.progress(job.done / job.total, text=text)
        time.sleep(WAIT_S)
    bar.empty()
    if not job.finished:
        return
    S.pop("sp_job", None)
    if job.state == "done":
        if job.kind == "measure" and job.result is not None:
            S["sp_measured"] = job.result
            S.setdefault("sp_by_drafter", {})[job.drafter] = job.result
        else:
            S["sp_" + job.kind]["partial"] = False
            S["sp_" + job.kind]["how"] = HowMeasured.now(job.repeats, 1, job.n)  # the label
    elif job.state == "failed":
        S["sp_job_error"] = error_message(job.error)
    else:
        S["sp_notice"] = t("sp_cancelled")
    st.rerun()  # redraw the controls (Stop disabled, buttons enabled) with the results


# ------------------------------------------------------------------ ③ measured: controls
st.header(t("sp_measure_header"))
st.markdown(t("sp_measure_help"))
_threads = torch.get_num_threads()
st.caption(
    t(
        "sp_running_on_one" if _threads == 1 else "sp_running_on",
        pair=pair.name,
        device=pair.device_label(),
        threads=_threads,
        gamma=config.gamma,
        temp=config.temperature,
    )
)
S.setdefault("sp_prompt", t("sp_default_prompt"))
prompt = st.text_area(t("sp_prompt"), key="sp_prompt", height=80, max_chars=PROMPT_CHARS)
prompt_error = None
try:  # tokenized once per change of the text, not once per rerun
    room = pair.context_length - len(prompt_ids(pair, prompt, "sp_prompt"))
except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
    prompt_error, room = error_message(exc), 9
max_n = max(8, min(T.MAX_TOKENS, room))
S.setdefault("sp_n", min(config.max_new_tokens, max_n))  # starts at the sidebar's value
if not isinstance(S["sp_n"], int) or not 1 <= S["sp_n"] <= max_n:
    S["sp_n"] = max_n
o1, o2 = st.columns(2)
o1.slider(t("sp_max_new"), 1, max_n, key="sp_n")
max_repeats = max(2, min(T.MAX_REPEATS, T.MAX_WORK // int(S["sp_n"])))  # the work cap
S.setdefault("sp_repeats", min(3, max_repeats))
if not isinstance(S["sp_repeats"], int) or not 1 <= S["sp_repeats"] <= max_repeats:
    S["sp_repeats"] = max_repeats
o2.slider(t("sp_repeats"), 1, max_repeats, key="sp_repeats")
st.caption(t("sp_limits", work=T.MAX_WORK, jobs=J.max_jobs(), threads=torch.get_num_threads()))
offered = drafters_for(pair)  # eagle only where the pair has a head
if S.get("sp_drafter") not in offered:
    S["sp_drafter"] = "model"
st.selectbox(
    t("sp_drafter"),
    offered,
    key="sp_drafter",
    help=t("sp_drafter_help"),
    format_func=lambda name: t("sp_drafter_" + name),
)
q1, q2 = st.columns(2)
q1.toggle(t("sp_ignore_eos"), True, key="sp_eos", help=t("sp_ignore_eos_help"))
q2.toggle(
    t("sp_with_hf"),
    True,
    key="sp_hf",
    help=t("sp_with_hf_help"),
    disabled=config.temperature != 0.0,
)
busy = "sp_job" in S
k1, k2, k3, k4 = st.columns([1, 1, 1.3, 0.7])
k1.button(
    t("sp_measure"),
    type="primary",
    on_click=_start,
    args=("measure",),
    disabled=busy or prompt_error is not None,
    width="stretch",
)
k2.button(
    t("sp_sweep_gamma"),
    on_click=_start,
    args=("gamma",),
    disabled=busy or prompt_error is not None,
    width="stretch",
)
k3.button(t("sp_sweep_batch"), on_click=_start, args=("batch",), disabled=busy, width="stretch")
# Stop stays clickable: it cancels the job (queued: at once; running: before its next task).
k4.button(
    t("sp_stop"),
    on_click=_stop,
    help=t("sp_stop_help"),
    key="sp_stop_btn",
    width="stretch",
    type="primary" if busy else "secondary",
)
if prompt_error:
    st.error(prompt_error)
if "sp_notice" in S:
    st.info(S.pop("sp_notice"))
if "sp_job_error" in S:
    st.error(S.pop("sp_job_error"))

job = S.get("sp_job")
if isinstance(job, T.Job):
    _wait(job)
elif job is not None:  # not a job of this server (an old or crafted state): drop it
    S.pop("sp_job", None)

# ------------------------------------------------------------------ ③ measured: results
measured = S.get("sp_measured")
if isinstance(measured, T.Measurement):
    show_measurement(measured)
    show_verify_curve(measured)
    show_timeline(measured)
    show_predictions(S.get("sp_by_drafter", {}))
else:
    st.info(t("sp_no_results"))

# ------------------------------------------------------------------ ④ γ sweep
st.header(t("sp_gamma_header"))
st.markdown(t("sp_gamma_help"))
sweep = S.get("sp_gamma")
if sweep and sweep["points"]:
    show_gamma_sweep(sweep["points"], sweep["partial"], sweep.get("how"))

# ------------------------------------------------------------------ ⑤ batch sweep
st.header(t("sp_batch_header"))
st.markdown(t("sp_batch_help"))
batch = S.get("sp_batch")
if batch and batch["points"]:
    show_batch_sweep(batch["points"], batch["partial"], batch.get("how"))
