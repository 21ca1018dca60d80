"""The drafters page's inputs: the prompt presets and box, one card per draft source the
pair can run (its checkbox, its knob where it has one, its description), and the run
button with its progress bar. A card is looked up in :data:`CARDS` by the drafter's name
(a table, not a chain of tests); a drafter without a row gets a plain card."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.bench.compare import DrafterResult, compare_drafters
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.draft_vocab import describe
from specdec_core.drafters.eagle_head import load_eagle_head
from specdec_core.drafters.registry import (
    default_knob,
    drafters_for,
    make_named_drafter,
    runs_int8,
)
from specdec_core.ui.errors import error_message
from specdec_core.ui.guards import PROMPT_CHARS, prompt_ids, prompt_limit_note
from specdec_core.ui.i18n import follows_language, strings, t
from specdec_core.ui.pair_text import default_prompt, follow_pair

PRESETS = ("repetitive", "novel", "custom")
#: What a run is keyed by: (pair, settings, prompt, chosen sources, repeats).
RunKey = tuple


def label(pair: ModelPair, name: str, knob: int | None) -> str:
    """A source's name with its knob ("prompt lookup (n ≤ 3)"); ``target``: the target."""
    if name == "target":
        return t("dr_label_target")
    return t("dr_label_" + name, k=knob, n=pair.target.config.n_layer)


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _model(pair: ModelPair, use: bool) -> int | None:
    target, draft = pair.target, pair.draft
    st.caption(
        t(
            "dr_desc_model",
            layers=draft.config.n_layer,
            params=_params(draft),
            t_layers=target.config.n_layer,
            t_params=_params(target),
        )
    )
    draft_notes(pair, "model")
    return None


def _ngram(pair: ModelPair, use: bool) -> int | None:
    knob = st.select_slider(
        t("dr_knob_n"),
        options=[1, 2, 3],
        value=3,
        key="dr_knob_ngram",
        help=t("dr_knob_n_help"),
        disabled=not use,
    )
    st.caption(t("dr_desc_ngram"))
    return knob


def _early_exit(pair: ModelPair, use: bool) -> int | None:
    n_layers = pair.target.config.n_layer
    knob = st.select_slider(
        t("dr_knob_k"),
        options=list(range(1, n_layers + 1)),
        value=default_knob(pair, "early-exit"),
        key="dr_knob_early",
        help=t("dr_knob_k_help"),
        disabled=not use,
    )
    st.caption(t("dr_desc_early-exit", n=n_layers))
    return knob


def _eagle(pair: ModelPair, use: bool) -> int | None:
    st.caption(t("dr_desc_eagle", params=_params(load_eagle_head(pair))))
    draft_notes(pair, "eagle")
    return None


def draft_notes(pair: ModelPair, name: str) -> None:
    """Captions under a drafter (its card, the speed page): its reduced vocabulary when its
    pair ships one (``drafters/draft_vocab.py``; the sampled ``N`` when another) and its
    int8 weights when it runs them (``core/int8_linear.py``)."""
    about = describe(pair, name)
    if about is not None:
        text = t("dr_draft_vocab", **about)
        if "n_sampled" in about:
            text += " " + t("dr_draft_vocab_sampled", **about)
        st.caption(text)
    if runs_int8(pair, name):
        st.caption(t("dr_int8"))


def _mtp(pair: ModelPair, use: bool) -> int | None:
    heads = make_named_drafter(pair, "mtp")
    st.caption(t("dr_desc_mtp", k=heads.max_gamma, params=_params(heads.heads)))
    return None


def _block(pair: ModelPair, use: bool) -> int | None:
    st.caption(t("dr_desc_block", k=make_named_drafter(pair, "block").max_gamma))
    return None


def _plain(name: str) -> Callable[[ModelPair, bool], int | None]:
    def card(pair: ModelPair, use: bool) -> int | None:
        key = "dr_desc_" + name
        if key in strings():
            st.caption(t(key))
        return None

    return card


#: Each source's card body: ``card(pair, use) -> knob`` (its knob widget, ``None`` when it
#: has none, and its description).
CARDS: dict[str, Callable[[ModelPair, bool], int | None]] = {
    "model": _model,
    "ngram": _ngram,
    "early-exit": _early_exit,
    "eagle": _eagle,
    "mtp": _mtp,
    "block": _block,
}


