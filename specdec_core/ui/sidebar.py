"""The shared sidebar: language, model pair, device and decoding settings.

Stores the loaded pair and a :class:`SessionConfig` in ``st.session_state`` (``pair``,
``config``, ``pair_reason``) for every page.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from specdec_core.core.errors import ModelLoadError
from specdec_core.core.models import ModelPair, default_pair_name
from specdec_core.core.settings import GAMMA_SCHEDULES, MAX_GAMMA, VERIFICATIONS, SessionConfig
from specdec_core.drafters.registry import DRAFTER_NAMES, drafters_for, preset_max_gamma
from specdec_core.server.pairs import offered_pairs
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.i18n import LANGUAGES, follows_language, t
from specdec_core.ui.loader import get_pair
from specdec_core.ui.option_labels import (
    CONFIDENCE_RANGE,
    METHODS,
    keep_choices,
    labels,
)
from specdec_core.ui.problems import note_dropped
from specdec_core.ui.sidebar_processors import (
    chosen_grammar,
    grammar_choice,
    processors_expander,
)

UI_MAX_GAMMA = min(8, MAX_GAMMA)


def _load_current() -> ModelPair:
    """Load the selected pair; if it cannot be loaded (offline hub, missing weights), switch
    the selection back to the embedded pair (before the widget is drawn) with a notice."""
    state = st.session_state
    with st.spinner(t("loading_models")):
        try:
            return get_pair(state["pair_name"])
        except ModelLoadError as exc:
            if state["pair_name"] == "embedded":
                raise
            # kept as parts and rendered on each run, so it follows a language switch
            state["pair_notice"] = (state["pair_name"], exc.code, str(exc).rstrip("."))
            state["pair_name"], state["pair_reason"] = "embedded", "fallback"
            return get_pair("embedded")


def _fit_to_pair(pair: ModelPair) -> None:
    """Reset the values this pair's number boxes cannot hold (top-k over the vocabulary,
    max new tokens over the context) before they are drawn: after a switch from a larger
    pair or from a lesson link; the page says what was reset."""
    state = st.session_state
    if state.get("cfg_top_k", 0) > pair.vocab_size:
        state["cfg_top_k"] = 0
        note_dropped("top_k")
    if state.get("cfg_max_new", 0) > pair.context_length - 1:
        state["cfg_max_new"] = min(80, pair.context_length - 1)
        note_dropped("max_new_tokens")
    if state.get("cfg_drafter", "model") not in drafters_for(pair):  # eagle needs a head
        state["cfg_drafter"] = "model"
        note_dropped("drafter")
    low, high = CONFIDENCE_RANGE  # a link may carry a threshold the slider cannot show
    if not low <= state.get("cfg_confidence", 0.4) <= high:
        state["cfg_confidence"] = 0.4
        note_dropped("confidence")


BROWSER_ZH = "lang_from_browser"  # the session's language came from a Chinese browser


def adopt_browser_language() -> None:
    """A session's first run: when nothing set the language (no link, no choice), take the
    browser's (``zh*`` → ``zh``). ``app.py`` calls it before the page titles are made."""
    S = st.session_state
    if "lang" not in S and (st.context.locale or "").lower().startswith("zh"):
        S["lang"], S[BROWSER_ZH] = "zh", True


def first_screen_language() -> str:
    """The language a first visit's screen asked for, before any choice in the app: the
    URL's ``?lang=`` (a bare link), else the browser's (:func:`adopt_browser_language`),
    else ``en``. Only a Chinese *screen* opens the Chinese pair: a language chosen in the
    app keeps the pair."""
    asked = st.query_params.get("lang", "")
    if asked in LANGUAGES:
        return asked
    return "zh" if st.session_state.get(BROWSER_ZH) else "en"


def _chosen_by_user() -> None:
    st.session_state["pair_reason"] = "user_choice"
    st.session_state.pop("pair_notice", None)


