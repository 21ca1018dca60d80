"""The chain's distributions: one drafted position's chart (``p``, ``q``, their overlap
and excess; or ``p`` before and after the processors), the verdict in words, and the
phase line of a round with no drafts (the checks table is drawn with the token strip:
:mod:`~specdec_core.ui.step.strip_checks`). Drawing only; every number comes
from the session's frozen traces."""

from __future__ import annotations

from typing import cast

import streamlit as st

from specdec_core.core.numfmt import fmt_prob, fmt_sig
from specdec_core.core.trace import DistSlice
from specdec_core.drafters.registry import spec_of
from specdec_core.engine.chain.trace import RoundTrace, VerifyTrace
from specdec_core.engine.session import Session
from specdec_core.ui.figures.step import HEIGHT as CHART_HEIGHT
from specdec_core.ui.figures.step import distribution_option
from specdec_core.ui.figures.step_slices import before_after_slice, masked_mass
from specdec_core.ui.i18n import strings, t
from specdec_core.ui.step.block_checks import check_line, residual_chart
from specdec_core.ui.step.header import Heading
from specdec_core.ui.step.strip_checks import UNCHECKED, shown_u
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import (
    BLOCK_STATUS,
    CHECK_STATUS,
    NEXT_NO_DRAFTS,
    NO_DRAFTS_PHASE,
    PHASE,
    NoDraftsReason,
    say,
)


def _labels() -> dict[str, str]:
    return {
        "p": t("trace_p"),
        "q": t("trace_q"),
        "min": t("trace_min"),
        "excess": t("trace_excess"),
        "other": t("other_bucket"),
        "probability": t("probability"),
        "token": t("token"),
        "marked": t("drafted_marker"),
        "correction": t("legend_correction"),
        "context": t("trace_context"),
        "before": t("trace_before"),
    }


def _pick_position(session: Session, phase: str, n: int, bonus: bool, default: int) -> int:
    """One chart at a time: one position's bars are what a student reads at once."""
    options = list(range(1, n + 1)) + ([n + 1] if bonus else [])
    chosen = st.segmented_control(
        t("st_position"),
        options,
        default=min(default, len(options)),
        format_func=lambda i: f"{i} ★" if bonus and i == n + 1 else str(i),
        key=f"st_pos_{session.round_index}_{phase}_{n}",
    )
    return chosen or min(default, len(options))


def _chart(dist: DistSlice, labels: dict[str, str], title: str, **kw) -> None:
    """Draw one position's distribution chart (an ECharts option: < 1 ms to build, so it
    is built on every rerun; the Plotly figure it replaced was cached per state)."""
    option = distribution_option(
        dist, labels, title, presenter=bool(st.session_state.get("presenter")), **kw
    )
    with st.container(key="dist_chart_box"):  # kept by the browser: see _lower_views
        st.echarts_chart(option, height=CHART_HEIGHT, key="dist_chart")


def no_drafts_reason(session: Session, last: RoundTrace | None = None) -> NoDraftsReason | None:
    """Why a round has no drafts: ``"budget"`` (γ was cut to 0 by the token budget or the
    context), ``"ngram"`` (prompt lookup found no n-gram match), ``"hidden"`` (the MTP
    heads' first round: no target hidden state yet), ``"drafter"`` (another drafter
    proposed nothing); the last two are the drafter table's ``empty_draft``. ``last =
    None``: the pending round (``None`` when it has drafts or no round is pending); else
    the finished round ``last`` (the caller knows it had no drafts). The γ asked for comes
    from the engine (the round's record, or the pending round's :attr:`current_gamma`)."""
    if last is not None:
        planned = last.record.gamma
    elif session.phase not in ("verify", "commit") or session.steps.drafts:
        return None
    else:
        planned = session.steps.current_gamma
    if planned == 0:
        return "budget"
    first = (last.round_index if last is not None else session.round_index) == 0
    if first and hasattr(session.drafter, "head_evaluations"):
        return "hidden"  # the MTP heads read a hidden state no target forward has made yet
    spec = spec_of(session.drafter)  # the drafter table's reason (prompt lookup: no match)
    return cast(NoDraftsReason, spec.empty_draft) if spec is not None else "drafter"


