"""The shared sidebar: language, model pair, device and decoding settings.

Stores the loaded pair and a :class:`SessionConfig` in ``st.session_state`` (``pair``,
``config``, ``pair_reason``) for every page.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import (
    GRAMMAR_PRESETS,
    MAX_GRAMMAR_CHARS,
    GrammarSpec,
    GrammarState,
    compile_grammar,
)
from specdec_core.core.models import ModelLoadError, ModelPair, default_pair_name
from specdec_core.core.penalties import (
    FREQUENCY_PENALTY_RANGE,
    MAX_NGRAM_SIZE,
    PRESENCE_PENALTY_RANGE,
    REPETITION_PENALTY_RANGE,
)
from specdec_core.core.settings import MAX_GAMMA, SessionConfig
from specdec_core.drafters import drafters_for
from specdec_core.drafters.registry import preset_max_gamma
from specdec_core.server.pairs import offered_pairs
from specdec_core.ui import grammar_client
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.i18n import LANG_KEYED, LANGUAGES, strings, t, tr
from specdec_core.ui.loader import get_pair
from specdec_core.ui.problems import note_dropped

UI_MAX_GAMMA = min(8, MAX_GAMMA)
grammar_client.install()  # the grammar compile budget asks which client is compiling
#: Refusals that pass (the server or the client's budget is busy): not kept as a verdict.
PASSING_GRAMMAR_ERRORS = ("grammar_busy", "grammar_rate", "grammar_child")
# Option labels are in the reader's language only (strings ``opt_<kind>_<name>``); a
# language switch puts each option widget's value back by key (:func:`_keep_choices`).
PAIR_LABELS = {  # short enough for the sidebar's box (a select box cannot wrap its value)
    "gpt2": "gpt2 124M ← distilgpt2 82M",
    "gpt2-medium": "gpt2-medium 355M ← gpt2",
    "gpt2-large": "gpt2-large 774M ← gpt2",
    "gpt2-xl": "gpt2-xl 1.5B ← gpt2",
}
METHODS = ("probabilistic", "greedy")
DRAFTERS = ("model", "ngram", "early-exit", "eagle", "mtp", "block")
#: English labels of the drafters (the sidebar's box has no wrap: a test measures them).
DRAFTER_LABELS = {name: tr(f"opt_drafter_{name}", "en") for name in DRAFTERS}
#: The γ schedules (core/inputs.GAMMA_SCHEDULES, engine/schedule.py).
GAMMA_SCHEDULES = ("constant", "heuristic", "confidence")
CONFIDENCE_RANGE = (0.01, 0.99)  # the slider's ends: SessionConfig wants the open (0, 1)
#: The grammar choices: none, the presets (core/processors.GRAMMAR_PRESETS), custom text.
GRAMMARS = ("none", "speaker_line", "short_answer", "json_person", "regex", "json_schema")
#: The options of each kind of label.
OPTIONS = {
    "pair": ("embedded", *PAIR_LABELS),
    "grammar": GRAMMARS,
    "schedule": GAMMA_SCHEDULES,
    "method": METHODS,
    "drafter": DRAFTERS,
}
#: Option widgets whose labels follow the language: widget key → label kind.
OPTION_WIDGETS = {
    "pair_name": "pair",
    "cfg_grammar": "grammar",
    "cfg_gamma_schedule": "schedule",
    "cfg_method": "method",
    "cfg_drafter": "drafter",
    "rl_st_gr_preset": "grammar",  # the rule lab's grammar presets
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


def _keep_choices() -> None:
    """After a language switch the browser still holds each option widget's old label:
    put the values back by key (read with the old labels), so no choice is lost."""
    state = st.session_state
    for key in (*OPTION_WIDGETS, *sorted(state.get(LANG_KEYED, ()))):
        if key in state:
            state[key] = state[key]


CUSTOM_GRAMMARS = ("regex", "json_schema")
#: The penalty number boxes: widget key, string key (and ``<key>_help``), range, step.
PENALTY_WIDGETS = (
    ("cfg_rep_penalty", "sb_rep_penalty", REPETITION_PENALTY_RANGE, 0.05),
    ("cfg_freq_penalty", "sb_freq_penalty", FREQUENCY_PENALTY_RANGE, 0.1),
    ("cfg_pres_penalty", "sb_pres_penalty", PRESENCE_PENALTY_RANGE, 0.1),
    ("cfg_no_repeat_ngram", "sb_no_repeat_ngram", (0, MAX_NGRAM_SIZE), 1),
)
GRAMMAR_CHECKED = "grammar_checked"  # {(pair, kind, source): ConfigError | None}, bounded
GRAMMAR_OK = "grammar_ok"  # (pair name, the last grammar on screen that compiled)
GRAMMAR_ERROR = "grammar_error"  # the error of the grammar on screen, for the sidebar


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


def _chosen_by_user() -> None:
    st.session_state["pair_reason"] = "user_choice"
    st.session_state.pop("pair_notice", None)


def grammar_on_screen() -> GrammarSpec | None:
    """The grammar the sidebar's widgets name (a preset, or the custom text), unchecked."""
    get = st.session_state.get
    choice = get("cfg_grammar", "none")
    if choice in GRAMMAR_PRESETS:
        return GrammarSpec(*GRAMMAR_PRESETS[choice])
    if choice in CUSTOM_GRAMMARS:
        return GrammarSpec(choice, str(get("cfg_grammar_text", "")))
    return None