def gamma_limit(pair: ModelPair) -> int:
    """The γ slider's maximum: :data:`UI_MAX_GAMMA`, or less when the step page's draft
    source (``cfg_drafter``) proposes at most that many tokens per round (the MTP heads:
    ``K``; read from the shipped config by :func:`drafters.registry.preset_max_gamma`, nothing
    loaded), so choosing MTP with γ 8 lowers γ instead of opening a page that refuses."""
    cap = preset_max_gamma(pair.name, st.session_state.get("cfg_drafter", "model"))
    return UI_MAX_GAMMA if cap is None else max(1, min(UI_MAX_GAMMA, cap))


#: The session settings the sidebar's widgets hold: setting name → widget key (the grammar
#: has two widgets of its own, :mod:`~specdec_core.ui.sidebar_processors`). The one table
#: of both directions: :func:`seed_settings` (a lesson link's settings) writes these keys,
#: :func:`current_config` reads them back.
SETTING_WIDGETS = {
    "gamma": "cfg_gamma",
    "temperature": "cfg_temperature",
    "top_k": "cfg_top_k",
    "top_p": "cfg_top_p",
    "draft_method": "cfg_method",
    "seed": "cfg_seed",
    "max_new_tokens": "cfg_max_new",
    "repetition_penalty": "cfg_rep_penalty",
    "frequency_penalty": "cfg_freq_penalty",
    "presence_penalty": "cfg_pres_penalty",
    "no_repeat_ngram_size": "cfg_no_repeat_ngram",
    "gamma_schedule": "cfg_gamma_schedule",
    "confidence": "cfg_confidence",
    "verification": "cfg_verification",
}


def seed_settings(config: SessionConfig) -> None:
    """Put ``config`` into the sidebar's widget keys, before they are drawn (the inverse of
    :func:`current_config`: the widgets then report ``config``, less what this pair's
    widgets cannot hold, which :func:`render_sidebar` resets with a message). The grammar
    widgets are left alone when the sidebar reports ``config``'s grammar already: a
    refused grammar typed there (shown with its error while the session keeps the last
    one that compiled) survives a step back."""
    S = st.session_state
    for name, key in SETTING_WIDGETS.items():
        S[key] = getattr(config, name)
    reported = S.get("config")
    if reported is not None and reported.grammar == config.grammar:
        return
    choice, text = grammar_choice(config.grammar)  # a preset, or the custom text
    S["cfg_grammar"] = choice
    if text is not None:
        S["cfg_grammar_text"] = text


def current_config(pair: ModelPair) -> SessionConfig:
    """The settings the sidebar widgets hold now (also inside a button callback, where a
    number typed without Enter has already reached session state); a widget not drawn yet
    gives :class:`SessionConfig`'s default (max new tokens: 80 or the context's room). A
    grammar that does not compile is not taken (:func:`chosen_grammar`)."""
    get = st.session_state.get
    default = replace(SessionConfig(), max_new_tokens=min(80, pair.context_length - 1))
    values: dict = {}
    for name, key in SETTING_WIDGETS.items():
        fallback = getattr(default, name)
        value = get(key, fallback)
        values[name] = value if isinstance(fallback, str) else type(fallback)(value)
    return SessionConfig(**values, grammar=chosen_grammar(pair))


def presenter_on() -> bool:
    """Presenter mode (larger type, sidebar collapsed, controls kept in view). Read from
    ``?presenter=1`` once per session (so lesson links can carry it), then the toggle."""
    state = st.session_state
    if "presenter" not in state:
        raw = st.query_params.get("presenter", "")
        state["presenter"] = raw.strip().lower() in ("1", "true", "yes", "on")
    return bool(state["presenter"])


