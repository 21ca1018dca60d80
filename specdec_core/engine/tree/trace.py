"""What each step of a tree round returns: one frozen record per step, the same roles as
the chain's (``engine/chain/trace.py``: ``ProposeTrace`` / ``VerifyTrace`` /
``CommitTrace``). Each carries the KV-state table before and after its step; the tree's
own views (:class:`~specdec_core.engine.tree.views.TreeView`,
:class:`~specdec_core.engine.tree.views.CompactionView`) ride inside.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdec_core.core.trace import KVState, TokenInfo
from specdec_core.core.words import RoundKind, StopReason
from specdec_core.engine.tree.records import TreeRoundRecord
from specdec_core.engine.tree.views import CompactionView, TreeView


@dataclass(frozen=True)
class TreeProposeTrace:
    """The drafted tree (every node ``tentative``), its per-depth ``shape`` after any cut
    near ``max_new_tokens`` or the context end, and what drafting cost."""

    round_index: int
    shape: tuple[int, ...]
    tree: TreeView
    draft_forwards: int
    draft_ms: float
    kv_before: KVState
    kv_after: KVState


@dataclass(frozen=True)
class TreeVerifyTrace:
    """The tree after the masked forward and the walk (every node's state final), the
    round's record (what the commit appends), and the stop that cuts it short."""

    round_index: int
    tree: TreeView
    record: TreeRoundRecord
    stop_reason: StopReason | None
    verify_ms: float
    target_forward_tokens: int  # pending committed tokens + every node
    kv_before: KVState
    kv_after: KVState


@dataclass(frozen=True)
class TreeCommitTrace:
    """The committed path + correction/bonus token (cut short by a stop), and the target's
    cache compaction as applied (``compaction.applied``)."""

    round_index: int
    appended: tuple[TokenInfo, ...]
    kind: RoundKind
    compaction: CompactionView
    stop_reason: StopReason | None
    kv_before: KVState
    kv_after: KVState
