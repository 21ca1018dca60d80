"""``engine/tree/views.py`` and the tree's strip rule on a crafted five-node tree with known
checks: the node views (positions, p, q, states), the mask grid, the compaction plan (which
rows are kept, moved, dropped) and ``tree_strip_states``, all exact."""

from __future__ import annotations

import numpy as np
import torch

from specdec_core.core.trace import TokenInfo
from specdec_core.engine.tree.records import TreeRoundRecord, node_states, tree_strip_states
from specdec_core.engine.tree.round import DraftTree, NodeCheck, TreeVerdict
from specdec_core.engine.tree.views import (
    KVSlot,
    build_mask_view,
    build_tree_view,
    plan_compaction,
)

V = 40
COMMITTED = [1, 2, 3]  # two prompt tokens, one generated
PROMPT_LEN = 2


def token(i: int) -> TokenInfo:
    return TokenInfo(i, f"t{i}", f"t{i}")


def row(**probs: float) -> torch.Tensor:
    q = torch.zeros(V)
    for key, value in probs.items():
        q[int(key[1:])] = value
    return q


#        root
#       /    \
#   0:10     1:11
#   /   \
# 2:20  3:21
#  |
# 4:30
TREE = DraftTree(
    tokens=[10, 11, 20, 21, 30],
    parents=[-1, -1, 0, 0, 2],
    depths=[1, 1, 2, 2, 3],
    child_q={-1: row(t10=0.5, t11=0.25), 0: row(t20=0.75, t21=0.125), 2: row(t30=1.0)},
)
# sampling walk: 0 accepted (1 never tried), 2 accepted (3 never tried), 4 rejected
VERDICT = TreeVerdict(
    path=(0, 2),
    next_token=31,
    kind="correction",
    checks=(
        NodeCheck(0, 0.6, 0.5, 1.0, 0.4, True),
        NodeCheck(2, 0.3, 0.75, 0.4, 0.2, True),
        NodeCheck(4, 0.1, 1.0, 0.1, 0.9, False),
    ),
)


def record(appended=(10, 20, 31), kind="correction") -> TreeRoundRecord:
    committed_path = min(len(appended), 2) if kind == "stopped" else 2
    return TreeRoundRecord(
        shape=(2, 2, 1),
        tokens=tuple(TREE.tokens),
        parents=tuple(TREE.parents),
        depths=tuple(TREE.depths),
        states=node_states(5, (0, 2), (4,), committed_path),
        path=(0, 2),
        next_token=31,
        kind=kind,
        appended=appended,
        draft_forwards=3,
    )


def test_tree_view_before_and_after_verify():
    before = build_tree_view(TREE, (2, 2, 1), None, None, 4, COMMITTED, token)
    assert (before.round_index, before.committed_len, before.path, before.kind) == (4, 3, (), None)
    assert [n.state for n in before.nodes] == ["tentative"] * 5
    assert [n.position for n in before.nodes] == [3, 3, 4, 4, 5]
    assert [n.q for n in before.nodes] == [0.5, 0.25, 0.75, 0.125, 1.0]
    assert [n.p for n in before.nodes] == [None] * 5 and not before.next_appended

    after = build_tree_view(TREE, (2, 2, 1), VERDICT, record(), 4, COMMITTED, token)
    assert [n.state for n in after.nodes] == [
        "accepted",
        "unchecked",
        "accepted",
        "unchecked",
        "rejected",
    ]
    assert [n.p for n in after.nodes] == [0.6, None, 0.3, None, 0.1]
    assert [n.accept_prob for n in after.nodes] == [1.0, None, 0.4, None, 0.1]
    assert [n.u for n in after.nodes] == [0.4, None, 0.2, None, 0.9]
    assert [n.parent for n in after.nodes] == [-1, -1, 0, 0, 2]
    assert (after.path, after.next_token, after.kind, after.next_kind) == (
        (0, 2),
        token(31),
        "correction",
        "correction",
    )
    assert after.next_appended

    stopped = build_tree_view(
        TREE, (2, 2, 1), VERDICT, record((10,), "stopped"), 4, COMMITTED, token
    )
    assert [n.state for n in stopped.nodes][:3] == ["accepted", "unchecked", "cut"]
    assert (stopped.kind, stopped.next_kind, stopped.next_appended) == (
        "stopped",
        "correction",
        False,
    )


def test_mask_view_grid():
    mask = build_mask_view(TREE, COMMITTED, token)
    want = np.array(
        [
            # prefix, 0, 1, 2, 3, 4
            [1, 1, 0, 0, 0, 0],
            [1, 0, 1, 0, 0, 0],
            [1, 1, 0, 1, 0, 0],
            [1, 1, 0, 0, 1, 0],
            [1, 1, 0, 1, 0, 1],
        ],
        dtype=bool,
    )
    assert mask.grid.dtype == np.bool_ and np.array_equal(mask.grid, want)
    assert mask.prefix_len == 3
    assert mask.labels == ("t10", "t11", "t20", "t21", "t30")
    assert mask.positions == (3, 3, 4, 4, 5)


def test_compaction_plan_keeps_moves_and_drops():
    plan = plan_compaction(COMMITTED, PROMPT_LEN, record(), token)
    assert (plan.rows_before, plan.rows_after, plan.applied) == (8, 5, False)
    assert plan.slots == (
        KVSlot(0, token(1), None, "prompt", "kept", 0),
        KVSlot(1, token(2), None, "prompt", "kept", 1),
        KVSlot(2, token(3), None, "committed", "kept", 2),
        KVSlot(3, token(10), 0, "accepted", "kept", 3),  # already in place
        KVSlot(4, token(11), 1, "unchecked", "dropped", None),
        KVSlot(5, token(20), 2, "accepted", "moved", 4),  # moves up over node 1's row
        KVSlot(6, token(21), 3, "unchecked", "dropped", None),
        KVSlot(7, token(30), 4, "rejected", "dropped", None),
    )
    stopped = plan_compaction(COMMITTED, PROMPT_LEN, record((10,), "stopped"), token)
    assert stopped.rows_after == 3
    assert [s.action for s in stopped.slots] == ["kept"] * 3 + ["dropped"] * 5


def test_tree_strip_states():
    assert tree_strip_states(record()) == [(10, "accepted"), (20, "accepted"), (31, "correction")]
    assert tree_strip_states(record((10,), "stopped")) == [(10, "accepted")]
    empty = TreeRoundRecord((), (), (), (), (), (), 31, "bonus", (31,), 0)
    assert tree_strip_states(empty) == [(31, "bonus")]
