"""The frozen views of a tree round that the step-through page draws (plain values +
numpy): the drafted tree (:class:`TreeView` of :class:`TreeNodeView`), the tree mask grid
(:class:`MaskView`) and the KV compaction plan (:class:`CompactionView` of
:class:`KVSlot`), plus the pure functions that build them from a round's tree, verdict and
record. ``engine/tree/session.py`` fills them; the step records that carry them are in
``engine/tree/trace.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specdec_core.core.trace import TokenInfo
from specdec_core.core.words import NodeViewState, RoundKind, VerdictKind
from specdec_core.engine.tree.records import TreeRoundRecord
from specdec_core.engine.tree.round import DraftTree, TreeVerdict, tree_allowed

SlotAction = Literal["kept", "moved", "dropped"]


@dataclass(frozen=True)
class TreeNodeView:
    """One node of the drafted tree.

    Attributes:
        index: node index (breadth-first order, the order of the verify forward's rows).
        token: the node's token. parent: parent node (−1: a child of the root).
        depth: 1-based depth. position: 0-based position in the text the node would take
            (= its position id in the verify forward: committed length − 1 + depth).
        q: the draft's probability of the token at the parent (after temperature/top-k/
            top-p; greedy drafts: the one-hot row, so 1 for the argmax child, else 0).
        p: the target's probability of the token at the parent (``None`` before verify;
            greedy: one-hot on the target's argmax).
        accept_prob: probability the rule accepted it with (sampling: ``min(1, p_i/q)``
            against the current residual; greedy 1 or 0); ``None`` if never checked.
        u: the uniform draw that decided it (sampling only), else ``None``.
        state: ``tentative`` before verify; then ``accepted`` | ``rejected`` |
            ``unchecked`` | ``cut`` (``engine/tree/records.py``).
        near_tie: the rule's decision at this node sat closer to its threshold than
            float error (:class:`~specdec_core.engine.tree.round.NodeCheck`).
    """

    index: int
    token: TokenInfo
    parent: int
    depth: int
    position: int
    q: float
    p: float | None
    accept_prob: float | None
    u: float | None
    state: NodeViewState
    near_tie: bool = False


@dataclass(frozen=True)
class TreeView:
    """The round's tree: ``nodes`` in breadth-first order; after verify, the accepted
    ``path`` (node indices root → leaf, committed or ``cut``), the target's ``next_token``
    and the round's ``kind`` (``correction`` | ``bonus`` | ``stopped``: a stop cut the
    commit short, so ``next_token`` was *not* appended); ``next_kind`` is the rule's own
    verdict on ``next_token`` (``correction`` | ``bonus``), kept when a stop came first.
    Before verify those are empty/``None``. ``committed_len``: committed tokens before the
    round (prompt included)."""

    round_index: int
    shape: tuple[int, ...]
    committed_len: int
    nodes: tuple[TreeNodeView, ...]
    path: tuple[int, ...] = ()
    next_token: TokenInfo | None = None
    kind: RoundKind | None = None
    next_kind: VerdictKind | None = None

    @property
    def next_appended(self) -> bool:
        """Whether ``next_token`` (★) was committed (False before verify and after a stop
        on the path)."""
        return self.kind in ("correction", "bonus")


@dataclass(frozen=True)
class MaskView:
    """The tree attention mask, restricted to the tree part.

    ``grid`` ``[n, 1 + n]`` bool: row ``i`` = node ``i``; column 0 = the committed prefix
    (all ``prefix_len`` committed tokens, which every node sees: always True), column
    ``1 + j`` = node ``j`` (True for ``i``'s ancestors and ``i`` itself). The full mask
    of the verify forward is ``[n, prefix_len + n]`` with the prefix column repeated
    ``prefix_len`` times. ``labels[i]``: node ``i``'s token text; ``positions[i]``: its
    position id (siblings share one)."""

    prefix_len: int
    grid: np.ndarray
    labels: tuple[str, ...]
    positions: tuple[int, ...]


@dataclass(frozen=True)
class KVSlot:
    """One row of the target's cache right after the verify forward.

    ``slot``: row index then (committed rows first, then one row per node in node
    order); ``node``: the tree node (``None`` for a committed token); ``state``:
    ``prompt`` | ``committed`` | the node's state; ``action``: ``kept`` (same row after
    compaction), ``moved`` (an accepted path node moved up to ``new_slot``) or
    ``dropped``; ``new_slot``: its row after the commit (``None`` when dropped)."""

    slot: int
    token: TokenInfo
    node: int | None
    state: str
    action: SlotAction
    new_slot: int | None


@dataclass(frozen=True)
class CompactionView:
    """The target's KV table before and after the path compaction of one round:
    ``slots`` (``rows_before`` of them) and the cache length after the commit
    (``rows_after``; = committed tokens − 1: the appended token has no KV yet).
    ``applied``: False while only planned (phase ``commit``), True once committed."""

    slots: tuple[KVSlot, ...]
    rows_before: int
    rows_after: int
    applied: bool


def build_tree_view(
    tree: DraftTree,
    shape: tuple[int, ...],
    verdict: TreeVerdict | None,
    record: TreeRoundRecord | None,
    round_index: int,
    committed: Sequence[int],
    token: Callable[[int], TokenInfo],
) -> TreeView:
    """The round's :class:`TreeView`: ``committed`` are the ids before the round;
    ``verdict``/``record`` are ``None`` before verify."""
    checks = {c.node: c for c in verdict.checks} if verdict else {}
    base = len(committed) - 1
    nodes = []
    for i, tok in enumerate(tree.tokens):
        c = checks.get(i)
        q = float(tree.child_q[tree.parents[i]][tok])
        p = None
        if c is not None:
            p = c.p
        state: NodeViewState = record.states[i] if record else "tentative"
        nodes.append(
            TreeNodeView(
                i,
                token(tok),
                tree.parents[i],
                tree.depths[i],
                base + tree.depths[i],
                q,
                p,
                c.accept_prob if c else None,
                c.u if c else None,
                state,
                bool(c and c.near_tie),
            )
        )
    if record is None:
        return TreeView(round_index, shape, len(committed), tuple(nodes))
    return TreeView(
        round_index,
        shape,
        len(committed),
        tuple(nodes),
        record.path,
        token(record.next_token),
        record.kind,
        verdict.kind if verdict is not None else None,
    )


def build_mask_view(
    tree: DraftTree, committed: Sequence[int], token: Callable[[int], TokenInfo]
) -> MaskView:
    """The tree part of the verify forward's mask (:class:`MaskView`)."""
    n = len(tree.tokens)
    grid = np.ones((n, 1 + n), dtype=bool)
    grid[:, 1:] = tree_allowed(tree).numpy()
    base = len(committed) - 1
    return MaskView(
        len(committed),
        grid,
        tuple(token(t).text for t in tree.tokens),
        tuple(base + d for d in tree.depths),
    )


def plan_compaction(
    committed_ids: Sequence[int],
    prompt_len: int,
    record: TreeRoundRecord,
    token: Callable[[int], TokenInfo],
) -> CompactionView:
    """The planned compaction of the target's cache for a verified round (which rows the
    commit keeps, moves, drops); ``applied`` is False."""
    committed = len(committed_ids)
    on_path = [i for i in record.path if record.states[i] == "accepted"]
    rows_after = committed + len(record.appended) - 1
    slots = []
    for slot, tok in enumerate(committed_ids):
        new = slot if slot < rows_after else None
        state = "prompt" if slot < prompt_len else "committed"
        slots.append(
            KVSlot(slot, token(tok), None, state, "kept" if new is not None else "dropped", new)
        )
    for i, tok in enumerate(record.tokens):
        new = committed + on_path.index(i) if i in on_path else None
        new = new if new is not None and new < rows_after else None
        action: SlotAction = (
            "dropped" if new is None else ("kept" if new == committed + i else "moved")
        )
        slots.append(KVSlot(committed + i, token(tok), i, record.states[i], action, new))
    return CompactionView(tuple(slots), committed + len(record.tokens), rows_after, False)
