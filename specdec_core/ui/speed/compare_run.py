"""Running "compare every source" without freezing the page: the controls (tokens,
passes, the button), the job on the server's measurement queue (``server/long_tasks.py``:
a warm-up, then one pass of one (prompt, temperature) per task, stopped at
``SOURCES_BUDGET_S`` with what it measured), its progress and Cancel (``ui/background``),
and the last result, kept in the session under ``{prefix}_sources`` and drawn by
``ui/speed/sources.show``. The drafters page and the speed page call :func:`section`."""

from __future__ import annotations

import streamlit as st

from specdec_core.bench.source_results import SOURCE_TEMPERATURES, source_prompts
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for
from specdec_core.server import tasks as T
from specdec_core.server.long_tasks import SOURCES_BUDGET_S
from specdec_core.ui import background
from specdec_core.ui.i18n import t
from specdec_core.ui.speed.sources import (
    REPEATS,
    TOKENS,
    result_key,
    show,
    source_label,
    temp_label,
)


def job_name(prefix: str) -> str:
    """The session-state prefix of the page's comparison job."""
    return f"{prefix}_src_bg"


def _start(pair: ModelPair, config: SessionConfig, prefix: str) -> None:
    S = st.session_state
    used = SessionConfig(
        gamma=config.gamma,
        top_k=config.top_k,
        top_p=config.top_p,
        seed=config.seed,
        max_new_tokens=int(S.get(f"{prefix}_src_tokens", 16)),
    )
    repeats = int(S.get(f"{prefix}_src_repeats", 3))
    names = drafters_for(pair)
    background.submit(
        job_name(prefix), lambda owner: T.sources_job(owner, pair, used, names, repeats)
    )


def controls(pair: ModelPair, config: SessionConfig, prefix: str) -> None:
    """Tokens, passes and the button (disabled while this page's comparison runs), the
    budget it runs under, then its progress and Cancel; a finished run's result goes to
    ``st.session_state[result_key(prefix)] = (settings key, SourceComparison)``."""
    S = st.session_state
    names = drafters_for(pair)
    st.caption(
        t(
            "src_sources_here",
            n=len(names),
            names=t("src_list_sep").join(source_label(n) for n in names),
        )
    )
    name = job_name(prefix)
    background.prewarm(pair.name)
    c1, c2, c3 = st.columns([2, 2, 1.4])
    c1.select_slider(
        t("src_tokens"), TOKENS, value=16, key=f"{prefix}_src_tokens", help=t("src_tokens_help")
    )
    c2.select_slider(
        t("src_repeats"), REPEATS, value=3, key=f"{prefix}_src_repeats", help=t("src_repeats_help")
    )
    c3.write("")
    c3.button(
        t("src_run"),
        key=f"{prefix}_src_run",
        type="primary",
        width="stretch",
        disabled=background.running(name),
        on_click=_start,
        args=(pair, config, prefix),
    )
    st.caption(t("src_bg_budget", budget=f"{SOURCES_BUDGET_S:.0f}"))
    job = background.take(name)
    if job is not None:
        S[result_key(prefix)] = ((pair.name, job.config, job.result.sources), job.result)
    background.show(name, t("src_bg_label"))


def section(pair: ModelPair, config: SessionConfig, prefix: str) -> None:
    """The whole comparison: heading, intro, controls, and the last result (or a hint)."""
    st.subheader(t("src_title"))
    st.markdown(t("src_intro"))
    with st.expander(t("src_prompts_title")):
        for key, text in source_prompts(pair.name).items():
            st.markdown(f"**{t('src_prompt_' + key)}**")
            st.code(text, language=None)
    controls(pair, config, prefix)
    stored = st.session_state.get(result_key(prefix))
    if stored is None:
        temps = t("src_list_sep").join(temp_label(x) for x in SOURCE_TEMPERATURES)
        st.info(t("src_no_results", temps=temps))
        return
    _, comp = stored
    show(comp, prefix)
