"""The lossless page's prompt and section 1: the target alone and speculative decoding at
T = 1 with the same seed write different texts, while over N seeds their first-k-token
distributions agree (χ², and TV against a simulated null). Widgets and rendering only:
every number comes from :mod:`specdec_core.bench.same_seed`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.same_seed import first_tokens_test, same_seed_texts
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.settings import SessionConfig
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.figures.common import COLORS
from specdec_core.ui.figures.lossless import two_dists_figure
from specdec_core.ui.guards import PROMPT_CHARS, prompt_limit_note
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import runs as RU

S = st.session_state
SLOT = "ll_res_seed"
MAX_UI_SEEDS = 500  # N on this page (bench.lossless allows more; a class shares one server)
TEXT_TOKENS = 32
SHOWN_OUTCOMES = 12
SEED_MAX = 2**31 - 1


def pick_prompt() -> str:
    """The prompt of sections ① and ②: a held-out line, or the student's own text."""
    held_out = RU.prompts(pair_name=st.session_state["pair"].name)
    options = list(range(len(held_out)))
    a, b = st.columns([3, 2])
    i = a.selectbox(
        t("ll_prompt"),
        options,
        format_func=lambda j: RU.prompt_label(held_out[j]),
        key="ll_prompt_i",
        help=t("ll_prompt_help"),
    )
    own = b.text_input(t("ll_prompt_own"), key="ll_prompt_own", max_chars=PROMPT_CHARS)
    b.caption(prompt_limit_note())
    return own if own.strip() else held_out[i]


def show_same_seed(pair: ModelPair, config: SessionConfig, prompt: str) -> None:
    """Section 1: the two texts for one seed, then N seeds' first tokens compared."""
    st.header(t("ll_sec_seed"))
    st.markdown(t("ll_seed_help"))
    c1, c2, c3, c4 = st.columns([1, 1, 1, 1.2], vertical_alignment="bottom")
    seed = c1.number_input(t("ll_seed"), 0, SEED_MAX, 0, key="ll_seed")
    n = c2.number_input(
        t("ll_n_seeds"), 10, MAX_UI_SEEDS, 100, 10, key="ll_n_seeds", help=t("ll_n_seeds_help")
    )
    k = c3.selectbox(t("ll_k"), [1, 2], key="ll_k", help=t("ll_k_help"))
    run = c4.button(t("ll_run_seed"), key="ll_run_seed", type="primary", width="stretch")
    st.caption(t("ll_seed_settings", gamma=config.gamma, tokens=TEXT_TOKENS))
    if run:
        try:
            n = whole_number(n, 10, MAX_UI_SEEDS, "N")
            seed = whole_number(seed, 0, SEED_MAX, t("ll_seed"))
            key = ("seed", pair.name, prompt, int(seed), n, int(k), config.gamma)
            steps = [
                (
                    t("ll_step_texts"),
                    lambda: same_seed_texts(pair, prompt, seed, TEXT_TOKENS, 1.0, config.gamma),
                ),
                (
                    t("ll_step_seeds", n=n),
                    lambda: first_tokens_test(pair, prompt, n, k, config.gamma, 1.0, seed),
                ),
            ]
            RU.run_steps(SLOT, key, steps)
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            S[SLOT + "_error"] = error_message(exc)
    RU.show_error(SLOT)
    if SLOT not in S:
        st.caption(t("ll_press_run"))
        return
    key, (texts, test) = S[SLOT]
    _, _, shown_prompt, shown_seed, *_ = key
    st.caption(t("ll_for_prompt", prompt=plain(RU.prompt_label(shown_prompt)), seed=shown_seed))
    st.html(
        RU.texts_html(texts.alone, texts.speculative, (t("ll_label_alone"), t("ll_label_spec")))
    )
    same = sum(1 for _ in _common(texts.alone_ids, texts.speculative_ids))
    if texts.same:
        st.caption(t("ll_texts_same"))
    else:
        st.caption(t("ll_texts_differ", k=same) if same else t("ll_texts_differ_0"))
    _show_test(pair, test)


def _common(a, b):
    for x, y in zip(a, b, strict=False):
        if x != y:
            return
        yield x


def _show_test(pair: ModelPair, test) -> None:
    """The N-seed comparison: metrics, a verdict, the chart of the most common outcomes."""
    lo, mid, hi = test.null_quantiles
    m = st.columns(3)
    m[0].metric(t("ll_m_tv"), fmt_prob(test.tv), help=t("ll_m_tv_help"))
    m[1].metric(t("ll_m_null"), f"{lo:.2f}–{hi:.2f}", help=t("ll_m_null_help"))
    m[2].metric(t("ll_m_chi2"), f"{test.p_value:.3g}", help=t("ll_m_chi2_help", dof=test.dof))
    agree = test.p_value > 0.01 and test.tv <= hi
    (st.success if agree else st.warning)(
        t(
            "ll_verdict_agree" if agree else "ll_verdict_odd",
            n=test.n,
            k=test.k,
            share=f"{test.null_share_above:.0%}",
        )
    )
    outcomes = list(test.counts)[:SHOWN_OUTCOMES]
    names = [RU.outcome_label(pair, x) for x in outcomes]
    names = [f"{x} ({i + 1})" if names.count(x) > 1 else x for i, x in enumerate(names)]
    alone = [test.counts[x][0] / test.n for x in outcomes]
    spec = [test.counts[x][1] / test.n for x in outcomes]
    exact = [test.counts[x][2] for x in outcomes]
    la, ls, le = t("ll_label_alone"), t("ll_label_spec"), t("ll_label_exact")
    rows = {la: alone, ls: spec}
    colors = {la: COLORS["p"], ls: "#2ca02c", le: "#9ca3af"}
    if all(v == v for v in exact):  # no nan: every shown outcome has its exact probability
        rows = {le: exact, **rows}
    labels = {"probability": t("ll_fig_share"), "outcome": t("ll_fig_outcome", k=test.k)}
    st.plotly_chart(
        LV.figure(
            two_dists_figure, names, rows, colors, labels, t("ll_fig_seeds", n=test.n, k=test.k)
        ),
        key="ll_fig_seeds",
    )
    with st.expander(t("ll_counts_title")):
        all_out = list(test.counts)
        LV.table(
            "ll_counts_table",
            {
                "outcome": ([RU.outcome_label(pair, x) for x in all_out], t("ll_col_outcome")),
                "alone": ([test.counts[x][0] for x in all_out], t("ll_label_alone")),
                "spec": ([test.counts[x][1] for x in all_out], t("ll_label_spec")),
                "exact": ([test.counts[x][2] for x in all_out], LV.number(t("ll_label_exact"))),
            },
        )
