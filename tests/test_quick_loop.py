"""The quick loop (``pytest -m "not slow"``): every entry of ``conftest.SLOW`` names a
module or test that exists, and each rule keeps a fast case outside it, so a broken rule
still fails in the quick loop (CI runs everything); the suite runs at one torch thread."""

from __future__ import annotations

import ast

from conftest import REPO, SLOW

#: One fast case per rule, run by the quick loop: greedy equality (fast path, step
#: machine, tree), the sampling rule's χ² on real rows, replay, KV rollback (chain, tree).
QUICK = (
    "test_generate.py::test_fast_greedy_equals_autoregressive",
    "test_session.py::test_greedy_equals_target_greedy",
    "test_tree.py::test_greedy_tree_equals_target_greedy",
    "test_mtp.py::test_greedy_few_prompts_chain_and_tree",
    "test_embedded.py::test_chi_square_on_real_rows_with_temperature_top_k_top_p",
    "test_replay_advance.py::test_a_few_clicks_advance_like_a_fresh_replay",
    "test_lesson_link.py::test_replaying_the_link_state_gives_the_same_session",
    "test_kvcache.py::test_kv_invariant_after_random_rounds_edits_and_stops[0]",
    "test_tree.py::test_compaction_leaves_the_cache_of_a_plain_decode",
    "test_tree_session.py::test_kv_invariant_after_a_rejection_at_every_depth[1]",
    "test_tree_session.py::test_node_states_on_known_cases",
)


def _tests(module: str) -> set[str]:
    tree = ast.parse((REPO / "tests" / module).read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_every_slow_entry_names_a_module_or_test_that_exists():
    assert len(SLOW) > 50
    for key in SLOW:
        module, _, test = key.partition("::")
        assert (REPO / "tests" / module).is_file(), key
        assert not test or test.split("[")[0] in _tests(module), key


def test_each_rule_keeps_a_fast_case_in_the_quick_loop():
    for key in QUICK:
        module, _, test = key.partition("::")
        name = test.split("[")[0]
        assert name in _tests(module), key
        assert not {module, f"{module}::{name}", key} & SLOW.keys(), key


def test_the_suite_runs_at_one_torch_thread():
    """conftest sets one torch thread, as the app does on a 2-core machine, and every test
    before this one left it so (two threads made a tiny model's forward ≈ 36 times dearer in
    CPU on the loaded 2-core machine)."""
    import torch

    assert torch.get_num_threads() == 1
