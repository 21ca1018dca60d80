"""Predict-then-reveal checkpoints: a question, an answer widget and a Check button.

A checkpoint takes an answer (an option, a number within a stated tolerance, or a click
on a token), says right or wrong with a one-line why, and only then lets the caller reveal
the live result. Answers live in the browser session (``st.session_state``; no accounts,
nothing stored on the server beyond the session) under :data:`ANSWERS`, keyed by the
checkpoint id, so they survive a language switch and a visit to another page. Widget keys
carry the language: a radio keeps its value as its label, which changes with the language.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import streamlit as st

from specdec_core.ui.i18n import lang, t

ANSWERS = "ls_answers"  # checkpoint id → {"value", "correct", "tries", "first"}
DRAWN = "ls_drawn"  # checkpoint id → the Check last drawn (a live class asks it)
Kind = Literal["choice", "number", "token"]


@dataclass(frozen=True)
class Check:
    """One checkpoint. ``answer``: the right option value (choice/token) or number;
    ``tol``: the accepted distance for numbers; ``options``: the values offered, shown
    through ``label``; ``why``: the one-line reason shown with the verdict."""

    cid: str
    kind: Kind
    question: str
    answer: object
    why: str
    tol: float = 0.0
    options: Sequence[object] = ()
    label: Callable[[object], str] = field(default=str)
    unit: str = ""


def choice(
    cid: str, question: str, answer: str, why: str, options: Sequence[str], labels: str
) -> Check:
    """A multiple-choice :class:`Check`: option ``s`` of ``options`` is shown as the string
    ``labels + s`` (e.g. ``labels="ls_c4_text_"``)."""
    return Check(
        cid, "choice", question, answer, why, options=options, label=lambda s: t(f"{labels}{s}")
    )


def answers() -> dict[str, dict]:
    return st.session_state.setdefault(ANSWERS, {})


def is_right(check: Check, value: object) -> bool:
    if check.kind == "number":
        return (
            value is not None
            and math.isfinite(float(value))
            and (
                abs(float(value) - float(check.answer)) <= check.tol + 1e-9  # type: ignore[arg-type]
            )
        )
    return value == check.answer


def widget_key(cid: str) -> str:
    return f"ls_in_{cid}_{lang()}"


def _submit(check: Check) -> None:
    value = st.session_state.get(widget_key(check.cid))
    if value is None:
        st.session_state[f"ls_empty_{check.cid}"] = True
        return
    st.session_state.pop(f"ls_empty_{check.cid}", None)
    old = answers().get(check.cid)
    right = is_right(check, value)
    answers()[check.cid] = {
        "value": value,
        "correct": right,
        "tries": (old["tries"] if old else 0) + 1,
        "first": old["first"] if old else right,
    }


def _fmt_number(x: float) -> str:
    return f"{x:g}" if abs(x) >= 1e-3 else f"{x:.2e}"


def shown_answer(check: Check) -> str:
    if check.kind == "number":
        return _fmt_number(float(check.answer)) + check.unit  # type: ignore[arg-type]
    return check.label(check.answer)


def ask(check: Check) -> bool:
    """Draw the checkpoint; ``True`` once it has been answered (then reveal)."""
    st.session_state.setdefault(DRAWN, {})[check.cid] = check
    with st.container(border=True, key=f"ls_box_{check.cid}"):
        st.markdown(f"**{t('ls_predict')}** {check.question}")
        key = widget_key(check.cid)
        labels = {o: check.label(o) for o in check.options}  # fixed now: the language of this run
        if check.kind == "number":
            st.caption(
                t("ls_tolerance", tol=_fmt_number(check.tol) + check.unit)
                if check.tol > 0
                else t("ls_exact")
            )
            st.number_input(
                t("ls_your_answer"),
                value=None,
                key=key,
                format="%g",
                step=None,
                placeholder=t("ls_type_number"),
            )
        elif check.kind == "token":
            st.caption(t("ls_click_token"))
            st.pills(
                t("ls_your_answer"),
                list(check.options),
                format_func=labels.__getitem__,
                key=key,
                label_visibility="collapsed",
            )
        else:
            st.radio(
                t("ls_your_answer"),
                list(check.options),
                format_func=labels.__getitem__,
                index=None,
                key=key,
            )
        st.button(t("ls_check"), key=f"ls_btn_{check.cid}", on_click=_submit, args=(check,))
        if st.session_state.get(f"ls_empty_{check.cid}"):
            st.warning(t("ls_no_answer"))
        done = answers().get(check.cid)
        if done is None:
            st.caption(t("ls_reveal_after"))
            return False
        if done["correct"] and not done["first"]:  # right only after the answer was shown
            st.success(f"✓ {t('ls_right_retry')} {check.why}")
        elif done["correct"]:
            st.success(f"✓ {t('ls_right')} {check.why}")
        else:
            st.error(f"✗ {t('ls_wrong', answer=shown_answer(check))} {check.why}")
        return True


def chapter_progress(cids: Sequence[str]) -> tuple[int, int, int]:
    """(answered, right now, right at the first try) of a chapter's checkpoints."""
    got = [answers()[c] for c in cids if c in answers()]
    return len(got), sum(a["correct"] for a in got), sum(a["first"] for a in got)


def progress_bar(cids: Sequence[str]) -> None:
    done, _, first = chapter_progress(cids)  # a retry after the reveal does not count
    st.progress(
        done / len(cids) if cids else 1.0,
        text=t("ls_progress", done=done, total=len(cids), right=first),
    )
