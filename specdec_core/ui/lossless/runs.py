"""What the lossless page's studies on the pair share: one study runs at a time in the
server (a class clicking "Run" together waits its turn instead of taking every core),
seeded results kept process-wide (the same inputs give the same numbers, so a second tab
or a second click costs nothing), progress shown step by step, and a failure shown as one
translated message with the last results kept.

Widgets and rendering only: every number comes from :mod:`specdec_core.bench.lossless`
and :mod:`specdec_core.bench.numerics`."""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cache

import pandas as pd
import streamlit as st

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.core.models import ModelPair
from specdec_core.core.trace import token_lookup
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t

S = st.session_state
N_PROMPTS = 12  # held-out prompts offered in the prompt menu
_run_lock = threading.Lock()
_cache_lock = threading.Lock()
_results: OrderedDict[tuple, object] = OrderedDict()
_CACHE_SIZE = 32

Step = tuple[str, Callable[[], object]]


@cache
def prompts(n: int = N_PROMPTS, pair_name: str = "embedded") -> tuple[str, ...]:
    """The first ``n`` held-out prompts of the pair (``bench.lossless.held_out_prompts``)."""
    return tuple(held_out_prompts(n, pair_name))


def prompt_label(prompt: str) -> str:
    """A prompt in a menu: its lines joined by " / " (a speaker and a first line)."""
    return " / ".join(line for line in prompt.split("\n") if line)


def _cached(key: tuple) -> object | None:
    with _cache_lock:
        hit = _results.get(key)
        if hit is not None:
            _results.move_to_end(key)
        return hit


def run_steps(slot: str, key: tuple, steps: Sequence[Step]) -> None:
    """Run ``steps`` (label, call) in order, unless a process-wide result for ``key`` is
    kept; a progress bar names each step and its elapsed time. On success the session's
    ``slot`` holds ``(key, [results])``; on failure it keeps what it held and
    ``slot + "_error"`` holds one translated message."""
    hit = _cached(key)
    if hit is not None:
        S[slot] = (key, hit)
        return
    bar = st.progress(0.0, text=t("ll_waiting") if _run_lock.locked() else None)
    out: list[object] = []
    try:
        with _run_lock:
            for i, (label, call) in enumerate(steps):
                bar.progress(i / len(steps), text=t("ll_step", i=i + 1, n=len(steps)))
                with st.spinner(label, show_time=True):
                    out.append(call())
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S[slot + "_error"] = error_message(exc)
        bar.empty()
        return
    bar.empty()
    with _cache_lock:
        _results[key] = out
        while len(_results) > _CACHE_SIZE:
            _results.popitem(last=False)
    S[slot] = (key, out)


def table(key: str, columns: dict[str, tuple[object, object]]) -> None:
    """:func:`specdec_core.ui.lab.view.table`, every row shown (no inner scrolling)."""
    st.dataframe(
        pd.DataFrame({c: values for c, (values, _) in columns.items()}),
        key=key,
        hide_index=True,
        width="stretch",
        height="content",
        column_config={c: header for c, (_, header) in columns.items()},
    )


def show_error(slot: str) -> None:
    """The message a failed run of ``slot`` left, once."""
    if slot + "_error" in S:
        st.error(S.pop(slot + "_error"))


def token_text(pair: ModelPair) -> Callable[[int], str]:
    """id → the token as the app writes it (whitespace visible, partial bytes in hex)."""
    info = token_lookup(pair.tokenizer)
    return lambda token_id: visible_token(info(int(token_id)))


def outcome_label(pair: ModelPair, outcome: tuple) -> str:
    """A first-k-token outcome (a tuple of ids, or ``("other",)``) as one label."""
    if outcome == ("other",):
        return t("other_bucket")
    text = token_text(pair)
    return " · ".join(text(x) for x in outcome)


def texts_html(a: str, b: str, labels: tuple[str, str]) -> str:
    """Two texts side by side (stacked on a narrow screen), their common beginning plain and
    the rest of each highlighted; every character escaped."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    boxes = []
    for label, text in zip(labels, (a, b), strict=True):
        same, rest = html.escape(text[:n]), html.escape(text[n:])
        boxes.append(
            '<div style="flex:1 1 300px;min-width:0;border:1px solid #d1d5db;border-radius:6px;'
            'padding:0.5rem 0.7rem;">'
            f'<div style="font-weight:600;margin-bottom:0.3rem;">{html.escape(label)}</div>'
            '<div style="white-space:pre-wrap;overflow-wrap:anywhere;font-family:monospace;'
            f'font-size:0.9rem;">{same}<span style="background:#fef3c7;">{rest}</span></div>'
            "</div>"
        )
    return f'<div style="display:flex;flex-wrap:wrap;gap:0.6rem;">{"".join(boxes)}</div>'