def render_sidebar() -> tuple[ModelPair, SessionConfig]:
    """Draw the sidebar; return the loaded pair and the chosen settings."""
    sb = st.sidebar
    first = first_screen_language() if "pair_name" not in st.session_state else None
    sb.radio(
        t("sidebar_language"),
        list(LANGUAGES),
        format_func=LANGUAGES.get,
        key="lang",
        horizontal=True,
        on_change=keep_choices,
    )
    if "pair_name" not in st.session_state:
        name, reason = default_pair_name(first or "en")
        if name not in offered_pairs():
            name, reason = "embedded", "gpt2_not_cached"
        st.session_state["pair_name"], st.session_state["pair_reason"] = name, reason
    try:
        pair = _load_current()
        _fit_to_pair(pair)
    except ModelLoadError as exc:
        st.error(error_message(exc))
        st.stop()
    names = offered_pairs()
    sb.selectbox(
        t("sidebar_pair"),
        names,
        key=follows_language("pair_name"),
        format_func=labels("pair"),
        help=t("sidebar_pair_help"),
        on_change=_chosen_by_user,
    )
    if "pair_notice" in st.session_state:
        failed, code, message = st.session_state["pair_notice"]
        reason = t("err_" + code) if code in ("hub_unreachable", "not_offered") else plain(message)
        sb.warning(t("pair_fallback", name=failed, error=reason))
    sb.caption(
        t(
            "loaded_pair",
            name=pair.name,
            device=pair.device_label(),
            vocab=pair.vocab_size,
            context=pair.context_length,
        )
        + " — "
        + t("why_" + st.session_state.get("pair_reason", "user_choice"))
    )
    sb.toggle(t("presenter_mode"), key="presenter", help=t("presenter_mode_help"))
    sb.subheader(t("sidebar_settings"))
    high = gamma_limit(pair)  # the step page's source may propose fewer (MTP heads: K)
    # the value lives in session state only (a default beside a value set through
    # session state makes Streamlit warn): 4 at first, cut to the limit before drawing
    gamma = st.session_state.setdefault("cfg_gamma", min(4, high))
    if gamma > high:
        st.session_state["cfg_gamma"] = high
    sb.slider(t("gamma"), 1, high, key="cfg_gamma", help=t("gamma_help"))
    if high < UI_MAX_GAMMA:
        sb.caption(t("sb_gamma_capped", cap=high))
    schedule = sb.selectbox(
        t("sb_gamma_schedule"),
        list(GAMMA_SCHEDULES),
        key=follows_language("cfg_gamma_schedule"),
        format_func=labels("schedule"),
        help=t("sb_gamma_schedule_help"),
    )
    if schedule == "confidence":
        st.session_state.setdefault("cfg_confidence", 0.4)
        sb.slider(
            t("sb_confidence"),
            *CONFIDENCE_RANGE,
            step=0.01,
            key="cfg_confidence",
            help=t("sb_confidence_help"),
        )
    # values in session state only, like γ: a link seeds them before the widgets exist
    for key, first in (("cfg_temperature", 0.0), ("cfg_top_k", 0), ("cfg_top_p", 1.0)):
        st.session_state.setdefault(key, first)
    for key, first in (("cfg_seed", 0), ("cfg_max_new", min(80, pair.context_length - 1))):
        st.session_state.setdefault(key, first)
    for key, high in (("cfg_top_k", pair.vocab_size), ("cfg_max_new", pair.context_length - 1)):
        st.session_state[key] = min(st.session_state[key], high)  # another pair's limit
    sb.slider(
        t("temperature"), 0.0, 2.0, step=0.05, key="cfg_temperature", help=t("temperature_help")
    )
    sb.number_input(t("top_k"), 0, pair.vocab_size, step=1, key="cfg_top_k")
    sb.slider(t("top_p"), 0.05, 1.0, step=0.05, key="cfg_top_p")
    sb.radio(
        t("draft_method"),
        list(METHODS),
        key=follows_language("cfg_method"),
        format_func=labels("method"),
        help=t("draft_method_help"),
    )
    sb.radio(
        t("sb_verification"),
        list(VERIFICATIONS),
        key=follows_language("cfg_verification"),
        format_func=labels("verification"),
        help=t("sb_verification_help"),
        horizontal=True,
    )
    sb.selectbox(
        t("sb_drafter"),
        [n for n in DRAFTER_NAMES if n in drafters_for(pair)],
        key=follows_language("cfg_drafter"),
        format_func=labels("drafter"),
        help=t("sb_drafter_help"),
    )
    sb.number_input(t("seed"), 0, 2**31 - 1, step=1, key="cfg_seed")
    sb.number_input(
        t("max_new_tokens"),
        1,
        pair.context_length - 1,
        step=1,
        key="cfg_max_new",
        help=t("max_new_tokens_help"),
    )
    config = current_config(pair)  # checks the grammar before its expander is drawn
    processors_expander()
    st.session_state["pair"] = pair
    st.session_state["config"] = config
    return pair, config
