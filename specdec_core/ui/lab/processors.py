"""The acceptance lab's section 8, "state beyond the KV cache: the wrong ways": a penalty
broadcast over a round (exact on a hand-made case, measured on the pair) and a grammar
matcher left un-rolled-back after a rejection. Shown as lessons, never the app's
behaviour. Widgets and rendering only: every number comes from
``specdec_core.rules.lab.penalty``, ``specdec_core.lessons.wrong_penalty`` and
``specdec_core.lessons.wrong_grammar``."""

from __future__ import annotations

import math
import threading

import pandas as pd
import streamlit as st

from specdec_core.core.grammar import GRAMMAR_PRESETS
from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.lessons.prompts import prompts_for
from specdec_core.lessons.wrong_grammar import NoRollback, grammar_no_rollback
from specdec_core.lessons.wrong_penalty import (
    MC_GAMMA,
    MC_PENALTY,
    MC_RULES,
    MC_TOKENS,
    PenaltyMonteCarlo,
    penalty_monte_carlo,
)
from specdec_core.rules.lab.penalty import (
    HAND_CASE,
    PENALTY_RULES,
    compare_penalty_rules,
)
from specdec_core.ui.errors import plain, show_error
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.state import penalty_laws_figure
from specdec_core.ui.i18n import follows_language, t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.option_labels import labels
from specdec_core.ui.token_text import token_in_sentence

S = st.session_state
#: Choices offered (the hand-made case is tiny: every choice enumerates in milliseconds).
THETAS = (1.0, 1.5, 2.0, 3.0)
PRESENCES = (0.0, 0.5, math.log(2), 1.0, 2.0)
MC_SIZES = (100, 200, 400)
_run_lock = threading.Lock()  # one live measurement at a time per server process


def _presence_label(x: float) -> str:
    return "ln 2 ≈ 0.693" if abs(x - math.log(2)) < 1e-12 else f"{x:g}"


def _pick(key: str, options: tuple, default) -> None:
    if S.get(key) not in options:  # first load, or a crafted value: not one of the choices
        S[key] = default


def show_state(pair: ModelPair, seed: int) -> None:
    """Section 8: the three parts, one under the other (no columns: 1024 px wide)."""
    st.header(t("rl_sec_state"))
    st.markdown(t("rl_st_intro"))
    _hand_case()
    _pair_penalty(pair, seed)
    _grammar(pair)


def tv_text(tv: float) -> str:
    """A TV for a metric: float rounding (< 1e-12, the per-prefix rule) written as 0."""
    return "0" if tv < 1e-12 else fmt_prob(tv)


def _hand_case() -> None:
    st.subheader(t("rl_st_hand_title"))
    st.markdown(t("rl_st_hand_help"))
    names = HAND_CASE.names
    rows = {"last": [f"… {n}" for n in names]}
    for model, table in (("target", HAND_CASE.target), ("draft", HAND_CASE.draft)):
        for j in range(len(names)):
            rows[f"{model}_{j}"] = [row[j] for row in table]
    LV.table(
        "rl_st_tables",
        {
            "last": (rows["last"], t("rl_st_col_last")),
            **{
                f"{m}_{j}": (rows[f"{m}_{j}"], LV.number(t(f"rl_st_col_{m}", tok=n), "%.3f"))
                for m in ("target", "draft")
                for j, n in enumerate(names)
            },
        },
    )
    _pick("rl_st_theta", THETAS, 1.0)
    _pick("rl_st_presence", PRESENCES, math.log(2))
    _pick("rl_st_gamma", (1, 2, 3), 2)
    _pick("rl_st_n", (2, 3), 2)
    c = st.columns(4)
    theta = c[0].selectbox(t("rl_st_theta"), THETAS, key="rl_st_theta")
    presence = c[1].selectbox(
        t("rl_st_presence"), PRESENCES, key="rl_st_presence", format_func=_presence_label
    )
    gamma = c[2].selectbox("γ", (1, 2, 3), key="rl_st_gamma")
    n = c[3].selectbox(t("rl_st_n"), (2, 3), key="rl_st_n")
    config = PenaltyConfig(repetition_penalty=float(theta), presence_penalty=float(presence))
    try:
        cmp = compare_penalty_rules(HAND_CASE, config, int(gamma), int(n))
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        show_error(exc)
        return
    rule_names = {"target": t("rl_st_target"), **{r: t(f"rl_st_rule_{r}") for r in PENALTY_RULES}}
    laws = {"target": cmp.target, **cmp.laws}
    st.plotly_chart(
        LV.figure(
            penalty_laws_figure,
            cmp.labels,
            laws,
            rule_names,
            {"outcome": t("rl_st_outcome", n=n), "probability": t("probability")},
            t("rl_st_fig", n=n, gamma=gamma),
        ),
        key="rl_st_fig",
    )
    m = st.columns(3)
    for col, rule in zip(m, PENALTY_RULES, strict=True):
        col.metric(t("rl_st_m_tv", rule=rule_names[rule]), tv_text(cmp.tv[rule]))
    st.caption(t("rl_st_closed", tv=fmt_prob(cmp.two_token_tv)))
    with st.expander(t("rl_st_law_table")):
        LV.table(
            "rl_st_law_table",
            {
                "outcome": (list(cmp.labels), t("rl_st_outcome", n=n)),
                **{k: (list(v), LV.number(rule_names[k])) for k, v in laws.items()},
            },
        )


