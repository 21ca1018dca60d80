"""What a tree round returns: one frozen record per step and the finished round, the same
roles as the chain's (``engine/chain/trace.py``: ``ProposeTrace`` / ``VerifyTrace`` /
``CommitTrace`` / ``RoundTrace``). Each step record carries the KV-state table before and
after its step; the tree's own views (:class:`~specdec_core.engine.tree.views.TreeView`,
:class:`~specdec_core.engine.tree.views.MaskView`,
:class:`~specdec_core.engine.tree.views.CompactionView`) ride inside. A round's values live
once: :class:`TreeRoundTrace` holds its three steps and its record, nothing copied out.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdec_core.core.trace import KVState, TokenInfo
from specdec_core.core.words import RoundKind, StopReason
from specdec_core.engine.tree.records import TreeRoundRecord
from specdec_core.engine.tree.views import CompactionView, MaskView, TreeView


@dataclass(frozen=True)
class TreeProposeTrace:
    """The drafted tree (every node ``tentative``), its per-depth ``shape`` after any cut
    near ``max_new_tokens`` or the context end, the verify forward's tree mask, and what
    drafting cost (ms)."""

    round_index: int
    shape: tuple[int, ...]
    tree: TreeView
    mask: MaskView
    draft_forwards: int
    draft_ms: float
    kv_before: KVState
    kv_after: KVState


@dataclass(frozen=True)
class TreeVerifyTrace:
    """The tree after the masked forward and the walk: every node's state final, the
    accepted path and the target's token (``tree.path``, ``tree.next_token``). What the
    commit appends is the round's record (``Session.current_record`` until the commit).
    ``kv_after``: the target's cache holds every node, the processors stand on the
    committed ids + the accepted path."""

    round_index: int
    tree: TreeView
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


@dataclass(frozen=True)
class TreeRoundTrace:
    """A finished tree round: its three steps and its :class:`TreeRoundRecord` (what the
    statistics are derived from, ``summarize_tree``). The KV tables of the round:
    ``propose.kv_before`` (the committed ids before it), ``verify.kv_after`` (right after
    the verify forward and the walk) and ``commit.kv_after`` (rolled back to the new
    committed ids), each with the processors' state when the session has one."""

    round_index: int
    propose: TreeProposeTrace
    verify: TreeVerifyTrace
    commit: TreeCommitTrace
    record: TreeRoundRecord
