"""Tree mode's "chain vs tree" timing: never shared between sessions, labelled
with how it was measured, measured by ``bench/tree_vs_chain.py`` ``chain_vs_tree``
(interleaved, warmed up, zero-safe)."""

from __future__ import annotations

from conftest import click_button, start_app

from specdec_core.bench import tree_vs_chain as tree_bench
from specdec_core.bench.timing import HowMeasured, Spread
from specdec_core.bench.tree_vs_chain import TreeBenchRow
from specdec_core.core.settings import SessionConfig

BUTTON = "▶ Measure chain vs tree (8 tokens, greedy)"


def crafted(ms: float, at: float) -> TreeBenchRow:
    how = HowMeasured(at=at, repeats=3, warmup=1, tokens=8, load=7.25, cpus=2)
    return TreeBenchRow(
        "chain", "γ=4", "model", 0.0, 8, 4, 16, 2.0, ms, Spread.of([ms, ms, ms]), how
    )


def to_tree(at) -> None:
    at.segmented_control(key="step_mode_en").set_value("tree").run()
    assert not at.exception, at.exception


def test_two_sessions_never_share_a_timing(embedded_pair, monkeypatch):
    from specdec_core.ui.step import tree_stats

    monkeypatch.setattr(tree_stats, "COMPARE_TOKENS", 8)
    calls = []

    def fake_measure(pair, prompts, config, variants, budget, repeats):
        calls.append((tuple(prompts), tuple(variants), repeats))
        ms = 138.0 if len(calls) == 1 else 1.9  # the first measured during a flood
        return crafted(ms, 3600.0 * len(calls)), crafted(ms * 1.3, 3600.0 * len(calls))

    monkeypatch.setattr(tree_bench, "measure_many", fake_measure)  # under chain_vs_tree
    first = start_app("en")
    to_tree(first)
    click_button(first, BUTTON)
    assert len(calls) == 1 and calls[0][1][0][0] == "chain" and calls[0][1][1][0] == "tree"
    assert "138.0 ms/token" in " ".join(c.value for c in first.caption)
    # a second student, same prompt and settings: no figure from the first session
    second = start_app("en")
    to_tree(second)
    assert BUTTON in [b.label for b in second.button]
    assert "138.0" not in " ".join(c.value for c in second.caption)
    click_button(second, BUTTON)
    assert len(calls) == 2  # measured again, for this session
    captions = " ".join(c.value for c in second.caption)
    assert "1.9 ms/token" in captions and "138.0" not in captions
    # labelled with how it was measured: when (UTC), repeats, warm-up, tokens, load
    assert "Measured at 02:00:00 UTC: 3 repeats, interleaved, after 1 untimed warm-up" in captions
    assert "8 new tokens per run; machine load 7.25 on 2 CPUs" in captions
    # the first session keeps its own result; "Measure again" replaces it
    first.run()
    assert "138.0 ms/token" in " ".join(c.value for c in first.caption)
    click_button(first, "↻ Measure again")
    assert len(calls) == 3 and "1.9 ms/token" in " ".join(c.value for c in first.caption)


def test_session_cache_is_bounded(monkeypatch):
    from specdec_core.ui.step import tree_stats

    state: dict = {}
    monkeypatch.setattr(tree_stats.st, "session_state", state)
    for i in range(tree_stats.CACHE_SIZE + 3):
        tree_stats._remember(("k", i), (crafted(1.0, i), crafted(1.0, i)))
    kept = [("k", i) for i in range(3, 3 + tree_stats.CACHE_SIZE)]  # the newest
    assert list(state[tree_stats.CACHE_KEY]) == kept
    state[tree_stats.CACHE_KEY] = "crafted"  # not a dict: replaced, never trusted
    assert tree_stats._cache() == {}


def test_measure_survives_runs_that_make_no_token(embedded_pair, monkeypatch):
    """A run that generates nothing (e.g. the context is full) has no ms per token: the
    row says 0 and has no spread, instead of dividing by zero (tree_stats had no guard)."""
    monkeypatch.setattr(tree_bench, "_once", lambda *a, **k: (0, 0, 0, 0.0))
    row = tree_bench.measure(embedded_pair, ["x"], SessionConfig(max_new_tokens=4), "tree")
    assert (row.tokens, row.tokens_per_target_forward, row.ms_per_token) == (0, 0.0, 0.0)
    assert row.spread is None and row.how is not None and row.how.repeats == 3


def test_measure_many_interleaves_after_one_warm_up_each(embedded_pair, monkeypatch):
    order = []

    def fake_once(pair, prompts, config, method, shape, budget, drafter):
        order.append((method, len(prompts)))
        return (8, 4, 12, 16.0 + len(order))

    monkeypatch.setattr(tree_bench, "_once", fake_once)
    rows = tree_bench.measure_many(
        embedded_pair,
        ["a", "b"],
        SessionConfig(gamma=4),
        [("chain", (), "model"), ("tree", (2, 1), "model")],
        repeats=2,
    )
    assert order == [
        ("chain", 1),
        ("tree", 1),  # warm-up: one run each on the first prompt
        ("chain", 2),
        ("tree", 2),
        ("chain", 2),
        ("tree", 2),
    ]
    chain, tree = rows
    assert (chain.setting, tree.setting) == ("γ=4", "2,1")
    assert chain.spread == Spread.of([19.0 / 8, 21.0 / 8]) and chain.ms_per_token == 20.0 / 8
    assert tree.tokens_per_target_forward == 2.0 and tree.how.warmup == 1
