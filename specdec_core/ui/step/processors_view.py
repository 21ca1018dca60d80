"""The state beyond the KV cache on the step page: the grammar matcher and the
penalty counts at the three moments of a round, next to the KV rows.

Before verify the processors stand on the committed text; the verify forward advances
them through the drafts (each ``p_i`` is processed with its own prefix); the commit rolls
them back to the new committed text together with the caches. Every number comes from the
engine's :class:`~specdec_core.core.processors.ProcessorView` in the round's traces
(``VerifyTrace.kv_before`` / ``kv_after``, ``CommitTrace.kv_after``; a tree round's
``propose.kv_before`` / ``verify.kv_after`` / ``commit.kv_after``). Drawing only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from specdec_core.core.penalties import penalty_counts
from specdec_core.core.processors import ProcessorView
from specdec_core.core.trace import KVState, TokenInfo
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.render import html_table
from specdec_core.ui.step.header import Heading

#: The three moments of a round, in order (string keys); ``now`` when nothing is in flight.
MOMENTS = ("proc_before_verify", "proc_after_verify", "proc_after_commit")
NOW = "proc_now"
#: A tree round: the verify forward and the walk leave the processors on the accepted path.
TREE_MOMENTS = (MOMENTS[0], "proc_after_walk", MOMENTS[2])
#: Tokens shown in the penalty table (the ones whose counts change first).
PENALTY_COLUMNS = 6
#: Both tables: headers may wrap (presenter mode puts them in half the page's width, where
#: one line each scrolled sideways at 1024 px) and every column after the first is a number.
_CSS = (
    "<style>.sd-table.processor-table th,.sd-table.penalty-table th{white-space:normal}"
    ".sd-table.processor-table td:not(:first-child),.sd-table.processor-table th:not(:first-child),"
    ".sd-table.penalty-table td:not(:first-child),.sd-table.penalty-table th:not(:first-child)"
    "{text-align:right}</style>"
)

Moment = tuple[str, KVState | None]  # (string key, the state; None: not reached yet)


def _view(state: KVState | None) -> ProcessorView | None:
    return None if state is None else state.processors


def exact_counts(
    state: KVState, prompt_len: int, ids: Sequence[int] | None = None
) -> dict[int, tuple[int, int]] | None:
    """Every token's ``(count in the whole prefix, count in the generated part)`` at the
    prefix the processors stand on, counted with the engine's
    :func:`~specdec_core.core.penalties.penalty_counts`: ``ids`` when given, else the first
    ``length`` ids of the KV rows (the committed ids, then the drafts the chain was advanced
    through). The view keeps only the most frequent few; these are all of them. ``None``
    when that prefix is not the one the view counted (every count the view has and its
    number of distinct ids are checked): then the view's own counts are used."""
    view = state.processors
    if view is None or view.penalty is None:
        return None
    if ids is None:
        if len(state.rows) < view.length:
            return None
        ids = [r.token_id for r in state.rows[: view.length]]
    if len(ids) != view.length:
        return None
    counts = penalty_counts(list(ids), prompt_len)
    agree = all(counts.get(tid) == (whole, gen) for tid, whole, gen in view.penalty.counts)
    return counts if agree and len(counts) == view.penalty.distinct else None


def chain_moments(session, last, phase: str) -> list[Moment] | None:
    """The moments to show for a chain session: the round in flight (later moments
    ``None`` until reached), else the last finished round, else the state now. ``None``
    when the session has no active processor (nothing to show)."""
    now = session.kv_state()
    if now.processors is None:
        return None
    if phase == "verify":  # proposed: the processors stand on the committed text
        return [(MOMENTS[0], now), (MOMENTS[1], None), (MOMENTS[2], None)]
    verify = session.steps.current_verify
    if phase == "commit" and verify is not None:
        return [(MOMENTS[0], verify.kv_before), (MOMENTS[1], verify.kv_after), (MOMENTS[2], None)]
    if last is not None:
        return [
            (MOMENTS[0], last.verify.kv_before),
            (MOMENTS[1], last.verify.kv_after),
            (MOMENTS[2], last.commit.kv_after),
        ]
    return [(NOW, now)]


def tree_moments(session, phase: str) -> tuple[list[Moment], list[list[int] | None]] | None:
    """The same for a tree session: before the round, after the verify forward and the
    walk (standing on the committed ids + the accepted path), after the commit; with the
    prefix each moment stands on where the KV rows do not list it in order (after the
    walk: the committed ids + the accepted path), for :func:`exact_counts`. ``None``
    without an active processor. The round in flight's state before verify is the one
    the tree session keeps for its trace (``current_propose.kv_before``)."""
    now = session.kv_state()
    if now.processors is None:
        return None
    if phase == "verify":  # drafted: the processors stand on the committed text
        return [(TREE_MOMENTS[0], now), (TREE_MOMENTS[1], None), (TREE_MOMENTS[2], None)], [
            None
        ] * 3
    if phase == "commit":  # verified: they stand on the committed text + the accepted path
        view = session.steps.tree_view()
        path = [view.nodes[i].token.id for i in view.path] if view is not None else []
        walked = (list(session.ids) + path)[: now.processors.length]
        proposed = session.steps.current_propose
        before = proposed.kv_before if proposed is not None else None
        return [(TREE_MOMENTS[0], before), (TREE_MOMENTS[1], now), (TREE_MOMENTS[2], None)], [
            None,
            walked,
            None,
        ]
    if session.history:
        last = session.history[-1]
        verified, after = last.verify.kv_after, last.commit.kv_after
        walked = None
        if verified.processors is not None:
            ids = [r.token_id for r in after.rows]
            walked = ids[: verified.processors.length]  # committed + path (+ next) first
        moments = [
            (TREE_MOMENTS[0], last.propose.kv_before),
            (TREE_MOMENTS[1], verified),
            (TREE_MOMENTS[2], after),
        ]
        return moments, [None, walked, None]
    return [(NOW, now)], [None]


