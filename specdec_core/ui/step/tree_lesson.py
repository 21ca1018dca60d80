"""The step-through page's tree mode: the mode and shape widgets, the tree's refusal, the
hand-over from the tree back to the chain, and the mode control's callbacks. The tree's
lesson is kept in the one lesson store of both shapes (:mod:`specdec_core.ui.step.lesson`:
``L.current("tree")``, ``L.start(..., shape=...)``, ``L.sync`` with the tree's row of
``ui/step/shapes.SHAPES``, whose shape is :func:`shape`).

* The mode (``chain`` | ``tree``) and the tree shape are widgets on the step page; their
  values are also kept under other keys (Streamlit drops a widget's state when another
  page is shown) and put back by :func:`seed_widgets`.
* Entering tree mode starts a :class:`TreeSession` from the chain lesson's committed text
  with the chain's original prompt boundary (a round in flight is dropped, with a notice:
  ``L.enter``); leaving it continues the chain from the tree's committed text the same
  way (:func:`leave`).

The step buttons of both shapes are :mod:`specdec_core.ui.step.actions`.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.core.errors import SpecDecError
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.tree.generate import parse_shape, tree_refusal
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import t
from specdec_core.ui.sidebar import current_config
from specdec_core.ui.step import lesson as L

MODE_KEPT = "step_mode_kept"  # the mode (the segmented control's key is per language)
SHAPE_KEY = "tree_shape"  # the shape select box
SHAPE_KEPT = "tree_shape_kept"
MODES = ("chain", "tree")
SHAPES = ("2,2,1,1", "3,2,1", "2,2,2", "4,1,1,1")


def mode_key() -> str:
    """The mode control's widget key: one widget per language (Streamlit matches a
    widget's value by its formatted label, which the language changes)."""
    return f"step_mode_{st.session_state.get('lang', 'en')}"


def seed_widgets() -> None:
    """Put the kept mode and shape into their widget keys (before they are drawn)."""
    S = st.session_state
    S[mode_key()] = mode()
    if SHAPE_KEY not in S:
        S[SHAPE_KEY] = S.get(SHAPE_KEPT, SHAPES[0])


def shape_options() -> list[str]:
    """The shape box's options: :data:`SHAPES`, plus the kept shape when a lesson link
    brought another one (any shape within the engine's limits)."""
    kept = st.session_state.get(SHAPE_KEPT)
    return list(SHAPES) + ([kept] if isinstance(kept, str) and kept not in SHAPES else [])


def seed_link(tree: tuple[int, ...]) -> None:
    """From a lesson link, a step back or a replay: the mode its state names (``tree``:
    a shape, or ``()`` for the chain), put into the kept keys and the shape box."""
    S = st.session_state
    S[MODE_KEPT] = "tree" if tree else "chain"
    if tree:
        S[SHAPE_KEPT] = S[SHAPE_KEY] = ",".join(str(k) for k in tree)


def mode() -> str:
    value = st.session_state.get(MODE_KEPT, "chain")
    return value if value in MODES else "chain"


def shape() -> tuple[int, ...]:
    """The shape chosen on the page (raises ``ConfigError`` for a value that is not one)."""
    value = st.session_state.get(SHAPE_KEY, st.session_state.get(SHAPE_KEPT, SHAPES[0]))
    return parse_shape(str(value))


def tree_ready(drafter: str, config: SessionConfig) -> str | None:
    """``None`` when the sidebar's drafter and settings can draft a tree, else the
    engine's reason code (:func:`specdec_core.engine.tree.generate.tree_refusal`: prompt
    lookup; a greedy draft method at temperature > 0)."""
    return tree_refusal(drafter, config.draft_method, config.temperature)


def leave(pair: ModelPair, config: SessionConfig, prompt: str) -> str | None:
    """Back to the chain: the chain lesson continues from the tree's committed text (a
    tree round in flight is dropped). Returns a notice key (or ``None``). Raises
    ``SpecDecError``."""
    tree = L.current("tree")
    if tree is None or tree.pair_name != pair.name or tree.prompt != prompt:
        return None  # the chain's own sync handles the prompt on screen
    session = tree.session
    if session.stop_reason is not None:
        L.start(pair, config, prompt)
        return "chain_from_tree_restart"
    L.start(pair, config, prompt, list(session.ids), tree.prompt_len)
    if L.in_flight(session):
        return "chain_from_tree_dropped"
    return "chain_from_tree" if len(session.ids) > tree.prompt_len else None


# ------------------------------------------------------------------ callbacks
def _pair_config() -> tuple[ModelPair, SessionConfig]:
    pair = st.session_state["pair"]
    return pair, current_config(pair)


@L.one_at_a_time
def switch_mode() -> None:
    """``on_change`` of the mode control: hand the committed text over."""
    S = st.session_state
    new = S.get(mode_key())
    if new not in MODES:  # a segmented control can be deselected: keep the mode
        S[mode_key()] = mode()
        return
    old = mode()
    S[MODE_KEPT] = new
    if new == old:
        return
    pair, config = _pair_config()
    prompt = S.get(L.PROMPT_KEY, "")
    try:
        if new == "tree":
            S.pop(L.key("tree"), None)  # always from the chain's committed text
            if tree_ready(L.drafter_name(), config) is None:
                synced = L.enter(pair, config, prompt, shape())
                if synced.notice:
                    S["step_notice"] = t(synced.notice, **(synced.notice_args or {}))
        else:
            key = leave(pair, config, prompt)
            if key:
                S["step_notice"] = t(key)
    except SpecDecError as exc:
        S["step_error"] = error_message(exc)


def keep_shape() -> None:
    """``on_change`` of the shape box."""
    st.session_state[SHAPE_KEPT] = st.session_state.get(SHAPE_KEY, SHAPES[0])


@L.one_at_a_time
def use_chain() -> None:
    """The "use the chain" button (tree mode refused for this drafter)."""
    st.session_state[mode_key()] = "chain"
    st.session_state[MODE_KEPT] = "chain"
    st.session_state.pop(L.key("tree"), None)
