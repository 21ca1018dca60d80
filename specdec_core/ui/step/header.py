"""The step page's header: the title, the introduction of the shape on screen (chain or
tree, for the drafter in the sidebar), the prompt box, and the replay of a pending lesson
(a lesson link, a scenario, step back) with the sidebar's settings. Drawing only."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import TREE_DRAFTERS
from specdec_core.ui.guards import PROMPT_CHARS, prompt_limit_note
from specdec_core.ui.i18n import strings, t
from specdec_core.ui.pair_text import default_prompt, follow_pair
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links
from specdec_core.ui.step import tree_lesson as TL

Heading = Callable[[str], None]
INTRO_MODE = "st_intro_mode"  # the mode the page's introduction was written for


def heading_for(presenter: bool) -> Heading:
    """A section heading: bold text in presenter mode (headings cost height on a
    projector), else a subheader."""
    if presenter:
        return lambda text: st.markdown(f"**{text}**")
    return st.subheader


def page_intro(drafter: str) -> str:
    """The step page's introduction for the shape on screen: the chain's (``st_intro`` with
    the drafter's ``st_intro_how_*``) or the tree's (``tree_page_intro`` with the
    drafter's ``tree_intro_how_*``, ``none`` for a drafter that drafts no tree). Records
    the mode it was written for (:data:`INTRO_MODE`), so the step panel can redraw the
    page when a switch inside its fragment changes it."""
    mode = TL.mode()
    st.session_state[INTRO_MODE] = mode
    if mode == "tree":
        how = drafter if drafter in TREE_DRAFTERS else "none"
        return t("tree_page_intro", how=t("tree_intro_how_" + how))
    key = "st_intro_how_" + drafter
    return t("st_intro", how=t(key if key in strings() else "st_intro_how_model"))


def draw(pair: ModelPair, config: SessionConfig, presenter: bool) -> None:
    """The title and introduction (presenter mode: the title only), then the prompt box;
    a pending lesson is replayed first (under the engine lock: not while a click runs)."""
    intro = page_intro(st.session_state.get("cfg_drafter", "model"))
    if presenter:  # the projector gets the lesson, not the introduction
        st.markdown(f"### {t('st_title')}")
    else:
        st.title(t("st_title"))
        st.markdown(intro)
    with L.engine() as held:  # the replay replaces the session: not while a click runs
        if held:
            links.apply_pending(pair, config, default_prompt(pair.name))
    L.seed_prompt(default_prompt(pair.name))
    follow_pair(L.PROMPT_KEY, pair.name)
    st.text_area(
        t("st_prompt"), key=L.PROMPT_KEY, height=68 if presenter else 80, max_chars=PROMPT_CHARS
    )
    if not presenter:  # Streamlit drops a paste past max_chars in the browser, unseen here
        note = t("st_prompt_note") if pair.name == "embedded" else ""
        st.caption(f"{prompt_limit_note()} {note}".strip())
