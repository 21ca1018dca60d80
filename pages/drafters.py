"""Where drafts come from: every draft source the pair can run (the draft model, prompt
lookup (n-gram), early exit and, where the pair ships them, the EAGLE feature head, the
MTP heads and the block drafter) on the same prompt, side by side with the target alone;
then all of them on a repetitive and a novel prompt, greedy and T = 1, measured beside the
cost model's prediction (``ui/speed/compare_run.py``, run in the background).

Widgets and rendering only: every number comes from ``specdec_core.bench.compare``.
"""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from specdec_core.bench.compare import DrafterResult, compare_drafters
from specdec_core.drafters import default_knob, drafters_for, load_eagle_head, make_named_drafter
from specdec_core.ui import drafts_budget
from specdec_core.ui.context import page_context
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.drafters import drafter_time_figure
from specdec_core.ui.guards import PROMPT_CHARS, prompt_ids
from specdec_core.ui.i18n import follows_language, t
from specdec_core.ui.render import STYLES, StripItem, token_strip_html
from specdec_core.ui.speed import compare_run
from specdec_core.ui.words import DRAFTERS_STRIP

S = st.session_state
pair, config = page_context()
N_LAYERS = pair.target.config.n_layer
PRESETS = ("repetitive", "novel", "custom")
DRAFTERS = drafters_for(pair)  # eagle only where the pair has a head
OTHER_ROWS = ("eagle", "mtp", "block", "random")  # Medusa-style heads and a PARD block run above
OTHER_COLS = ("method", "how", "needs", "note")


def _label(name: str, knob: int | None) -> str:
    if name == "target":
        return t("dr_label_target")
    return t("dr_label_" + name, k=knob, n=N_LAYERS)


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _preset_changed() -> None:
    preset = S["dr_preset"]
    if preset != "custom":
        S["dr_prompt"] = t("dr_prompt_" + preset)


# ------------------------------------------------------------------ header + inputs
st.title(t("dr_title"))
st.markdown(t("dr_intro"))

if "dr_prompt" not in S:
    S["dr_prompt"] = t("dr_prompt_repetitive")
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
st.caption(t("dr_prompt_note"))

# the cards wrap (each at least 215 px wide, app.py's CSS: 4 in a row on a wide screen, 2
# with the sidebar open at 1024 px) instead of 4 squeezed columns
cards = st.container(horizontal=True, gap="small", key="dr_cards")
chosen: list[tuple[str, int | None]] = []
for name in DRAFTERS:
    with cards.container(border=True, key=f"dr_card_{name}"):
        use = st.checkbox(t("dr_name_" + name), value=True, key=f"dr_use_{name}")
        knob: int | None = None
        if name == "model":
            st.caption(
                t(
                    "dr_desc_model",
                    layers=pair.draft.config.n_layer,
                    params=_params(pair.draft),
                    t_layers=N_LAYERS,
                    t_params=_params(pair.target),
                )
            )
        elif name == "ngram":
            knob = st.select_slider(
                t("dr_knob_n"),
                options=[1, 2, 3],
                value=3,
                key="dr_knob_ngram",
                help=t("dr_knob_n_help"),
                disabled=not use,
            )
            st.caption(t("dr_desc_ngram"))
        elif name == "eagle":
            st.caption(t("dr_desc_eagle", params=_params(load_eagle_head(pair))))
        elif name == "mtp":
            heads = make_named_drafter(pair, "mtp")
            st.caption(t("dr_desc_mtp", k=heads.max_gamma, params=_params(heads.heads)))
        elif name == "block":
            st.caption(t("dr_desc_block", k=make_named_drafter(pair, "block").max_gamma))
        elif name == "early-exit":
            knob = st.select_slider(
                t("dr_knob_k"),
                options=list(range(1, N_LAYERS + 1)),
                value=default_knob(pair, "early-exit"),
                key="dr_knob_early",
                help=t("dr_knob_k_help"),
                disabled=not use,
            )
            st.caption(t("dr_desc_early-exit", n=N_LAYERS))
        if use:
            chosen.append((name, knob))

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
    bar = st.progress(0.0)
    knobs = dict(chosen)

    def _progress(done: int, total: int, what: str) -> None:
        if what == "done":
            bar.progress(1.0)
            return
        label = _label(what, knobs.get(what)) if what != "target" else t("dr_label_target")
        bar.progress(done / total, text=t("dr_running", what=label, i=done + 1, n=total))

    try:
        prompt_ids(pair, prompt, "dr_prompt")  # length in characters first, then tokens
        results = compare_drafters(pair, prompt, config, chosen, int(repeats), _progress)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["dr_error"] = error_message(exc)
    else:
        S["dr_results"] = (key, results)
        S.pop("dr_error", None)
    bar.empty()

if "dr_error" in S:
    st.error(S.pop("dr_error"))

# ------------------------------------------------------------------ results
stored = S.get("dr_results")
if stored is None:
    st.info(t("dr_no_results"))
