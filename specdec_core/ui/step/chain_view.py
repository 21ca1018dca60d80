"""The chain's part of the step panel: the token strip (the round's verdicts on the
committed text), the edit box, the distributions with the checks table
(:mod:`specdec_core.ui.step.view`), the KV-cache state of both models and the history of
finished rounds. Drawing only; every number comes from the session's frozen traces."""

from __future__ import annotations

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.words import STRIP_WORDS
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.engine.session import Session
from specdec_core.ui.i18n import strings, t
from specdec_core.ui.render import (
    StripItem,
    history_html,
    kv_table_html,
    round_strip,
    token_strip_html,
)
from specdec_core.ui.step import actions, processors_view, state_view, view
from specdec_core.ui.step import edit as step_edit
from specdec_core.ui.step.header import Heading
from specdec_core.ui.step.history import round_label, stats_line
from specdec_core.ui.step.lesson import Lesson
from specdec_core.ui.step.strip_checks import alert, checks_html, line_html, section_html
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import STOP_REASON, say


def draw(pair: ModelPair, lesson: Lesson, phase: str, presenter: bool, heading: Heading) -> None:
    """Everything of the chain below the step panel's Lesson panel."""
    session: Session = lesson.session
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    verify = session.steps.current_verify  # the round verified, else the last one's
    shown = verify if verify is not None else (last.verify if last is not None else None)
    checks = ""
    if shown is not None:
        checks = checks_html(shown.checks, shown.greedy, shown.block, session.token, presenter)
    # one element: the strip and, below it, the checks (presenter mode: the checks go
    # below the chart and the KV table, which share the projector's first screen)
    st.html(_strip(session, last, "" if presenter else checks, presenter))
    step_edit.edit_box(session, phase, actions.edit)
    _lower_views(session, last, phase, presenter, heading, checks if presenter else "")


def _strip(session: Session, last: RoundTrace | None, checks: str, presenter: bool) -> str:
    """The strip element's HTML: the last commit's message (a stop, a rejection), the
    token strip (after a commit: how it changed the text) and ``checks`` below it."""
    verify = session.steps.current_verify
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    if last is not None:  # show how the last commit changed the text
        n_new = len(last.commit.appended)
        older = generated[: len(generated) - n_new]
        items += [StripItem(session.token(i), "committed") for i in older]
        items += round_strip(last.verify, last.record)
    else:
        items += [StripItem(session.token(i), "committed") for i in generated]
        edited = session.steps.edited_positions
        if verify is None:
            items += [
                StripItem(session.token(y), "tentative", i + 1 in edited)
                for i, y in enumerate(session.steps.drafts)
            ]
        else:
            items += round_strip(verify, session.current_record)
    message = ""
    if last is not None and last.commit.kind == "stopped":  # a stop cut the commit short
        commit = last.commit
        reason = say(STOP_REASON, commit.stop_reason or "eos")
        line = line_html(
            "st_stopped_in_round", n=len(commit.appended), cut=len(commit.cut), reason=reason
        )
        message = alert("info", line, presenter)
    elif last is not None and last.commit.discarded:
        commit = last.commit
        gone = " ".join(token_in_sentence(tok, "html") for tok in commit.discarded)
        recurrent = session.drafter.state_view() is not None  # restored, not cut
        key = "st_reject_step_state" if recurrent else "st_reject_step"
        line = line_html(
            key,
            {"tokens": gone},
            n=len(commit.discarded),
            t=commit.rolled_back_target,
            d=commit.rolled_back_draft,
        )
        message = alert("warning", line, presenter)
    strip = token_strip_html(items, list(STRIP_WORDS))  # every state, in the house order
    return section_html(t("st_strip"), strip, message, checks, presenter=presenter)


