"""Option labels in the reader's language: each option widget's choices (pair, grammar, γ
schedule, draft method, drafter), their labels (strings ``opt_<kind>_<name>``) and how a
language switch keeps every choice (:func:`keep_choices`: the widgets registered with
:func:`~specdec_core.ui.i18n.follows_language`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import streamlit as st

from specdec_core.core.grammar import GRAMMAR_PRESETS
from specdec_core.core.settings import GAMMA_SCHEDULES, VERIFICATIONS, DraftMethod
from specdec_core.drafters.registry import DRAFTER_NAMES
from specdec_core.ui.i18n import LANG_KEYED, strings, t, tr

PAIR_LABELS = {  # short enough for the sidebar's box (a select box cannot wrap its value)
    "gpt2": "gpt2 124M ← distilgpt2 82M",
    "gpt2-medium": "gpt2-medium 355M ← gpt2",
    "gpt2-large": "gpt2-large 774M ← gpt2",
    "gpt2-xl": "gpt2-xl 1.5B ← gpt2",
}
METHODS: tuple[str, ...] = get_args(DraftMethod)
#: English labels of the drafters (the sidebar's box has no wrap: a test measures them).
DRAFTER_LABELS = {name: tr(f"opt_drafter_{name}", "en") for name in DRAFTER_NAMES}
CONFIDENCE_RANGE = (0.01, 0.99)  # the slider's ends: SessionConfig wants the open (0, 1)
#: The grammar choices: none, the presets (``core/grammar.GRAMMAR_PRESETS``), custom text.
CUSTOM_GRAMMARS = ("regex", "json_schema")
GRAMMARS = ("none", *GRAMMAR_PRESETS, *CUSTOM_GRAMMARS)
#: The options of each kind of label.
OPTIONS = {
    "pair": ("embedded", "embedded-zh", *PAIR_LABELS),
    "grammar": GRAMMARS,
    "schedule": GAMMA_SCHEDULES,
    "method": METHODS,
    "drafter": DRAFTER_NAMES,
    "verification": VERIFICATIONS,
}


def option_label(kind: str, name: str) -> str:
    """An option's label in the current language (a pair without one: its fixed label)."""
    key = f"opt_{kind}_{name}"
    return t(key) if key in strings() else PAIR_LABELS.get(name, name)


def labels(kind: str) -> Callable[[str], str]:
    """A widget's ``format_func``: the labels fixed in this run's language (Streamlit may
    format an option outside the run, where the session's language is not at hand)."""
    table = {name: option_label(kind, name) for name in OPTIONS[kind]}
    return lambda name: table.get(name, name)


def keep_choices() -> None:
    """After a language switch the browser still holds each option widget's old label:
    put the values back by key (read with the old labels), so no choice is lost. The
    widgets are those drawn with ``key=follows_language(...)``."""
    state = st.session_state
    for key in sorted(state.get(LANG_KEYED, ())):
        if key in state:
            state[key] = state[key]
