"""A long measurement a page waits for without freezing: queued on the server-wide
measurement queue (``server/jobs.py``, the speed page's machinery: another process, one job
at a time, a time budget, Stop between tasks), its progress redrawn by a fragment once a
second while the rest of the page stays usable, its result kept in the session.

One measurement per ``name`` (a session-state prefix): ``{name}_job`` while it is queued or
running, then the finished job is handed to the page by :func:`take`; ``{name}_notice``
and ``{name}_error`` hold one message each. A click elsewhere only reruns the page: the
job goes on and its progress shows again; closing the tab cancels it (the queue checks).
Cancel says so in one translated line and leaves everything else as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specdec_core.server.tasks import Job
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import t
from specdec_core.ui.run_gate import fragment
from specdec_core.ui.speed.queue import queue

S = st.session_state
POLL_S = 1.0  # how often the progress fragment looks at the job


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "local"


def prewarm(pair_name: str) -> None:
    """Start the measurement worker and let it load ``pair_name`` once per session and
    pair (as the speed page does), so a first measurement does not spend its time budget
    on the worker's imports."""
    if S.get("bg_worker_for") != pair_name:
        S["bg_worker_for"] = pair_name
        try:
            queue().start(pair_name)
        except OSError:  # no process could start: the first measurement says so
            pass


def job_of(name: str) -> Job | None:
    """This session's job under ``name`` (an object that is not a job of this server, an
    old or crafted state, is dropped)."""
    job = S.get(f"{name}_job")
    if job is not None and not isinstance(job, Job):
        S.pop(f"{name}_job", None)
        return None
    return job


def running(name: str) -> bool:
    """A job under ``name`` is queued or running (not yet taken)."""
    job = job_of(name)
    return job is not None and not job.finished


def submit(name: str, make: Callable[[str], Job]) -> None:
    """Queue ``make(session id)`` under ``name``; a refusal (a full queue, this session's
    other measurement, bad settings) becomes ``{name}_error`` and nothing else changes."""
    try:
        job = queue().submit(make(session_id()))
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S[f"{name}_error"] = error_message(exc)
        return
    S[f"{name}_job"] = job
    S.pop(f"{name}_notice", None)


def cancel(name: str) -> None:
    """Cancel the job under ``name`` (queued: at once; running: before its next task, its
    running task's result dropped) and say so."""
    job = S.pop(f"{name}_job", None)
    if isinstance(job, Job):
        queue().cancel(job)
        S[f"{name}_notice"] = t("bg_cancelled")


def take(name: str) -> Job | None:
    """The job under ``name`` once it finished well (its ``result`` set), handed over once;
    a failed or cancelled one leaves its message instead; ``None`` while it runs."""
    job = job_of(name)
    if job is None or not job.finished:
        return None
    S.pop(f"{name}_job", None)
    if job.state == "done" and job.result is not None:
        return job
    if job.state == "failed":
        S[f"{name}_error"] = error_message(job.error)
    else:
        S[f"{name}_notice"] = t("bg_cancelled")
    return None


def messages(name: str) -> None:
    """The last notice (info) and error of ``name``, each shown once."""
    if f"{name}_notice" in S:
        st.info(S.pop(f"{name}_notice"))
    if f"{name}_error" in S:
        st.error(S.pop(f"{name}_error"))


def progress_text(job: Job, label: str) -> str:
    """What the bar says: the queue position, or ``label`` with the step and the time
    spent against the job's budget."""
    k = queue().position(job)
    if k > 0:
        return t("sp_queued", k=k)
    spent = queue().clock() - job.started if job.started is not None else 0.0
    i = min(job.done + 1, job.total)
    if job.budget_s is None:
        return t("bg_progress", what=label, i=i, n=job.total, s=f"{spent:.0f}")
    return t(
        "bg_progress_budget",
        what=label,
        i=i,
        n=job.total,
        s=f"{spent:.0f}",
        budget=f"{job.budget_s:.0f}",
    )


@fragment(run_every=POLL_S)
def _poll(name: str, label: str) -> None:
    job = job_of(name)
    if job is None:
        return
    if job.finished:  # the whole page takes the result
        st.rerun()
    st.progress(job.done / max(1, job.total), text=progress_text(job, label))


def show(name: str, label: str) -> None:
    """While a job runs under ``name``: its progress (redrawn every :data:`POLL_S` s by a
    fragment, nothing else blocked) and a Cancel button; then the messages."""
    if running(name):
        _poll(name, label)
        st.button(t("bg_cancel"), key=f"{name}_cancel", on_click=cancel, args=(name,))
    messages(name)
