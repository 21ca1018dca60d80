"""Step-through lesson: propose → verify → commit / reject on the loaded pair.

Widgets and rendering only: every number comes from ``SpeculativeSession`` traces.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.figures import distribution_figure, visible_token
from specdec_core.records import summarize
from specdec_core.session import SpeculativeSession, single_token_id
from specdec_core.ui import lesson as L
from specdec_core.ui.context import page_context
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.guards import PROMPT_CHARS, SHORT_CHARS, whole_number
from specdec_core.ui.i18n import t
from specdec_core.ui.render import StripItem, kv_table, round_strip, token_strip_html

S = st.session_state
pair, config = page_context()


# ------------------------------------------------------------------ actions
def _error(exc: Exception) -> None:
    S["step_error"] = error_message(exc)


def _act(action: str) -> None:
    """Button callback: run one phase (or finish the round); errors leave state as is."""
    session: SpeculativeSession = L.current().session
    try:
        if action == "propose":
            session.propose()
        elif action == "verify":
            session.verify()
        elif action == "commit":
            session.commit()
        elif action == "round":
            if session.phase == "propose":
                session.propose()
            if session.phase == "verify":
                session.verify()
            session.commit()
        elif action == "reset":
            L.reset(pair, config, S[L.PROMPT_KEY])
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        _error(exc)


def _edit(kind: str) -> None:
    session: SpeculativeSession = L.current().session
    try:
        gamma = len(session.drafts)
        pos = whole_number(S.get("edit_pos", 1), 1, max(gamma, 1), "position")
        if kind == "choice":
            choice = whole_number(S.get("edit_choice"), 0, pair.vocab_size - 1, "token")
            trace = session.edit_draft(pos, choice)
        elif kind == "text":
            trace = session.edit_draft(pos, single_token_id(pair, str(S.get("edit_text", ""))))
        elif kind == "wrong":
            trace = session.make_position_wrong(pos)
        else:
            edits = session.make_draft_agree()
            S["step_notice"] = t("edit_agree_done", n=len(edits))
            return
        S["step_notice"] = t(
            "edit_done", k=pos, old=plain(visible_token(trace.old_token.text)),
            new=plain(visible_token(trace.new_token.text)),
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        _error(exc)


# ------------------------------------------------------------------ header + controls
st.title(t("st_title"))
st.markdown(t("st_intro"))

L.seed_prompt(t("st_default_prompt"))
prompt = st.text_area(t("st_prompt"), key=L.PROMPT_KEY, height=80, max_chars=PROMPT_CHARS)
if pair.name == "embedded":
    st.caption(t("st_prompt_note"))

synced = L.sync(pair, config, prompt)
if synced.lesson is None:  # the very first prompt was bad
    st.error(error_message(synced.error))
    st.stop()
if synced.notice:
    S["step_notice"] = t(synced.notice)
session: SpeculativeSession = synced.lesson.session
# The inputs on screen could not start a session (bad prompt): say so on every rerun and
# block the actions, so nothing runs on the old prompt while the box shows another.
blocked = synced.blocked
if blocked and synced.error is not None:
    S["step_error"] = error_message(synced.error)
phase = "finished" if blocked else session.phase

cols = st.columns([1, 1, 1.3, 1.2, 1.2, 0.7, 0.9])
for col, step in zip(cols[:3], ("propose", "verify", "commit"), strict=True):
    col.button(
        t("st_" + step),
        on_click=_act,
        args=(step,),
        disabled=phase != step,
        type="primary" if phase == step else "secondary",
        width="stretch",
    )
cols[3].button(
    t("st_run_round"),
    on_click=_act,
    args=("round",),
    disabled=phase == "finished",
    width="stretch",
)
n_rounds = cols[5].number_input(
    t("st_n_rounds"), 1, 50, 5, key="st_n", label_visibility="collapsed"
)
run_n = cols[4].button(t("st_run_n"), disabled=phase == "finished", width="stretch")
cols[6].button(t("st_reset"), on_click=_act, args=("reset",), help=t("st_reset_help"),
               width="stretch")  # fmt: skip

if run_n:
    bar = st.progress(0.0)
    for i in range(int(n_rounds)):
        if session.phase == "finished":
            break
        bar.progress(i / n_rounds, text=t("st_running", i=i + 1, n=int(n_rounds)))
        _act("round")
    bar.empty()
    st.rerun()  # redraw the buttons for the new phase

if "step_error" in S:
    st.error(S.pop("step_error"))
if "step_notice" in S:
    st.info(S.pop("step_notice"))

if blocked:
    pass  # the prompt error above says what to fix
elif phase == "finished":
    st.success(t("st_phase") + t("phase_finished", reason=t("stop_" + session.stop_reason)))
else:
    st.info(t("st_phase") + t("phase_" + phase))

# ------------------------------------------------------------------ token strip
verify = session.current_verify
last = session.history[-1] if session.history and phase in ("propose", "finished") else None
items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
generated = session.ids[session.prompt_len :]
if last is not None:  # show how the last commit changed the text
    n_new = len(last.commit.appended)
    older = generated[: len(generated) - n_new]
    items += [StripItem(session.token(i), "committed") for i in older]
    items += round_strip(last.verify, last.record)
else:
    items += [StripItem(session.token(i), "committed") for i in generated]
    edited = session.edited_positions
    if verify is None:
        items += [
            StripItem(session.token(y), "tentative", i + 1 in edited)
            for i, y in enumerate(session.drafts)
        ]
    else:
        items += round_strip(verify, session.current_record)
st.subheader(t("st_strip"))
stopped_early = last is not None and last.commit.kind == "stopped"
if stopped_early:  # a stop (e.g. an accepted end-of-text) cut the commit short
    st.info(t("st_stopped_in_round", n=len(last.commit.appended), cut=len(last.commit.cut),
              reason=t("stop_" + (last.commit.stop_reason or "eos"))))  # fmt: skip
elif last is not None and last.commit.discarded:
    gone = " ".join(f"`{visible_token(tok.text)}`" for tok in last.commit.discarded)
    st.warning(t("st_reject_step", tokens=gone, n=len(last.commit.discarded),
                 t=last.commit.rolled_back_target, d=last.commit.rolled_back_draft))  # fmt: skip
legend = ["prompt", "committed", "tentative", "accepted", "rejected", "discarded", "cut",
          "correction", "bonus"]  # fmt: skip
st.html(token_strip_html(items, legend))

# ------------------------------------------------------------------ edit controls
if phase == "verify" and session.drafts:
    with st.expander(t("st_edit"), expanded=True):
        st.caption(t("st_edit_help"))
        gamma = len(session.drafts)
        preview_key = tuple(session.ids[-1:] + session.drafts)
        if S.get("step_preview", (None,))[0] != preview_key:
            S["step_preview"] = (preview_key, session.target_preview(top_n=5))
        preview = S["step_preview"][1]
        e1, e2, e3 = st.columns([1, 3, 2])
        pos = e1.selectbox(t("edit_position"), list(range(1, gamma + 1)), key="edit_pos")
        dists = session.current_draft_dists
        options: dict[int, str] = {}
        for tok in dists[pos - 1].tokens[:6]:
            options.setdefault(tok.id, f"{visible_token(tok.text)}  (q)")
        for tok in preview[pos - 1]:
            options.setdefault(tok.id, f"{visible_token(tok.text)}  (p)")
        e2.selectbox(t("edit_choose"), list(options), format_func=options.get, key="edit_choice")
        e2.button(t("edit_apply"), on_click=_edit, args=("choice",))
        e3.text_input(t("edit_text"), key="edit_text", max_chars=SHORT_CHARS)
        e3.button(t("edit_apply_text"), on_click=_edit, args=("text",))
        q1, q2 = st.columns(2)
        q1.button(t("edit_wrong", k=pos), on_click=_edit, args=("wrong",), width="stretch")
        q2.button(t("edit_agree"), on_click=_edit, args=("agree",), width="stretch")

# ------------------------------------------------------------------ distributions
st.subheader(t("st_dists"))
labels = {
    "p": t("trace_p"), "q": t("trace_q"), "min": t("trace_min"), "excess": t("trace_excess"),
    "other": t("other_bucket"), "probability": t("probability"), "token": t("token"),
    "marked": t("drafted_marker"),
}  # fmt: skip
shown_verify = verify if verify is not None else (last.verify if last is not None else None)


def _pick_position(n: int, bonus: bool, default: int) -> int:
    """One chart at a time (a Plotly figure costs ≈ 25 ms of server time per rerun)."""
    options = list(range(1, n + 1)) + ([n + 1] if bonus else [])
    chosen = st.segmented_control(
        t("st_position"), options, default=min(default, len(options)),
        format_func=lambda i: f"{i} ★" if bonus and i == n + 1 else str(i),
        key=f"st_pos_{session.round_index}_{phase}_{n}",
    )  # fmt: skip
    return chosen or min(default, len(options))


if shown_verify is None and not session.drafts:
    st.caption(t("st_dists_empty"))
elif shown_verify is not None:
    st.caption(t("st_dists_help"))
    checks = shown_verify.checks
    gamma = len(checks)
    bonus = shown_verify.kind == "bonus"
    greedy = shown_verify.greedy
    rows = {
        t("col_pos"): [c.position for c in checks],
        t("col_token"): [visible_token(c.token.text) for c in checks],
    }
    if greedy:
        rows[t("col_argmax")] = [visible_token(c.target_argmax.text) for c in checks]
    else:
        rows["p(y)"] = [round(c.p, 4) for c in checks]
        rows["q(y)"] = [round(c.q, 4) for c in checks]
        rows["a = min(1, p/q)"] = [round(c.accept_prob, 4) for c in checks]
        rows["u"] = [round(c.u, 4) if c.u is not None else None for c in checks]
    rows[t("col_verdict")] = [t("verdict_" + c.status) for c in checks]
    st.dataframe(rows, hide_index=True, width="stretch")
    pos = _pick_position(gamma, bonus, shown_verify.accepted + 1)
    if pos <= gamma:
        c = checks[pos - 1]
        title = t("fig_title_pos", i=c.position, tok=visible_token(c.token.text))
        fig = distribution_figure(c.dist, labels, title, marked_id=c.token.id)
        st.plotly_chart(fig, width="stretch", key="dist_chart")
        verdict = t("verdict_" + c.status)
        if greedy:
            st.markdown(t("check_greedy", argmax=f"`{visible_token(c.target_argmax.text)}`",
                          tok=f"`{visible_token(c.token.text)}`", verdict=verdict))  # fmt: skip
        else:
            u = f"{c.u:.4f}" if c.u is not None else t("check_not_drawn")
            st.markdown(t("check_sampling", p=c.p, q=c.q, a=c.accept_prob, u=u,
                          verdict=verdict))  # fmt: skip
    else:
        fig = distribution_figure(shown_verify.next_dist, labels, t("fig_title_bonus", i=pos),
                                  marked_id=shown_verify.next_token.id)  # fmt: skip
        st.plotly_chart(fig, width="stretch", key="dist_chart")
    next_tok = f"`{visible_token(shown_verify.next_token.text)}`"
    if last is not None and last.commit.kind == "stopped":
        pass  # the commit stopped before the correction/bonus token: nothing to explain
    elif gamma == 0:  # a round with no drafts (max new tokens reached): a normal state
        st.info(t("next_no_drafts", tok=next_tok))
    elif bonus:
        st.success(t("next_bonus", g=gamma, tok=next_tok, i=gamma + 1))
    else:
        how = "next_correction_greedy" if greedy else "next_correction"
        st.warning(t(how, k=shown_verify.accepted + 1, tok=next_tok))
    proposed = last.propose if last is not None else session.current_propose
    st.caption(t("timing", d=proposed.draft_ms, v=shown_verify.verify_ms,
                 n=shown_verify.target_forward_tokens))  # fmt: skip
else:
    st.caption(t("st_dists_help"))
    dists = session.current_draft_dists
    pos = _pick_position(len(dists), False, 1)
    d, tok = dists[pos - 1], session.token(session.drafts[pos - 1])
    title = t("fig_title_draft", i=pos, tok=visible_token(tok.text))
    st.plotly_chart(distribution_figure(d, labels, title, marked_id=tok.id), width="stretch",
                    key="dist_chart")  # fmt: skip
    q_y = float(d.q[d.token_ids.tolist().index(tok.id)])
    st.markdown(t("check_pending", q=q_y))

# ------------------------------------------------------------------ KV cache
st.subheader(t("st_kv"))
state = session.kv_state(session.current_statuses())
m1, m2, m3 = st.columns(3)
m1.metric(t("kv_committed_len"), state.committed_len)
m2.metric(t("kv_target_len"), state.target_kv_len)
m3.metric(t("kv_draft_len"), state.draft_kv_len)
st.caption(t("kv_help"))
if last is not None:
    st.caption(
        t("kv_rolled_back", t=last.commit.rolled_back_target, d=last.commit.rolled_back_draft)
    )
show_all = st.toggle(t("kv_show_prompt"), key="kv_all")
st.dataframe(kv_table(state, None if show_all else 3), hide_index=True, width="stretch")

# ------------------------------------------------------------------ history
st.subheader(t("st_history"))
if not session.history:
    st.caption(t("history_empty"))
else:
    summary = summarize(session.records)
    st.markdown(t(
        "history_stats", rounds=summary.rounds, alpha=summary.acceptance_rate,
        acc=summary.accepted, drafted=summary.drafted, checked=summary.checked,
        mean=summary.mean_accepted,
    ))  # fmt: skip
    for r in reversed(session.history):
        label = t("history_round", r=r.round_index + 1, n=r.record.accepted, g=len(r.verify.checks),
                  k=len(r.commit.appended), kind=t("kind_" + r.commit.kind))  # fmt: skip
        with st.expander(label, expanded=False):
            st.html(token_strip_html(round_strip(r.verify, r.record), []))
            st.caption(t("timing", d=r.propose.draft_ms, v=r.verify.verify_ms,
                         n=r.verify.target_forward_tokens))  # fmt: skip