def phase_text(session: Session, phase: str) -> str:
    """The phase line above the strip (a round with no drafts says why, and that the
    target's forward still yields one token)."""
    reason = no_drafts_reason(session)
    if reason is None or phase not in ("verify", "commit"):
        return say(PHASE, ("chain", phase))
    return say(NO_DRAFTS_PHASE, (phase, reason))


def _before_after(
    shown: VerifyTrace, pos: int, log_y: bool, marked: int | None, correction: int | None
) -> None:
    """Position ``pos``: the target's ``p`` before the history-dependent processors
    (``VerifyTrace.unprocessed_dists``) and after them, with the mass they set to 0. At
    temperature 0 the rule's ``p`` is one-hot, so both sides are the T = 1 softmax (the
    faint context bars' row)."""
    i = pos - 1
    gamma = len(shown.checks)
    if i >= len(shown.unprocessed_dists):
        return
    before = shown.unprocessed_dists[i]
    if shown.greedy and i < len(shown.context_dists):
        after = shown.context_dists[i]
    else:
        after = shown.checks[i].dist if pos <= gamma else shown.next_dist
    labels = {
        **_labels(),
        "p": t("trace_after"),
        "before_short": t("trace_before_short"),
        "p_short": t("trace_after_short"),
    }
    if pos > gamma:
        labels["correction"] = t("legend_bonus")
    _chart(
        before_after_slice(after, before),
        labels,
        t("fig_title_before_after", i=pos),
        marked_id=marked,
        correction_id=correction,
        log_y=log_y,
        before_after=True,
    )
    mass, exact = masked_mass(after, before)
    st.caption(t("masked_mass" if exact else "masked_mass_bound", m=fmt_prob(mass)))
    if shown.greedy:
        st.caption(t("before_after_greedy"))


def _verified(
    session: Session,
    shown: VerifyTrace,
    last: RoundTrace | None,
    phase: str,
    log_y: bool,
    before_after: bool = False,
) -> None:
    """The chart of one verified position (or the bonus position) and the verdict in
    words (the checks table is the strip's: :mod:`~specdec_core.ui.step.strip_checks`).
    ``before_after``: the chart shows ``p`` before and after the
    processors instead (:func:`_before_after`)."""
    labels = _labels()
    checks, gamma = shown.checks, len(shown.checks)
    record = last.record if last is not None else session.current_record
    # a stop on a committed draft (e.g. an accepted end-of-text) ends the round there: the
    # rule's correction/bonus is never emitted, so it is neither drawn nor explained
    stopped = record is not None and record.kind == "stopped"
    bonus = shown.kind == "bonus" and not stopped
    greedy, contexts = shown.greedy, shown.context_dists
    default = record.accepted if stopped else shown.accepted + 1
    pos = _pick_position(session, phase, gamma, bonus, max(1, default))
    if pos <= gamma:
        c = checks[pos - 1]
        correction = shown.next_token.id if pos == shown.accepted + 1 and not stopped else None
        title = t("fig_title_pos", i=c.position, tok=token_in_sentence(c.token, "text"))
        if before_after:
            _before_after(shown, pos, log_y, c.token.id, correction)
        else:
            dist, chart_labels, keep = residual_chart(c.dist, labels, shown.block, pos, correction)
            _chart(
                dist,
                chart_labels,
                title,
                keep_ids=keep,
                marked_id=c.token.id,
                correction_id=correction,
                log_y=log_y,
                context=contexts[pos - 1] if contexts else None,
            )
        verdict = say(BLOCK_STATUS if shown.block else CHECK_STATUS, c.status)
        if greedy:
            st.markdown(
                t(
                    "check_greedy",
                    argmax=token_in_sentence(c.target_argmax),
                    tok=token_in_sentence(c.token),
                    verdict=verdict,
                )
            )
        elif line := check_line(c, shown.block, pos, verdict):
            st.markdown(line)
        else:
            st.markdown(
                t(
                    "check_sampling",
                    p=fmt_sig(c.p),
                    q=fmt_sig(c.q),
                    a=fmt_sig(c.accept_prob),
                    u=fmt_sig(shown_u(c), missing=t("check_not_drawn")),
                    verdict=verdict,
                )
            )
            if c.status in UNCHECKED:
                st.caption(t("unchecked_mark"))
    else:
        # ★ marks the target's own token (correction or bonus), ▼ a drafted one
        bonus_labels = {**labels, "correction": t("legend_bonus")}
        if before_after:
            _before_after(shown, pos, log_y, None, shown.next_token.id)
        else:
            _chart(
                shown.next_dist,
                bonus_labels,
                t("fig_title_bonus", i=pos),
                correction_id=shown.next_token.id,
                log_y=log_y,
                context=contexts[gamma] if len(contexts) > gamma else None,
            )
    if greedy and contexts:
        st.caption(t("context_note"))
    next_tok = token_in_sentence(shown.next_token)
    if stopped:  # the round ends at the stop: later drafts are cut, no correction/bonus
        st.info(t("next_stopped", n=record.accepted, cut=record.statuses.count("cut")))
    elif gamma == 0:  # a round with no drafts (budget, or no n-gram match): a normal state
        reason = no_drafts_reason(session, last) or "budget"
        st.info(say(NEXT_NO_DRAFTS, reason, tok=next_tok))
    elif bonus:
        st.success(t("next_bonus", g=gamma, tok=next_tok, i=gamma + 1))
    else:
        how = "next_correction_greedy" if greedy else "next_correction"
        how = "st_bv_next_correction" if shown.block is not None else how  # r_τ, not [p − q]+
        st.warning(t(how, k=shown.accepted + 1, tok=next_tok))
    proposed = last.propose if last is not None else session.steps.current_propose
    st.caption(
        t("timing", d=proposed.draft_ms, v=shown.verify_ms, n=shown.target_forward_tokens)
        + " · "
        + draft_forwards_text(session, proposed.draft_forwards, proposed.gamma)
    )


