"""The acceptance-rule lab's rows (loading presets and step-through positions, resizing,
checking typed weights) and its two large tables (the exact decomposition, the Monte
Carlo fit). Callbacks and rendering only: every number comes from ``specdec_core.rules.lab``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import pandas as pd
import streamlit as st

from specdec_core.core.errors import RuleInputError
from specdec_core.core.inputs import whole_number
from specdec_core.rules.lab import rows as LR
from specdec_core.rules.lab.exact import RULES, Decomposition
from specdec_core.rules.lab.montecarlo import MAX_N, ChiSquare, monte_carlo
from specdec_core.rules.lab.tree_node import TREE_RULES, node_rules
from specdec_core.server.room_limits import RUNS
from specdec_core.ui.errors import error_message
from specdec_core.ui.figures.common import token_labels, visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.step import lesson as L

S = st.session_state
NUM = "%.4f"


def load(names, p, q, one_hot_token: int, source: tuple) -> None:
    """Replace the editable table (a new editor key drops the old cell edits)."""
    S["rl_base"] = pd.DataFrame({"name": list(names), "p": list(p), "q": list(q)})
    S["rl_ver"] = S.get("rl_ver", 0) + 1
    S["rl_ntok"] = len(names)
    S["rl_y"] = one_hot_token
    S["rl_source"] = source


def preset(name: str) -> None:
    pr = LR.PRESETS[name]
    load(pr.names, pr.p, pr.q, pr.one_hot_token, ("preset", name))


def step_verify():
    """The step-through page's pending verification, else its last verified round (a
    round that drafted no tokens counts: it has no positions to load)."""
    session = L.current_session()
    if session is None:
        return None
    if session.steps.current_verify is not None:
        return session.steps.current_verify
    return session.history[-1].verify if session.history else None


def from_step() -> None:
    try:
        _load_step()
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["rl_error"] = error_message(exc)


def _load_step() -> None:
    verify = step_verify()
    if verify is None or not verify.checks:
        return
    k = whole_number(S.get("rl_step_pos", 1), 1, len(verify.checks), "position")
    check = verify.checks[k - 1]
    try:
        rows = LR.rows_from_slice(check.dist, keep=[check.token.id])
    except RuleInputError as exc:
        if exc.code == "one_token":  # name the token as the page writes tokens (‹E6›, ␣)
            exc.params["token"] = visible_token(check.token)
        raise
    names = token_labels(rows.tokens) + [t("other_bucket")]
    ids = [tok.id for tok in rows.tokens]
    y = ids.index(check.token.id) if check.token.id in ids else len(ids)
    source = (
        "step",
        verify.round_index + 1,
        k,
        visible_token(check.token),
        len(ids),
        rows.true_acceptance,
        verify.greedy,
    )
    load(names, rows.p, rows.q, y, source)


def resize() -> None:
    current = S.get("rl_current", S["rl_base"])
    try:
        n = whole_number(S.get("rl_ntok"), LR.MIN_TOKENS, LR.MAX_TOKENS, "tokens")
        names, p, q = LR.resize(
            current["name"].tolist(), current["p"].tolist(), current["q"].tolist(), n
        )
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["rl_error"] = error_message(exc)
        S["rl_ntok"] = len(S["rl_base"])
        return
    S["rl_base"] = pd.DataFrame({"name": names, "p": p, "q": q})
    S["rl_ver"] = S.get("rl_ver", 0) + 1


def weights(values: list, row: str) -> list:
    """Weights as given, after refusing numbers that are not finite or absurdly large
    (their sum would overflow)."""
    for v in values:
        if v is not None and not (isinstance(v, (int, float)) and abs(float(v)) <= 1e12):
            raise RuleInputError(f"{row}: weights must be finite numbers", "not_finite", row=row)
    return values


def unique_names(raw: list) -> list[str]:
    names: list[str] = []
    for i, x in enumerate(raw):
        name = str(x).strip() if x is not None and str(x).strip() else LR.default_name(i)
        names.append(f"{name} ({i + 1})" if name in names else name)
    return names


# ------------------------------------------------------------------ tables
def number(label: str, fmt: str = NUM):
    """A number column of :func:`table` (``fmt``: printf style, 4 decimals by default)."""
    return st.column_config.NumberColumn(label, format=fmt)


def table(key: str, columns: dict[str, tuple[object, object]]) -> None:
    """One of the lab's tables: full width, no index, keyed ``key``. ``columns``: column
    id → (its values, its header: a string or a :func:`number` column)."""
    st.dataframe(
        pd.DataFrame({c: values for c, (values, _) in columns.items()}),
        key=key,
        hide_index=True,
        width="stretch",
        column_config={c: header for c, (_, header) in columns.items()},
    )


def show_proof_table(names: list[str], d: Decomposition) -> None:
    """The decomposition row by row: p = min(p, q) + excess, and the residual."""
    proof: dict[str, tuple[object, object]] = {
        "token": (names, t("rl_col_name")),
        "p": (d.p, number("p")),
        "q": (d.q, number("q")),
        "min": (d.min_pq, number(t("rl_col_min"))),
        "excess": (d.excess, number(t("rl_col_excess"))),
        "sum": (d.reconstructed, number(t("rl_col_sum"))),
    }
    if d.residual is not None:
        proof["residual"] = (d.residual, number(t("rl_col_residual")))
    table("rl_proof_table", proof)
    if d.residual is None:
        st.caption(t("rl_no_residual"))


def verdict(fit: ChiSquare, ok_key: str = "rl_verdict_ok") -> str:
    if fit.impossible:
        return t("rl_verdict_impossible", k=fit.impossible)
    return t(ok_key) if fit.consistent else t("rl_verdict_bad")


def show_mc_table(mc: dict, results: dict) -> None:
    """The Monte Carlo rates, exact acceptance and χ² fit of each rule."""
    rules = RULES
    table(
        "rl_mc_table",
        {
            "rule": ([t(f"rl_rule_{r}") for r in rules], t("rl_col_rule")),
            "rate": ([mc[r].acceptance_rate for r in rules], number(t("rl_col_rate"))),
            "exact": ([results[r].acceptance for r in rules], number(t("rl_col_exact_A"))),
            "chi2": ([mc[r].fit.statistic for r in rules], number(t("rl_col_chi2"), "%.1f")),
            "dof": ([mc[r].fit.dof for r in rules], t("rl_col_dof")),
            "pvalue": ([mc[r].fit.p_value for r in rules], number(t("rl_col_pvalue"), "%.3g")),
            "verdict": (  # the level in the help: the header fits 1024 px in zh too
                [verdict(mc[r].fit) for r in rules],
                st.column_config.TextColumn(t("rl_col_verdict"), help=t("rl_col_verdict_help")),
            ),
        },
    )


# ------------------------------------------------------------------ tree node
def tree_node(p, q, k: int) -> dict:
    """:func:`specdec_core.rules.lab.node_rules` for these rows, kept in the session (up
    to 4,096 candidate tuples per rule: about a second on a busy CPU, so not on every
    rerun)."""
    key = (tuple(p), tuple(q), k)
    if S.get("rl_tree_key") != key:
        S["rl_tree"], S["rl_tree_key"] = node_rules(p, q, k), key
    return S["rl_tree"]


def show_tree_tables(names: list[str], p, results: dict) -> None:
    """The tree node's exact output per token, and each rule's TV to p and P(accept)."""
    rule_label = {rule: t(f"rl_tree_rule_{rule}") for rule in TREE_RULES}
    rules = TREE_RULES
    table(
        "rl_tree_summary",
        {
            "rule": ([rule_label[r] for r in rules], t("rl_col_rule")),
            "accept_any": ([results[r].accept_prob for r in rules], number(t("rl_col_accept_any"))),
            "tv_to_p": ([results[r].tv_to_p for r in rules], number(t("rl_col_tv"))),
        },
    )
    st.markdown(f"**{t('rl_tree_table_title')}**")
    finals = {r: (results[r].final, number(rule_label[r])) for r in rules}
    table(
        "rl_tree_table",
        {"token": (names, t("rl_col_name")), "p": (p, number(t("rl_lab_p"))), **finals},
    )


# ------------------------------------------------------------------ Monte Carlo, bounded
#: Draws one tab may simulate per minute (all rules together): one run at the largest N
#: (3 rules × 200,000). Five tabs toggling N = 200,000 pushed a classmate's clicks to
#: p50 913 ms; past this budget N is lowered to MC_FLOOR_N for the rest of the minute.
MC_BUDGET_DRAWS = 3 * MAX_N
MC_WINDOW_S = 60.0
MC_FLOOR_N = 1_000
MC_YIELD_S = 0.005  # a pause after each chunk of 20,000 draws (≈ 150 ms per 600,000)
_MC_SPENT = "rl_mc_spent"  # session state: [(time.monotonic(), draws), ...]
_mc_lock = threading.Lock()
#: One Monte Carlo runs at a time on the server: five tabs asking at once wait their turn
#: instead of five script threads taking every core from the class.
_mc_run_lock = threading.Lock()
_mc_results: OrderedDict[tuple, dict] = OrderedDict()  # seeded results: the same for all
_MC_CACHE_SIZE = 64


def mc_allowed(n: int, rules: int, now: float | None = None) -> tuple[int, int]:
    """The N this tab may run now and the draws it already spent this minute: ``n`` while
    ``rules × n`` fits in what is left of :data:`MC_BUDGET_DRAWS`, else
    :data:`MC_FLOOR_N`."""
    now = time.monotonic() if now is None else now
    spent = [(t0, d) for t0, d in S.get(_MC_SPENT, []) if now - t0 < MC_WINDOW_S]
    S[_MC_SPENT] = spent
    used = sum(d for _, d in spent)
    return (n if used + rules * n <= MC_BUDGET_DRAWS else min(n, MC_FLOOR_N)), used


def _cached(key: tuple) -> dict | None:
    with _mc_lock:
        hit = _mc_results.get(key)
        if hit is not None:
            _mc_results.move_to_end(key)
        return hit


def monte_carlo_bounded(p, q, y: int, n: int, seed: int, progress=None) -> tuple[dict, int]:
    """:func:`monte_carlo_all` within this tab's budget: a cached result whatever its N,
    else N as :func:`mc_allowed` allows. Returns the results (their ``n`` is the N run)
    and the draws this tab had spent this minute."""
    hit = _cached(_mc_key(p, q, y, n, seed))
    if hit is not None:
        return hit, 0
    allowed, used = mc_allowed(n, len(RULES))
    return monte_carlo_all(p, q, y, allowed, seed, progress), used


def _mc_key(p, q, y: int, n: int, seed: int) -> tuple:
    return (tuple(map(float, p)), tuple(map(float, q)), int(y), int(n), int(seed))


def monte_carlo_all(p, q, y: int, n: int, seed: int, progress=None) -> dict:
    """:func:`specdec_core.rules.lab.monte_carlo` of every rule, from a process-wide cache
    of seeded results (they depend only on the inputs, so a toggle back to an earlier N
    costs nothing and one tab's run serves the next tab); a miss is charged to this tab's budget
    (:func:`mc_allowed`) and runs when no other tab's Monte Carlo runs (one at a time per
    process). ``progress(fraction)`` while it runs."""
    key = _mc_key(p, q, y, n, seed)
    hit = _cached(key)
    if hit is not None:
        return hit
    mc = {}
    with _mc_run_lock:
        hit = _cached(key)  # another tab may have run the same while this one waited
        if hit is not None:
            return hit
        S.setdefault(_MC_SPENT, []).append((time.monotonic(), len(RULES) * n))
        for i, rule in enumerate(RULES):

            def tick(done: float, i: int = i) -> None:
                if progress is not None:
                    progress((i + done) / len(RULES))
                time.sleep(MC_YIELD_S)  # between chunks: other tabs' clicks get the GIL

            mc[rule] = monte_carlo(p, q, rule, n, seed, y, progress=tick)
    with _mc_lock:
        _mc_results[key] = mc
        while len(_mc_results) > _MC_CACHE_SIZE:
            _mc_results.popitem(last=False)
    return mc


# ------------------------------------------------------------------ figures, built once
_fig_lock = threading.Lock()
_figures: OrderedDict[tuple, object] = OrderedDict()
_FIG_CACHE_SIZE = 128


def _frozen(value: object) -> object:
    """A hashable stand-in for a figure builder's argument (arrays, lists, dicts)."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def figure(builder, *args):
    """``builder(*args)`` from a process-wide cache of figures (a Plotly figure costs
    20–150 ms to build here, the lab page draws eight, and the same rows give the same
    figures in every tab; five tabs rerunning the lab page were mostly building them).
    The figure is shared: callers only draw it."""
    key = (builder.__module__, builder.__qualname__, _frozen(args))
    with _fig_lock:
        fig = _figures.get(key)
        if fig is not None:
            _figures.move_to_end(key)
            return fig
    fig = builder(*args)
    with _fig_lock:
        _figures[key] = fig
        while len(_figures) > _FIG_CACHE_SIZE:
            _figures.popitem(last=False)
    return fig


# ------------------------------------------------------------------ pacing
#: Least time between the starts of two runs of the lab page in one tab (seconds). A tab
#: rerunning the page as fast as the server answers (five such tabs pushed a classmate's
#: step clicks to p95 2.9 s) gets at most one run a second; a student who reads before
#: clicking never waits. A run that waits sleeps without the GIL, and a newer click
#: from the same tab replaces it (Streamlit stops the waiting run at its next element).
MIN_RUN_INTERVAL_S = 1.0
_LAST_RUN = "rl_last_run"


def pace(now: float | None = None) -> float:
    """Sleep until :data:`MIN_RUN_INTERVAL_S` has passed since this tab's last run of the
    lab page started; returns the seconds slept."""
    now = time.monotonic() if now is None else now
    wait = max(0.0, MIN_RUN_INTERVAL_S - (now - S.get(_LAST_RUN, -1e9)))
    if wait > 0:
        RUNS.sleep(wait)  # the browser's other tabs run meanwhile
    S[_LAST_RUN] = time.monotonic()
    return wait
