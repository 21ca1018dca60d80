"""The sidebar's history-dependent logits processors (``core/processors.py``): the penalty
number boxes, the grammar choice (a preset or custom text) and its compile check, kept per
session so a grammar compiles once, not on every rerun; a grammar that does not compile is
shown as an error and the last one that did is kept."""

from __future__ import annotations

import streamlit as st

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import (
    GRAMMAR_PRESETS,
    MAX_GRAMMAR_CHARS,
    GrammarSpec,
    GrammarState,
    compile_grammar,
)
from specdec_core.core.models import ModelPair
from specdec_core.core.penalties import (
    FREQUENCY_PENALTY_RANGE,
    MAX_NGRAM_SIZE,
    PRESENCE_PENALTY_RANGE,
    REPETITION_PENALTY_RANGE,
)
from specdec_core.ui import grammar_client
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import follows_language, t
from specdec_core.ui.option_labels import CUSTOM_GRAMMARS, GRAMMARS, labels

grammar_client.install()  # the grammar compile budget asks which client is compiling
#: Refusals that pass (the server or the client's budget is busy): not kept as a verdict.
PASSING_GRAMMAR_ERRORS = ("grammar_busy", "grammar_rate", "grammar_child")
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


def fill_custom() -> None:
    """Switched to a custom grammar with an empty box: start from an example (the speaker
    line or the JSON person), never from an empty grammar's error."""
    S = st.session_state
    choice = S.get("cfg_grammar")
    if choice in CUSTOM_GRAMMARS and not str(S.get("cfg_grammar_text", "")).strip():
        example = "speaker_line" if choice == "regex" else "json_person"
        S["cfg_grammar_text"] = GRAMMAR_PRESETS[example][1]


def processors_expander() -> None:
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
        # the value in session state only (a link seeds it before the widget exists)
        st.session_state.setdefault(
            key, 0 if number else (1.0 if key == "cfg_rep_penalty" else 0.0)
        )
        box.number_input(
            t(label),
            low,
            high,
            step=step,
            format=None if number else "%.2f",
            key=key,
            help=t(label + "_help"),
        )
    choice = box.selectbox(
        t("sb_grammar"),
        list(GRAMMARS),
        key=follows_language("cfg_grammar"),
        format_func=labels("grammar"),
        on_change=fill_custom,
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