def _yes(flag: bool) -> str:
    return t("proc_yes") if flag else t("proc_no")


def state_columns(moments: Sequence[Moment], prompt_len: int) -> dict[str, list]:
    """The processors' table (header → cells), one row per moment: the tokens the state
    stands on (generated ones), and with a grammar its matcher (tokens accepted,
    terminated, complete match, allowed tokens at the next position). ``—``: not reached
    yet."""
    views = [_view(state) for _, state in moments]
    grammar = any(v is not None and v.grammar is not None for v in views)
    dash = "—"
    cols: dict[str, list] = {
        t("proc_col_moment"): [t(key) for key, _ in moments],
        t("proc_col_length"): [dash if v is None else v.length - prompt_len for v in views],
    }
    if grammar:
        g = [None if v is None else v.grammar for v in views]
        cols[t("proc_col_accepted")] = [dash if x is None else x.accepted_tokens for x in g]
        cols[t("proc_col_terminated")] = [dash if x is None else _yes(x.terminated) for x in g]
        cols[t("proc_col_completed")] = [dash if x is None else _yes(x.completed) for x in g]
        cols[t("proc_col_allowed")] = [dash if x is None else x.allowed_next for x in g]
    return cols


def penalty_columns(
    moments: Sequence[Moment],
    prompt_len: int,
    token: Callable[[int], TokenInfo],
    generated_only: bool,
    prefixes: Sequence[Sequence[int] | None] | None = None,
    limit: int = PENALTY_COLUMNS,
) -> dict[str, list] | None:
    """The penalty counts (header → cells), one row per moment, one column per token the
    penalty touches (its text escaped: ``␣`` for a space). Tokens whose count differs
    between the moments come first (what the drafts added and the commit took back), then
    the most frequent. A cell is the count in the whole prefix (repetition penalty,
    no-repeat n-gram), or in the generated part only when ``generated_only`` (frequency /
    presence penalties without the others). Every token is counted (:func:`exact_counts`,
    on ``prefixes[i]`` when given, else on the KV rows); where that is not possible, only
    the view's most frequent few, a token missing from a view that was cut written ``≤ m``
    (``m``: the smallest count it kept). ``None`` when no moment has a penalty view."""
    views = [None if _view(s) is None else _view(s).penalty for _, s in moments]
    if all(p is None for p in views):
        return None
    pick = 1 if generated_only else 0
    counts: list[dict[int, int] | None] = []
    cut: dict[int, bool] = {}  # row → its view kept only the most frequent few
    floor: dict[int, int] = {}  # row → the smallest count that view kept
    for i, ((_, state), view) in enumerate(zip(moments, views, strict=True)):
        if state is None or view is None:
            counts.append(None)
            continue
        full = exact_counts(state, prompt_len, prefixes[i] if prefixes else None)
        if full is None:  # the view's most frequent few only
            full = {tid: (whole, gen) for tid, whole, gen in view.counts}
            cut[len(counts)] = len(full) < view.distinct and bool(full)
            floor[len(counts)] = min((c[pick] for c in full.values()), default=0)
        counts.append({tid: c[pick] for tid, c in full.items() if c[pick] > 0})
    seen = [c for c in counts if c is not None]
    ids = list(dict.fromkeys(tid for c in seen for tid in c))

    first: dict[int, int] = {}  # where each token first occurs in any moment's rows
    for _, state in moments:
        for i, row in enumerate(state.rows if state is not None else ()):
            first[row.token_id] = min(i, first.get(row.token_id, i))

    def order(tid: int) -> tuple[bool, int, int]:
        values = [c.get(tid, 0) for c in seen]
        if len(set(values)) > 1:  # what the drafts added and the commit took back: in text order
            return (False, first.get(tid, 0), tid)
        return (True, -max(values), tid)  # then the most frequent

    ids.sort(key=order)
    ids = ids[:limit]
    cols: dict[str, list] = {t("proc_col_moment"): [t(key) for key, _ in moments]}
    for tid in ids:
        name = visible_token(token(tid))
        while name in cols:  # two tokens that look alike keep two columns
            name += " "
        cols[name] = [
            "—" if c is None else c.get(tid, f"≤ {floor[i]}" if cut.get(i) else 0)
            for i, c in enumerate(counts)
        ]
    cols[t("proc_col_distinct")] = ["—" if p is None else p.distinct for p in views]
    return cols


def section(
    moments: list[Moment] | None,
    prompt_len: int,
    token: Callable[[int], TokenInfo],
    generated_only: bool,
    heading: Heading,
    prefixes: Sequence[Sequence[int] | None] | None = None,
) -> None:
    """The state beyond the KV cache: the processors' table, the penalty counts and what
    they mean (nothing without an active processor)."""
    if not moments:
        return
    heading(t("proc_heading"))
    st.html(_CSS + html_table(state_columns(moments, prompt_len), name="processor-table"))
    st.caption(t("proc_columns"))
    penalties = penalty_columns(moments, prompt_len, token, generated_only, prefixes)
    if penalties is not None:
        st.caption(t("proc_penalty_gen" if generated_only else "proc_penalty_whole"))
        st.html(_CSS + html_table(penalties, name="penalty-table"))
    st.caption(t("proc_help"))
