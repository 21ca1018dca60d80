"""One tree round as the statistics see it (``engine/tree/round.py``), every tree statistic
derived from a list of them, and the tree's token-strip rule — the counterpart of
``engine/chain/records.py`` (both use ``core/records.py``'s histogram and shares).

State of each node of a round's tree after verification:

* ``accepted`` — on the accepted root-to-leaf path and committed;
* ``rejected`` — tested and rejected: at a node where the walk stopped (the correction
  follows) or moved on to another sibling (greedy: every child that is not the target's
  argmax; sampling: the siblings tried before the accepted one);
* ``unchecked`` — never tested: under a rejected or unchecked node, or a sibling after
  the accepted one (sampling tries siblings in order, stops at the first accepted);
* ``cut`` — on the accepted path after a stop (end-of-text, a stop string) fell on an
  earlier path node: the rule accepted it, it was never committed.

``accepted + rejected + unchecked + cut = nodes``. Pure module (plain values; JSON ready).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from specdec_core.core.records import accepted_histogram, mean, share_by_index
from specdec_core.core.words import NODE_STATES, NodeState, RoundKind, StripState


@dataclass(frozen=True)
class TreeRoundRecord:
    """The per-round record of a tree round (plain values).

    Attributes:
        shape: children per node at each depth for this round (the setting, shortened
            near ``max_new_tokens`` or the context end; ``()``: a plain target step).
        tokens, parents, depths: ``[n]`` per node in breadth-first order: token id,
            parent node (−1 = a child of the root) and depth (1-based).
        states: ``[n]`` :data:`NodeState` per node.
        path: node indices the rule accepted, root → leaf (committed or cut).
        next_token: the target's token after the path (correction or bonus), whether or
            not a stop let it be committed.
        kind: ``correction`` | ``bonus`` | ``stopped`` (a stop cut the commit short).
        appended: ids committed this round (committed path tokens, then ``next_token``).
        draft_forwards: drafter forwards run to draft the tree (a draft model: one per
            expanded node; the EAGLE head: 0 to several per node, as they ran).
        target_forwards: target forwards the round ran: one verify forward (plus the
            prompt's prefill an EAGLE drafter runs in its first round).
    """

    shape: tuple[int, ...]
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    depths: tuple[int, ...]
    states: tuple[NodeState, ...]
    path: tuple[int, ...]
    next_token: int
    kind: RoundKind
    appended: tuple[int, ...]
    draft_forwards: int
    target_forwards: int = 1

    @property
    def nodes(self) -> int:
        return len(self.tokens)

    @property
    def accepted(self) -> int:
        """Committed path nodes (the accepted path length, 0..depth)."""
        return self.states.count("accepted")

    @property
    def depth(self) -> int:
        """Deepest node of the tree (0 for an empty tree)."""
        return max(self.depths, default=0)

    def to_json(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        out["nodes"] = self.nodes
        out["accepted"] = self.accepted
        return out


def node_states(
    n_nodes: int, path: Sequence[int], rejected: Sequence[int], committed_path: int
) -> tuple[NodeState, ...]:
    """States of ``n_nodes`` nodes: ``path`` nodes ``accepted`` (the first
    ``committed_path`` of them) or ``cut`` (the rest), ``rejected`` nodes, every other
    node ``unchecked``.

    Raises:
        ValueError: a node both on the path and rejected, or out of range.
    """
    states: list[NodeState] = ["unchecked"] * n_nodes
    for i in rejected:
        states[i] = "rejected"
    for j, i in enumerate(path):
        if states[i] != "unchecked":
            raise ValueError(f"node {i} is both on the accepted path and rejected")
        states[i] = "accepted" if j < committed_path else "cut"
    return tuple(states)


def tree_strip_states(record: TreeRoundRecord) -> list[tuple[int, StripState]]:
    """``(token id, state)`` of each token a tree round appended, in order (the chain's
    ``strip_states``): committed path nodes ``accepted``, the target's token the round's
    ``correction``/``bonus``, a token after the path in a ``stopped`` round (never, today:
    a stop on the path cuts the rest) plain ``committed``."""
    on_path = sum(1 for i in record.path if record.states[i] == "accepted")
    out: list[tuple[int, StripState]] = []
    for j, tok in enumerate(record.appended):
        kind = record.kind
        state: StripState = (
            "accepted" if j < on_path else kind if kind in ("correction", "bonus") else "committed"
        )
        out.append((tok, state))
    return out


@dataclass(frozen=True)
class TreeStats:
    """Statistics of a list of tree rounds (all derived by :func:`summarize_tree`).

    Attributes:
        rounds: tree rounds. target_forwards / draft_forwards: summed over rounds.
        tokens: committed tokens. nodes: drafted nodes, summed.
        tokens_per_target_forward: committed tokens per target forward (the tree's gain).
        mean_accepted: mean accepted path length (committed path nodes per round).
        mean_nodes: drafted nodes per round.
        accepted_histogram: ``[n]`` rounds that committed exactly ``n`` path nodes.
        depth_acceptance: ``[d]`` share of rounds whose committed path reached depth
            ``d + 1``, among rounds whose tree had that depth.
        state_counts: nodes per :data:`NodeState`, summed over rounds.
    """

    rounds: int
    target_forwards: int
    draft_forwards: int
    tokens: int
    nodes: int
    tokens_per_target_forward: float
    mean_accepted: float
    mean_nodes: float
    accepted_histogram: tuple[int, ...]
    depth_acceptance: tuple[float, ...]
    state_counts: dict[str, int]

    def to_json(self) -> dict:
        out = asdict(self)
        out["accepted_histogram"] = list(self.accepted_histogram)
        out["depth_acceptance"] = list(self.depth_acceptance)
        return out


def summarize_tree(records: Sequence[TreeRoundRecord]) -> TreeStats:
    """Every tree statistic of ``records``, by the definitions above."""
    n = len(records)
    target = sum(r.target_forwards for r in records)
    tokens = sum(len(r.appended) for r in records)
    nodes = sum(r.nodes for r in records)
    return TreeStats(
        rounds=n,
        target_forwards=target,
        draft_forwards=sum(r.draft_forwards for r in records),
        tokens=tokens,
        nodes=nodes,
        tokens_per_target_forward=mean(tokens, target),
        mean_accepted=mean(sum(r.accepted for r in records), n),
        mean_nodes=mean(nodes, n),
        accepted_histogram=accepted_histogram(records),
        depth_acceptance=share_by_index([r.accepted > d for d in range(r.depth)] for r in records),
        state_counts={s: sum(r.states.count(s) for r in records) for s in NODE_STATES},
    )