else:
    run_key, results = stored
    if run_key != key:
        st.info(t("dr_stale"))
    used = run_key[1]
    base = results[0].baseline
    labels = [_label(r.name, r.knob) for r in results]
    st.subheader(t("dr_results", tokens=used.max_new_tokens))  # the budget, visible
    st.caption(
        t(
            "dr_run_info",
            gamma=used.gamma,
            temp=used.temperature,
            seed=used.seed,
            tokens=used.max_new_tokens,
            device=pair.device_label(),
            tps=base.tokens_per_s,
            ms=base.ms_per_token,
        )
    )

    capped = [f"{label} γ = {r.gamma}" for r, label in zip(results, labels, strict=True)]
    capped = [c for c, r in zip(capped, results, strict=True) if r.gamma and r.gamma < used.gamma]
    if capped:  # a source that proposes fewer (MTP heads: K) ran with its own maximum
        st.caption(t("src_capped", caps=", ".join(capped)))

    metric_cols = st.columns(len(results))
    for col, r, label in zip(metric_cols, results, labels, strict=True):
        with col.container(border=True):
            st.markdown(f"**{html.escape(label)}**")
            st.metric(t("dr_metric_speedup"), f"{r.speedup:.2f}×", help=t("dr_metric_speedup_help"))
            st.metric(
                t("dr_metric_alpha"), f"{r.acceptance_rate:.2f}", help=t("dr_metric_alpha_help")
            )
            st.metric(t("dr_metric_mean"), f"{r.mean_accepted:.2f}", help=t("dr_metric_mean_help"))

    def _row(label: str, r: DrafterResult | None) -> dict:
        if r is None:  # the target alone: one token per forward, nothing drafted
            return {
                "drafter": label,
                "alpha": "—",
                "mean": "—",
                "rounds": f"{base.new_tokens}",
                "empty": "—",
                "draft_ms": "—",
                "verify_ms": f"{base.ms_per_token:.2f}",
                "tps": f"{base.tokens_per_s:.0f}",
                "speedup": "1.00×",
                "same": t("yes"),
            }
        return {
            "drafter": label,
            "alpha": f"{r.acceptance_rate:.2f}",
            "mean": f"{r.mean_accepted:.2f}",
            "rounds": f"{r.rounds}",
            "empty": f"{r.empty_rounds}",
            "draft_ms": f"{r.draft_ms_per_round:.2f}",
            "verify_ms": f"{r.verify_ms_per_round:.2f}",
            "tps": f"{r.tokens_per_s:.0f}",
            "speedup": f"{r.speedup:.2f}×",
            "same": t("yes" if r.same_as_target else "no"),
        }

    table = pd.DataFrame(
        [_row(t("dr_label_target"), None)]
        + [_row(label, r) for label, r in zip(labels, results, strict=True)]
    )
    column_config = {
        col: st.column_config.TextColumn(
            t("dr_col_" + col),
            help=None if col == "drafter" else t(f"dr_col_{col}_help"),
            alignment="left" if col == "drafter" else "right",
        )
        for col in table.columns
    }
    st.dataframe(table, hide_index=True, width="stretch", column_config=column_config)
    st.caption(t("dr_greedy_note") if used.sampling.greedy else t("dr_sampled_note"))
    st.caption(t("dr_timing_note", device=pair.device_label()))

    fig_labels = {
        "draft": t("dr_fig_draft"),
        "verify": t("dr_fig_verify"),
        "other": t("dr_fig_other"),
        "ms": t("dr_fig_ms"),
    }
    fig = drafter_time_figure(
        [t("dr_label_target")] + labels,
        [0.0] + [r.draft_ms_per_token for r in results],
        [base.ms_per_token] + [r.verify_ms_per_token for r in results],
        [0.0] + [r.overhead_ms_per_token for r in results],
        fig_labels,
        t("dr_fig_title"),
    )
    st.plotly_chart(fig, width="stretch", key="dr_time_fig")

    # -------------------------------------------------------------- token strips
    st.subheader(t("dr_strips"))
    show_discarded = st.toggle(t("dr_show_discarded"), key="dr_show_discarded")
    legend = "".join(
        f'<span style="{STYLES[s]}padding:1px 6px;margin-right:6px;border-radius:4px;'
        f'font-size:12px;display:inline-block">{html.escape(t(key))}</span>'
        for s, key in DRAFTERS_STRIP.items()
    )
    st.html(f'<div style="margin-bottom:4px">{legend}</div>')
    edited_note = html.escape(t("legend_edited"))
    strip_cols = st.columns(len(results))
    for col, r, label in zip(strip_cols, results, labels, strict=True):
        with col.container(border=True):
            st.markdown(f"**{html.escape(label)}**")
            st.caption(
                t(
                    "dr_strip_caption",
                    accepted=r.accepted,
                    drafted=r.drafted,
                    rounds=r.rounds,
                    empty=r.empty_rounds,
                )
            )
            items = [
                StripItem(m.token, m.state)
                for m in r.strip
                if show_discarded or m.state != "discarded"
            ]
            st.html(token_strip_html(items, []).replace(edited_note, ""))

with st.expander(t("dr_read_title"), expanded=stored is not None):
    st.markdown(t("dr_read"))

# ------------------------------------------------------------------ every source, two prompts
st.divider()
compare_run.section(pair, config, "dr")
drafts_budget.show_lookup_note("dr")  # why prompt lookup ranks differently

# ------------------------------------------------------------------ other drafters
st.subheader(t("dr_other_title"))
st.markdown(t("dr_other_intro"))
header = "| " + " | ".join(t("dr_oth_col_" + c) for c in OTHER_COLS) + " |"
rule = "|" + "---|" * len(OTHER_COLS)
rows = [
    "| "
    + " | ".join(
        (f"**{t(f'dr_oth_{r}_{c}')}**" if c == "method" else t(f"dr_oth_{r}_{c}"))
        for c in OTHER_COLS
    )
    + " |"
    for r in OTHER_ROWS
]
st.markdown("\n".join([header, rule, *rows]))
