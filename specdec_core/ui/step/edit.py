"""The step-through page's edit box: edit a drafted token before Verify (pick one of the
draft's or the target's top tokens, type one token, "use the target's 2nd choice at
position k", "use the target's top token at every position"), and the preview it needs
(the target's top tokens at each drafted position; at T > 0 after an edit, the exact
acceptance probabilities)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.errors import TokenTextError
from specdec_core.core.inputs import single_token_id
from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_sig
from specdec_core.core.trace import byte_groups, token_lookup
from specdec_core.engine.session import Session
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.guards import SHORT_CHARS
from specdec_core.ui.i18n import t
from specdec_core.ui.step import lesson as L

S = st.session_state
OPEN_KEY = "edit_open"  # the edit box's expander (a lazy one: its state is open or not)
#: the box stays open (or closed) across rounds: a widget's state is dropped while it is
#: not drawn (Propose, Commit), so the student's choice is kept here
KEEP_OPEN = "edit_keep_open"


def _keep_open(session: Session) -> None:
    """The box's ``on_change``: keep its state; opened, compute its previews now, in the
    callback (a step click with the box closed computes none)."""
    S[KEEP_OPEN] = bool(S.get(OPEN_KEY))
    if S[KEEP_OPEN]:
        with L.engine() as held:
            if held:  # else the open box computes them as it draws
                previews(session)


def typed_token_id(pair: ModelPair, text: str) -> int:
    """The id of the one token ``text`` is (``inputs.single_token_id``).

    Raises:
        TokenTextError: zero or several tokens; when some are bytes of a multi-byte
            character (春 is ``‹E6› | ‹98› | ‹A5›`` in a byte-level vocabulary) the code is
            ``not_one_token_bytes`` and the message shows the bytes and the character
            they make (never "� | � | �").
    """
    try:
        return single_token_id(pair, text)
    except TokenTextError as exc:
        ids = pair.tokenizer.encode(text, add_special_tokens=False) if text else []
        info = token_lookup(pair.tokenizer)
        tokens = [info(i) for i in ids[:24]]
        if not any(tok.partial for tok in tokens):
            raise
        groups = byte_groups(tokens)
        pieces = " | ".join(visible_token(tok) for tok in tokens[:12])
        chars = "; ".join(
            f"{visible_token(char)} = " + " ".join(visible_token(x) for x in tokens[i:end])
            for i, (end, char) in list(groups.items())[:4]
        )
        raise TokenTextError(
            f"{str(exc)} (bytes: {pieces})",
            "not_one_token_bytes",
            text=exc.params.get("text", text),
            n=len(ids),
            pieces=pieces + (" | …" if len(ids) > 12 else ""),
            chars=chars or pieces,
        ) from exc


def previews(session: Session) -> tuple[list | None, list | None]:
    """The edit box's target preview (top 5 of p at each drafted position) and, at T > 0
    after an edit, the exact acceptance probabilities; each computed once per drafts and
    kept in session state. The click callbacks call this, so the forward runs before the
    panel starts sending its elements: run while the server is sending them, the two
    threads take turns on the GIL at every torch op and the same forward took 10× longer
    (≈ 70 ms instead of ≈ 6 ms on 2 cores)."""
    if session.phase != "verify" or not session.steps.drafts:
        return None, None
    key = tuple(session.ids[-1:] + session.steps.drafts)
    if S.get("step_preview", (None,))[0] != key:
        S["step_preview"] = (key, session.steps.target_preview(top_n=5))
    accept = None
    if not session.config.sampling.greedy and session.steps.edited_positions:
        if S.get("step_accept", (None,))[0] != key:
            S["step_accept"] = (key, session.steps.accept_preview())
        accept = S["step_accept"][1]
    return S["step_preview"][1], accept


def edit_box(session: Session, phase: str, on_edit: Callable[[str], None]) -> None:
    """Edit a draft (before Verify) and, at T > 0, what the edit's acceptance depends on;
    after Verify, where the box was, how to edit again (step back, or the next round).
    ``on_edit(kind)`` is the page's button callback (``choice``, ``text``, ``wrong``,
    ``agree``); an edit's message (``edit_error`` / ``edit_notice`` in session state) is
    shown just above the box. The box is a lazy expander, closed until a student opens it
    (kept for the session in :data:`KEEP_OPEN`): closed, a step click sends only its
    title, not its ten widgets, and the browser redraws less."""
    sampling = not session.config.sampling.greedy
    if phase == "commit" and session.steps.drafts:  # verified: where the box was, say how back
        st.info(
            t(
                "st_edit_after_verify",
                propose=t("st_propose"),
                verify=t("st_verify"),
                back=t("lt_step_back"),
                commit=t("st_commit"),
            ),
            icon=":material/edit_off:",
        )
        return
    if phase != "verify" or not session.steps.drafts:
        return
    # an edit's outcome is said here, just above the edit box (the page's message row is
    # above the strip, out of view while a student edits; inside a closed box it would
    # be hidden)
    if "edit_error" in S:
        st.error(S.pop("edit_error"))
    if "edit_notice" in S:
        st.info(S.pop("edit_notice"))
    box = st.expander(
        t("st_edit"),
        expanded=bool(S.get(KEEP_OPEN)),
        key=OPEN_KEY,
        on_change=_keep_open,
        args=(session,),
    )
    if box.open:
        with box:
            _box(session, on_edit)
    edited = sorted(session.steps.edited_positions)
    probs = previews(session)[1] if sampling and edited else None  # the edit's callback's
    if probs is not None:  # at T > 0 an edit decides nothing: say so
        st.warning(
            t(
                "st_edit_random",
                temp=session.config.temperature,
                n=len(edited),
                probs=", ".join(f"a{k} = {fmt_sig(probs[k - 1])}" for k in edited),
            )
        )


def _box(session: Session, on_edit: Callable[[str], None]) -> None:
    """The open edit box: the position, a token of ``q``'s or ``p``'s top ones, a typed
    token, and the two quick edits."""
    sampling = not session.config.sampling.greedy
    st.caption(t("st_edit_help"))
    gamma = len(session.steps.drafts)
    preview = previews(session)[0]  # computed by the click's callback already
    e1, e2, e3 = st.columns([1, 3, 2])
    pos = e1.selectbox(t("edit_position"), list(range(1, gamma + 1)), key="edit_pos")
    dists = session.steps.current_draft_dists
    options: dict[int, str] = {}
    for tok in dists[pos - 1].tokens[:6]:
        options.setdefault(tok.id, f"{visible_token(tok)}  (q)")
    for tok in preview[pos - 1]:
        options.setdefault(tok.id, f"{visible_token(tok)}  (p)")
    e2.selectbox(t("edit_choose"), list(options), format_func=options.get, key="edit_choice")
    e2.button(t("edit_apply"), on_click=on_edit, args=("choice",))
    e3.text_input(t("edit_text"), key="edit_text", max_chars=SHORT_CHARS)
    e3.button(t("edit_apply_text"), on_click=on_edit, args=("text",))
    # sized to their labels in one wrapping row: a label is never cut with "…"
    quick = st.container(horizontal=True, gap="small", key="edit_quick")
    quick.button(t("edit_wrong", k=pos), on_click=on_edit, args=("wrong",))
    quick.button(t("edit_agree"), on_click=on_edit, args=("agree",))
    # what the two quick edits do now: the names hold at any T, the outcome does not
    if sampling:
        st.caption(t("edit_quick_sampling", temp=session.config.temperature))
    else:
        st.caption(t("edit_quick_greedy"))
