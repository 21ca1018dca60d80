"""The speed page's section ③, measured: the controls (prompt, budget, drafter, Measure /
sweep / Stop buttons) that queue a job on the server-wide measurement queue, and the wait
that shows its place in the queue / progress until it finishes. Results are drawn by
``specdec_core.ui.speed.view`` and ``why``."""

from __future__ import annotations

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specdec_core.bench.timing import HowMeasured
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for
from specdec_core.server import jobs as J
from specdec_core.server import tasks as T
from specdec_core.server.room_limits import RUNS
from specdec_core.ui.drafters.cards import draft_notes
from specdec_core.ui.errors import error_message
from specdec_core.ui.guards import PROMPT_CHARS, prompt_ids, prompt_limit_note
from specdec_core.ui.i18n import t
from specdec_core.ui.pair_text import default_prompt, follow_pair
from specdec_core.ui.speed.queue import queue

S = st.session_state
WAIT_S = 0.2  # how often a waiting page redraws the queue position / progress
WAIT_STEPS = 9000  # 30 minutes at most, then the page stops waiting (the job goes on)


def _session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "local"


def _start(kind: str, pair: ModelPair, config: SessionConfig) -> None:
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
        RUNS.sleep(WAIT_S)  # the browser's other tabs run meanwhile
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


def show_controls(pair: ModelPair, config: SessionConfig) -> None:
    """Section ③'s header and controls, their messages, then the wait for a queued job of
    this session (a job that is not of this server, an old or crafted state, is dropped)."""

    def _start_here(kind: str) -> None:
        _start(kind, pair, config)

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
    S.setdefault("sp_prompt", default_prompt(pair.name, "speed"))
    follow_pair("sp_prompt", pair.name, "speed")
    prompt = st.text_area(t("sp_prompt"), key="sp_prompt", height=80, max_chars=PROMPT_CHARS)
    st.caption(prompt_limit_note())
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
    draft_notes(pair, S["sp_drafter"])
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
        on_click=_start_here,
        args=("measure",),
        disabled=busy or prompt_error is not None,
        width="stretch",
    )
    k2.button(
        t("sp_sweep_gamma"),
        on_click=_start_here,
        args=("gamma",),
        disabled=busy or prompt_error is not None,
        width="stretch",
    )
    k3.button(
        t("sp_sweep_batch"), on_click=_start_here, args=("batch",), disabled=busy, width="stretch"
    )
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