def _preset_changed() -> None:
    preset = st.session_state["dr_preset"]
    if preset != "custom":
        pair = st.session_state["pair"]
        st.session_state["dr_prompt"] = default_prompt(pair.name, "drafters_" + preset)


def inputs(pair: ModelPair) -> tuple[str, list[tuple[str, int | None]]]:
    """The preset, the prompt box and the cards; returns the prompt and the chosen
    ``(source, knob)`` pairs. The cards wrap (each at least 215 px wide, app.py's CSS: 4
    in a row on a wide screen, 2 with the sidebar open at 1024 px)."""
    S = st.session_state
    if "dr_prompt" not in S:
        S["dr_prompt"] = default_prompt(pair.name, "drafters_repetitive")
    follow_pair("dr_prompt", pair.name, "drafters_repetitive")
    follow_pair("dr_prompt", pair.name, "drafters_novel")
    # labels in the screen's language; a language switch puts the choice back by key
    preset_labels = {p: t("dr_preset_" + p) for p in PRESETS}
    st.radio(
        t("dr_preset"),
        PRESETS,
        key=follows_language("dr_preset"),
        horizontal=True,
        on_change=_preset_changed,
        format_func=preset_labels.get,
        help=t("dr_preset_help"),
    )
    prompt = st.text_area(t("dr_prompt"), key="dr_prompt", height=130, max_chars=PROMPT_CHARS)
    note = t("dr_prompt_note_zh" if pair.name == "embedded-zh" else "dr_prompt_note")
    st.caption(f"{prompt_limit_note()} {note}")
    cards = st.container(horizontal=True, gap="small", key="dr_cards")
    chosen: list[tuple[str, int | None]] = []
    for name in drafters_for(pair):  # eagle, mtp, block only where the pair has them
        with cards.container(border=True, key=f"dr_card_{name}"):
            use = st.checkbox(t("dr_name_" + name), value=True, key=f"dr_use_{name}")
            knob = CARDS.get(name, _plain(name))(pair, use)
            if use:
                chosen.append((name, knob))
    return prompt, chosen


def run_row(pair: ModelPair, config: SessionConfig, prompt: str, chosen: list) -> RunKey:
    """The settings line, repeats and the run button; a click runs the comparison (kept as
    ``dr_results``, an error as ``dr_error``). Returns the key of the inputs on screen."""
    S = st.session_state
    c1, c2, c3 = st.columns([2, 2, 1.3])
    c1.caption(t("dr_settings_from_sidebar", tokens=config.max_new_tokens, gamma=config.gamma))
    repeats = c2.select_slider(
        t("dr_repeats"), options=[1, 3, 5], value=3, key="dr_repeats", help=t("dr_repeats_help")
    )
    key = (pair.name, config, prompt, tuple(chosen), int(repeats))
    c3.write("")
    run = c3.button(t("dr_run"), type="primary", disabled=not chosen, width="stretch")
    if not chosen:
        st.warning(t("dr_none_selected"))
    if run:
        S.pop("dr_error", None)
        results = _run(pair, config, prompt, chosen, int(repeats))
        if results is not None:
            S["dr_results"] = (key, results)
    if "dr_error" in S:
        st.error(S.pop("dr_error"))
    return key


def _run(
    pair: ModelPair, config: SessionConfig, prompt: str, chosen: list, repeats: int
) -> list[DrafterResult] | None:
    bar = st.progress(0.0)
    knobs = dict(chosen)

    def progress(done: int, total: int, what: str) -> None:
        if what == "done":
            bar.progress(1.0)
            return
        text = t("dr_running", what=label(pair, what, knobs.get(what)), i=done + 1, n=total)
        bar.progress(done / total, text=text)

    try:
        prompt_ids(pair, prompt, "dr_prompt")  # length in characters first, then tokens
        return compare_drafters(pair, prompt, config, chosen, repeats, progress)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        st.session_state["dr_error"] = error_message(exc)
        return None
    finally:
        bar.empty()