def _pair_penalty(pair: ModelPair, seed: int) -> None:
    prompt = prompts_for(pair.name).scenarios[0]  # the pair's own language
    st.subheader(t("rl_st_pair_title"))
    st.markdown(
        t(
            "rl_st_pair_help",
            prompt=plain(prompt),
            presence=MC_PENALTY.presence_penalty,
            gamma=MC_GAMMA,
            n=MC_TOKENS,
        )
    )
    _pick("rl_st_mc_n", MC_SIZES, MC_SIZES[0])
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    size = c1.selectbox(t("rl_st_mc_n"), MC_SIZES, key="rl_st_mc_n")
    if c2.button(t("rl_st_mc_run"), key="rl_st_mc_run"):
        bar = st.progress(0.0, text=t("rl_st_mc_running"))
        try:
            with _run_lock:
                S["rl_st_mc"] = penalty_monte_carlo(
                    pair,
                    prompt,
                    samples=int(size),
                    seed=seed,
                    progress=lambda f: bar.progress(f, text=t("rl_st_mc_running")),
                )
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            show_error(exc)
        bar.empty()
    mc = S.get("rl_st_mc")
    if not isinstance(mc, PenaltyMonteCarlo):
        st.caption(t("rl_st_mc_none"))
        return
    rule_names = {"target": t("rl_st_target"), **{r: t(f"rl_st_rule_{r}") for r in PENALTY_RULES}}
    LV.table(
        "rl_st_mc_table",
        {
            "rule": ([rule_names[r] for r in MC_RULES], t("rl_col_rule")),
            **{
                f"r{k}": ([mc.laws[r][k] for r in MC_RULES], LV.number(t("rl_st_rep", k=k)))
                for k in range(min(3, mc.n_tokens))
            },
            "tv": (
                ["—"] + [fmt_prob(mc.tv[r]) for r in ("per_prefix", "broadcast")],
                t("rl_st_col_tv"),
            ),
        },
    )
    st.markdown(
        t(
            "rl_st_mc_result",
            n=mc.n_samples,
            tv_ok=fmt_prob(mc.tv["per_prefix"]),
            tv_bad=fmt_prob(mc.tv["broadcast"]),
        )
    )
    st.caption(t("rl_st_mc_note"))


def _grammar(pair: ModelPair) -> None:
    st.subheader(t("rl_st_gr_title"))
    st.markdown(t("rl_st_gr_help"))
    presets = tuple(GRAMMAR_PRESETS)
    _pick("rl_st_gr_preset", presets, "short_answer")
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    preset = c1.selectbox(
        t("rl_st_gr_preset"),
        presets,
        key=follows_language("rl_st_gr_preset"),
        format_func=labels("grammar"),  # a preset's name, never its key
    )
    source = GRAMMAR_PRESETS[preset][1][:80].replace("`", "'")
    c1.caption(f"`{source}`")
    if c2.button(t("rl_st_gr_run"), key="rl_st_gr_run"):
        with st.spinner(t("rl_st_gr_running")):
            try:
                with _run_lock:
                    S["rl_st_gr"] = grammar_no_rollback(pair, preset)
                S["rl_st_gr_for"] = preset
            except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
                show_error(exc)
    if S.get("rl_st_gr_for") != preset:
        st.caption(t("rl_st_gr_none"))
        return
    res = S.get("rl_st_gr")
    if res is None:
        st.info(t("rl_st_gr_no_rejection"))
        return
    show_no_rollback(pair, res, "rl_st_gr_masks")


def token(pair: ModelPair, i: int) -> str:
    """Token ``i`` as a markdown sentence names it (:func:`token_in_sentence`)."""
    return token_in_sentence(pair.tokenizer.decode([int(i)]))


def _cell(pair: ModelPair, i: int) -> str:
    return visible_token(pair.tokenizer.decode([int(i)]))


def show_no_rollback(pair: ModelPair, res: NoRollback, key: str) -> None:
    """The rejected round, the first differing position and the two masks side by side
    (also used by the Lessons chapter)."""
    drafts = " · ".join(token(pair, i) for i in res.drafts)
    st.markdown(
        t(
            "rl_st_gr_round",
            r=res.round_index + 1,
            drafts=drafts,
            accepted=res.accepted,
            correction=token(pair, res.correction),
        )
    )
    text = plain(pair.tokenizer.decode(list(res.generated)))
    st.markdown(t("rl_st_gr_text", text=text))
    if res.first_diff is None:
        st.info(t("rl_st_gr_same", n=len(res.generated) - res.start))
    else:
        st.markdown(t("rl_st_gr_diff", j=res.first_diff, start=res.start))
        frame = pd.DataFrame(
            {
                t("rl_st_gr_col_matcher"): [t("rl_st_gr_correct"), t("rl_st_gr_stale")],
                t("rl_st_gr_col_allowed"): [res.correct_allowed, res.stale_allowed],
                t("rl_st_gr_col_examples"): [
                    "  ".join(_cell(pair, i) for i in res.only_correct) or "—",
                    "  ".join(_cell(pair, i) for i in res.only_stale) or "—",
                ],
            }
        )
        st.dataframe(frame, hide_index=True, width="stretch", key=key)
    facts = [
        t("rl_st_gr_terminated_yes" if res.stale_terminated else "rl_st_gr_terminated_no"),
        t("rl_st_gr_refused", k=len(res.stale_refused)),
        t("rl_st_gr_fresh_yes" if res.fresh_equal else "rl_st_gr_fresh_no"),
    ]
    st.markdown("\n".join(f"- {f}" for f in facts))