def _lower_views(
    session: Session,
    last: RoundTrace | None,
    phase: str,
    presenter: bool,
    heading: Heading,
    checks: str,
) -> None:
    """The distributions, the KV table and the history. Presenter mode: the chart and the
    KV table side by side (one look, no scroll), ``checks`` (the checks table's HTML)
    below them. Otherwise one column, in reading order."""
    # Keyed containers: the browser keeps a keyed block (and the chart inside it) across
    # reruns even when the elements above it change in number (a message, the edit box);
    # an unkeyed one at a new index is rebuilt, and the chart with it (≈ 100 ms a click).
    if presenter:
        with st.container(key="step_lower"):
            dist_box, kv_box = st.columns([1, 1], gap="medium")
    else:
        dist_box = st.container(key="step_dist_box")
        kv_box = st.container(key="step_kv_box")
    with dist_box:
        view.distributions(session, last, phase, heading)
    with kv_box:
        kv_section(session, last, presenter, heading)
    if checks:
        st.html(checks)
    history(session)


def kv_section(
    session: Session,
    last: RoundTrace | None,
    presenter: bool,
    heading: Heading,
) -> None:
    """Counters and the KV-state table of both models."""
    heading(t("st_kv"))
    state = session.kv_state(session.steps.current_statuses())
    own_state = session.drafter.cached_ids() is not None  # MTP heads, prompt lookup: none
    recurrent = session.drafter.state_view() is not None  # a state, not a KV cache
    counts = [
        (t("kv_committed_len"), state.committed_len),
        (t("kv_target_len"), state.target_kv_len),
        (
            t("kv_draft_state_len" if recurrent else "kv_draft_len"),
            state.draft_kv_len if own_state else "—",
        ),
    ]
    if presenter:  # one line instead of three tall metric boxes
        st.markdown(" · ".join(f"{name} **{n}**" for name, n in counts))
    else:
        for col, (name, n) in zip(st.columns(3), counts, strict=True):
            col.metric(name, n)
    if last is not None:
        st.caption(
            t(
                "kv_rolled_back_state" if recurrent else "kv_rolled_back",
                t=last.commit.rolled_back_target,
                d=last.commit.rolled_back_draft,
            )
        )
    show_all = st.toggle(t("kv_show_prompt"), key="kv_all")
    # the current round's rows and the last few committed ones (after a commit: the whole
    # last round), as a plain table: no inner scroll
    keep = 2 + (len(last.commit.appended) if last is not None else 0)
    st.html(kv_table_html(state, None if show_all else keep))
    if not own_state:
        key = f"kv_no_state_{session.drafter.name}"
        st.caption(t(key) if key in strings() else t("kv_no_state"))
    st.caption(t("kv_help"))
    state_view.section(session, state, last, heading)  # a recurrent drafter's checkpoints
    config = session.config
    processors_view.section(
        processors_view.chain_moments(session, last, session.phase),
        session.prompt_len,
        session.token,
        config.repetition_penalty == 1.0 and config.no_repeat_ngram_size == 0,
        heading,
    )


HISTORY_SHOWN = 20  # rounds of the history drawn unless older ones are asked for


def history(session: Session) -> None:
    """Finished rounds, newest first, with the statistics of all of them."""
    st.subheader(t("st_history"))
    if not session.history:
        st.caption(t("history_empty"))
        return
    st.markdown(stats_line(session.records))
    # the newest HISTORY_SHOWN rounds unless the student asks for older ones: every round
    # is sent on every click (a 515-round history was 1.4 MB a click)
    older = len(session.history) > HISTORY_SHOWN and st.toggle(
        t("lt_older_rounds"), key="st_history_older"
    )
    shown = session.history if older else session.history[-HISTORY_SHOWN:]
    # one HTML element for all rounds (native <details>), built once per history length
    # and language: a step click re-renders every element of the panel in the browser
    key = (len(session.history), t("st_history"), older)
    cached = st.session_state.get("step_history_html")
    if cached is None or cached[0] != key or cached[1] is not session.history[-1]:
        scheduled = session.config.gamma_schedule != "constant"  # each round's γ shown
        rounds = [
            (
                round_label(r, scheduled),
                token_strip_html(round_strip(r.verify, r.record), []),
                t(
                    "timing",
                    d=r.propose.draft_ms,
                    v=r.verify.verify_ms,
                    n=r.verify.target_forward_tokens,
                ),
            )
            for r in reversed(shown)
        ]
        cached = (key, session.history[-1], history_html(rounds))
        st.session_state["step_history_html"] = cached
    st.html(cached[2])