def grammar_choice(spec: GrammarSpec | None) -> tuple[str, str | None]:
    """The widget values that show ``spec``: ``(choice, custom text or None)``."""
    if spec is None:
        return "none", None
    for name, (kind, source) in GRAMMAR_PRESETS.items():
        if (kind, source) == (spec.kind, spec.source):
            return name, None
    return spec.kind, spec.source


def check_grammar(pair: ModelPair, spec: GrammarSpec) -> ConfigError | None:
    """Whether ``spec`` compiles for ``pair`` and allows a first token (the verdict is
    kept per session, so a grammar is compiled once, not on every rerun)."""
    checked: dict = st.session_state.setdefault(GRAMMAR_CHECKED, {})
    key = (pair.name, spec.kind, spec.source)
    if key not in checked:
        try:
            GrammarState(compile_grammar(pair.tokenizer, pair.vocab_size, spec), pair.vocab_size)
            checked[key] = None
        except ConfigError as exc:
            if exc.code in PASSING_GRAMMAR_ERRORS:
                return exc
            checked[key] = exc
        while len(checked) > 16:  # the oldest verdict goes first
            del checked[next(iter(checked))]
    return checked[key]


def chosen_grammar(pair: ModelPair) -> GrammarSpec | None:
    """The grammar the session gets: the one on screen if it compiles, else the last one
    that did (the session is left unchanged; the sidebar shows the error)."""
    S = st.session_state
    spec = grammar_on_screen()
    error = None if spec is None else check_grammar(pair, spec)
    if error is None:
        S[GRAMMAR_OK] = (pair.name, spec)
        S.pop(GRAMMAR_ERROR, None)
        return spec
    S[GRAMMAR_ERROR] = error
    name, kept = S.get(GRAMMAR_OK, (pair.name, None))
    return kept if name == pair.name else None


def gamma_limit(pair: ModelPair) -> int:
    """The γ slider's maximum: :data:`UI_MAX_GAMMA`, or less when the step page's draft
    source (``cfg_drafter``) proposes at most that many tokens per round (the MTP heads:
    ``K``; read from the shipped config by :func:`drafters.registry.preset_max_gamma`, nothing
    loaded), so choosing MTP with γ 8 lowers γ instead of opening a page that refuses."""
    cap = preset_max_gamma(pair.name, st.session_state.get("cfg_drafter", "model"))
    return UI_MAX_GAMMA if cap is None else max(1, min(UI_MAX_GAMMA, cap))


def current_config(pair: ModelPair) -> SessionConfig:
    """The settings the sidebar widgets hold now (also inside a button callback, where a
    number typed without Enter has already reached session state). A grammar that does
    not compile is not taken (:func:`chosen_grammar`)."""
    get = st.session_state.get
    return SessionConfig(
        gamma=int(get("cfg_gamma", 4)),
        temperature=float(get("cfg_temperature", 0.0)),
        top_k=int(get("cfg_top_k", 0)),
        top_p=float(get("cfg_top_p", 1.0)),
        draft_method=get("cfg_method", "probabilistic"),
        seed=int(get("cfg_seed", 0)),
        max_new_tokens=int(get("cfg_max_new", min(80, pair.context_length - 1))),
        repetition_penalty=float(get("cfg_rep_penalty", 1.0)),
        frequency_penalty=float(get("cfg_freq_penalty", 0.0)),
        presence_penalty=float(get("cfg_pres_penalty", 0.0)),
        no_repeat_ngram_size=int(get("cfg_no_repeat_ngram", 0)),
        grammar=chosen_grammar(pair),
        gamma_schedule=get("cfg_gamma_schedule", "constant"),
        confidence=float(get("cfg_confidence", 0.4)),
    )


