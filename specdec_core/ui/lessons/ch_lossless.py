"""Chapter 4: lossless, and its limits — same distribution is not same text; the model
that verifies is the reference; history-dependent processors per candidate prefix."""

from __future__ import annotations

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.lessons.prompts import prompts_for
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons import live
from specdec_core.ui.lessons.checkpoint import ask, choice

CHECKS = ("c4_same_text", "c4_quant", "c4_proc")
TOKENS = 32
SEED = 0
RUNS = "ls_c4_runs"  # the four texts, made once per browser session at the reveal


def texts(pair: ModelPair) -> dict[str, str]:
    """Target alone and speculative decoding, greedy and at T = 1 (same seed), 32 tokens
    each on the pair (fast path, well under a second on the embedded pair)."""
    prompt = prompts_for(pair.name).scenarios[0]
    key = (pair.name, prompt)
    cached = st.session_state.get(RUNS)
    if cached and cached[0] == key:
        return cached[1]
    out = {}
    for temp in (0.0, 1.0):
        for mode in ("autoregressive", "speculative"):
            run = live.run_pair(pair, prompt, TOKENS, temp, SEED, mode=mode)
            out[f"{mode}_{temp:g}"] = run.text
    st.session_state[RUNS] = (key, out)
    return out


def _compare(pair: ModelPair) -> None:
    runs = texts(pair)
    for temp in ("0", "1"):
        a, s = runs[f"autoregressive_{temp}"], runs[f"speculative_{temp}"]
        same = t("ls_c4_same") if a == s else t("ls_c4_differ")
        st.markdown(t("ls_c4_pair_title", temp=temp, seed=SEED, verdict=same))
        cols = st.columns(2)
        cols[0].caption(t("ls_c4_alone"))
        cols[0].code(a, language=None, wrap_lines=True)
        cols[1].caption(t("ls_c4_spec"))
        cols[1].code(s, language=None, wrap_lines=True)
    st.markdown(t("ls_c4_compare_note"))


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c4_intro"))
    st.subheader(t("ls_c4_text_title"))
    opts = ("same_text", "same_dist", "worse")
    question, why = t("ls_c4_text_q"), t("ls_c4_text_why")
    if ask(choice("c4_same_text", question, "same_dist", why, opts, "ls_c4_text_")):
        _compare(pair)
    # two questions answered by a reveal text: ``ls_c4_<name>_title / _q / _why / _reveal``
    for name, answer, opts in (
        ("quant", "quantized", ("original", "quantized", "draft", "none")),
        ("proc", "candidate", ("committed", "candidate", "skip", "draft")),
    ):
        key = f"ls_c4_{name}"
        st.subheader(t(f"{key}_title"))
        if ask(choice(f"c4_{name}", t(f"{key}_q"), answer, t(f"{key}_why"), opts, f"{key}_")):
            st.markdown(t(f"{key}_reveal"))
