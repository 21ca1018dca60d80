"""The prompt boxes' text on the loaded pair: the pair's own default prompt
(:mod:`specdec_core.lessons.prompts`: a poem line on ``embedded-zh``) or the UI string's,
and the swap to the new pair's default when the pair changes under an untouched box."""

from __future__ import annotations

import streamlit as st

from specdec_core.lessons.prompts import BY_PAIR, prompts_for
from specdec_core.ui.i18n import LANGUAGES, tr

#: Which prompt → the UI string that holds it on a pair without its own.
DEFAULT_KEYS = {
    "default": "st_default_prompt",
    "speed": "sp_default_prompt",
    "drafters_repetitive": "dr_prompt_repetitive",
    "drafters_novel": "dr_prompt_novel",
}


def default_prompt(pair_name: str, which: str = "default") -> str:
    """The default prompt ``which`` (a key of :data:`DEFAULT_KEYS`: the step page's, the
    speed page's, the drafters page's presets) on the preset ``pair_name``: its own, else
    the UI string's (English text in both languages: the English pair reads English)."""
    own = getattr(prompts_for(pair_name), which)
    return own if own is not None else tr(DEFAULT_KEYS[which], "en")


def _defaults(which: str) -> set[str]:
    """Every pair's default for ``which``, in every language: the texts nobody typed."""
    ui = {tr(DEFAULT_KEYS[which], lang) for lang in LANGUAGES}
    own = {getattr(p, which) for p in BY_PAIR.values()}
    return (ui | own) - {None}


def follow_pair(widget_key: str, pair_name: str, which: str = "default") -> None:
    """Before the box ``widget_key`` is drawn: if it holds another pair's default prompt
    (the student has not typed), put ``pair_name``'s default there; a typed text stays."""
    S = st.session_state
    text = S.get(widget_key)
    wanted = default_prompt(pair_name, which)
    if text is not None and text != wanted and text in _defaults(which):
        S[widget_key] = wanted