def _fill_custom() -> None:
    """Switched to a custom grammar with an empty box: start from an example (the speaker
    line or the JSON person), never from an empty grammar's error."""
    S = st.session_state
    choice = S.get("cfg_grammar")
    if choice in CUSTOM_GRAMMARS and not str(S.get("cfg_grammar_text", "")).strip():
        example = "speaker_line" if choice == "regex" else "json_person"
        S["cfg_grammar_text"] = GRAMMAR_PRESETS[example][1]


def _processors(pair: ModelPair) -> None:
    """The expander of history-dependent logits processors (core/processors.py)."""
    get = st.session_state.get
    active = (
        get("cfg_rep_penalty", 1.0) != 1.0
        or get("cfg_freq_penalty", 0.0) != 0.0
        or get("cfg_pres_penalty", 0.0) != 0.0
        or get("cfg_no_repeat_ngram", 0) > 0
        or get("cfg_grammar", "none") != "none"
    )
    box = st.sidebar.expander(t("sb_processors"), expanded=active)
    box.caption(t("sb_processors_help"))
    for key, label, (low, high), step in PENALTY_WIDGETS:
        number = isinstance(low, int)  # the n-gram size: a whole number
        box.number_input(
            t(label),
            low,
            high,
            0 if number else (1.0 if key == "cfg_rep_penalty" else 0.0),
            step,
            None if number else "%.2f",
            key=key,
            help=t(label + "_help"),
        )
    choice = box.selectbox(
        t("sb_grammar"),
        list(GRAMMARS),
        key="cfg_grammar",
        format_func=labels("grammar"),
        on_change=_fill_custom,
        help=t("sb_grammar_help"),
    )
    if choice in GRAMMAR_PRESETS:
        kind, source = GRAMMAR_PRESETS[choice]
        box.caption(t("sb_grammar_kind_" + kind))
        box.code(source, language=None, wrap_lines=True)
    elif choice in CUSTOM_GRAMMARS:
        box.text_area(
            t("sb_grammar_text_" + choice),
            key="cfg_grammar_text",
            max_chars=MAX_GRAMMAR_CHARS,
            height=100,
        )
    error = get(GRAMMAR_ERROR)
    if error is not None:
        box.error(error_message(error))


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
    sb.radio(
        t("sidebar_language"),
        list(LANGUAGES),
        format_func=LANGUAGES.get,
        key="lang",
        horizontal=True,
        on_change=_keep_choices,
    )
    if "pair_name" not in st.session_state:
        name, reason = default_pair_name()
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
        key="pair_name",
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
    if st.session_state.get("cfg_gamma", 4) > high:  # before the slider is drawn
        st.session_state["cfg_gamma"] = high
    sb.slider(t("gamma"), 1, high, min(4, high), key="cfg_gamma", help=t("gamma_help"))
    if high < UI_MAX_GAMMA:
        sb.caption(t("sb_gamma_capped", cap=high))
    schedule = sb.selectbox(
        t("sb_gamma_schedule"),
        list(GAMMA_SCHEDULES),
        key="cfg_gamma_schedule",
        format_func=labels("schedule"),
        help=t("sb_gamma_schedule_help"),
    )
    if schedule == "confidence":
        sb.slider(
            t("sb_confidence"),
            *CONFIDENCE_RANGE,
            0.4,
            0.01,
            key="cfg_confidence",
            help=t("sb_confidence_help"),
        )
    sb.slider(
        t("temperature"), 0.0, 2.0, 0.0, 0.05, key="cfg_temperature", help=t("temperature_help")
    )
    sb.number_input(t("top_k"), 0, pair.vocab_size, 0, 1, key="cfg_top_k")
    sb.slider(t("top_p"), 0.05, 1.0, 1.0, 0.05, key="cfg_top_p")
    sb.radio(
        t("draft_method"),
        list(METHODS),
        key="cfg_method",
        format_func=labels("method"),
        help=t("draft_method_help"),
    )
    sb.selectbox(
        t("sb_drafter"),
        [n for n in DRAFTERS if n in drafters_for(pair)],
        key="cfg_drafter",
        format_func=labels("drafter"),
        help=t("sb_drafter_help"),
    )
    sb.number_input(t("seed"), 0, 2**31 - 1, 0, 1, key="cfg_seed")
    sb.number_input(
        t("max_new_tokens"),
        1,
        pair.context_length - 1,
        min(80, pair.context_length - 1),
        1,
        key="cfg_max_new",
        help=t("max_new_tokens_help"),
    )
    config = current_config(pair)  # checks the grammar before its expander is drawn
    _processors(pair)
    st.session_state["pair"] = pair
    st.session_state["config"] = config
    return pair, config