def distributions(
    session: Session,
    last: RoundTrace | None,
    phase: str,
    heading: Heading,
) -> None:
    """The per-position distributions: the verified round (or the last one), else the
    drafts' ``q`` before Verify."""
    verify = session.steps.current_verify
    shown = verify if verify is not None else (last.verify if last is not None else None)
    heading(t("st_dists"))
    log_y = st.toggle(t("fig_log"), key="st_log_y", help=t("fig_log_help"))
    if shown is None and not session.steps.drafts:  # before Propose, or a round with no drafts
        st.caption(t("st_dists_no_drafts" if no_drafts_reason(session) else "st_dists_empty"))
    elif shown is not None:
        before_after = bool(shown.unprocessed_dists) and st.toggle(
            t("fig_before_after"), key="st_before_after", help=t("fig_before_after_help")
        )
        _verified(session, shown, last, phase, log_y, before_after)
    else:
        dists = session.steps.current_draft_dists
        pos = _pick_position(session, phase, len(dists), False, 1)
        d, tok = dists[pos - 1], session.token(session.steps.drafts[pos - 1])
        title = t("fig_title_draft", i=pos, tok=token_in_sentence(tok, "text"))
        _chart(d, _labels(), title, marked_id=tok.id, log_y=log_y)
        q_y = float(d.q[d.token_ids.tolist().index(tok.id)])
        st.markdown(t("check_pending", q=fmt_sig(q_y)))
        st.caption(t("st_dists_help"))


def draft_forwards_text(session: Session, forwards: int, drafted: int) -> str:
    """How many forwards this round's drafting ran, in the drafter's own terms: a drafter
    with a cache of its own runs forwards (the block drafter: 1 for its whole block); the
    MTP heads (a drafter with ``head_evaluations``) run no model forward (``forwards`` is
    0) but one head evaluation per drafted position (``drafted``: a chain proposal
    computes exactly the rows it drafts); prompt lookup runs none. A drafter whose steps
    have a name of their own says it (``st_draft_forwards_<name>``: EAGLE head forwards,
    GRU steps)."""
    if session.drafter.cached_ids() is not None:
        named = "st_draft_forwards_" + session.drafter.name
        return t(named if named in strings() else "st_draft_forwards", f=forwards)
    if hasattr(session.drafter, "head_evaluations") and drafted:
        return t("st_draft_heads", f=drafted)
    return t("st_draft_forwards", f=forwards) if forwards else t("st_draft_no_forward")
