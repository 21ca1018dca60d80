"""One tree round (SpecInfer, Miao et al. 2024; EAGLE-2's dynamic trees build on it): the
draft proposes a *tree* of candidates, the target scores it in ONE forward with a tree
attention mask, and the accepted root-to-leaf path plus one target token is committed.

    tree, forwards = draft_tree(drafter, committed, shape, sampling, draft_rng, budget)
    logits, fed = tree_forward(target, committed, tree)   # ONE masked target forward
    verdict = walk(tree, logits, sampling, verify_rng)     # root to leaf: the node rule
    record, stop = decide_round(ctx, tree, verdict, committed, shape, forwards, 1)
    committed, _ = apply_round(ctx, committed, record)      # KV compaction, rollback

* **Draft.** ``shape = (k_1, k_2, …)``: each node at depth ``d − 1`` gets ``k_d`` children,
  breadth first, until the node budget is spent, one ``Drafter.tree_level_logits`` call
  per depth (prompt lookup, with no ``q``, is refused). Greedy: the ``k`` most likely
  distinct tokens; sampling: ``k`` children drawn i.i.d. from ``q`` at that node (the
  node rule needs i.i.d. siblings).
* **Verify.** Inputs: the committed tokens without target KV, then every node; a node
  attends to the cached prefix, those pending tokens, its ancestors and itself (mask
  ``[1, 1, n, P + n]``) at position ``depth`` after the last committed token, so row ``i``
  is what a chain forward over the root-to-``i`` path gives (tested to 1e-5).
* **Walk.** At each node from the root: greedy, move to the child equal to the target's
  argmax, else that argmax is the correction; sampling, the siblings' verdict of
  :func:`~specdec_core.rules.acceptance.verify_node` (the first sibling accepted, so not
  necessarily the longest path that could pass). A leaf reached gives a bonus from its ``p``.
* **Processors** (penalties, a grammar): each node's draft and target rows are processed
  for ``committed`` + its own root-to-node path (never a sibling's), before
  temperature/top-k/top-p; the grammar matcher is synced path by path. Drafting leaves
  them on the last expanded path, the walk on the accepted one; :func:`apply_round` brings
  them to the committed ids.
* **Compact.** The accepted path's keys/values move right after the committed prefix, the
  rest is cropped: the target's cache equals a plain decode (tested).

Beyond the paper: no dynamic tree shape (a readable lesson); the draft proposes a depth at
a time; the round counts the draft forwards that ran. ``generate_tree`` and the session's
``TreeSteps`` run these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.kvcache import ModelCache, rollback
from specdec_core.core.processors import Processors
from specdec_core.core.records import round_kind
from specdec_core.core.sampling import (
    SamplingConfig,
    logits_to_probs,
    near_tie_argmax,
    near_tie_draw,
)
from specdec_core.core.words import VerdictKind
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import NO_TREE_WHY, no_tree_code
from specdec_core.engine.tree.records import TreeRoundRecord, node_states
from specdec_core.rules.acceptance import verify_node

if TYPE_CHECKING:
    from specdec_core.engine.rounds import StopRule

PROBABILISTIC_TREE = "tree drafting at temperature > 0 needs the probabilistic method"


def tree_refused(code: str, drafter: str = "") -> ConfigError:
    """The error for a tree refused for ``code`` (key ``err_<code>``): a drafter's (its
    row's ``tree_code``) or ``tree_needs_probabilistic`` (i.i.d. siblings from ``q``)."""
    why = NO_TREE_WHY.get(code)  # a drafter's reason (its table row's code)
    message = f"the {drafter!r} drafter {why}" if why else PROBABILISTIC_TREE
    return ConfigError(message, code, drafter=drafter)


@dataclass
class DraftTree:
    """Nodes in breadth-first order: ``tokens[i]``, ``parents[i]`` (−1: a child of the
    root), ``depths[i]`` (1-based). ``child_q[j]``: the draft's ``[V]`` float32 row the
    children of node ``j`` were drawn from (``j = −1``: the root)."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    child_q: dict[int, torch.Tensor] = field(default_factory=dict)

    def children(self, node: int) -> list[int]:
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def path(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node``."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]


def draft_tree(
    drafter: Drafter,
    context: list[int],
    shape: Sequence[int],
    sampling: SamplingConfig,
    generator: torch.Generator,
    budget: int = 12,
    processors: Processors | None = None,
) -> tuple[DraftTree, int]:
    """Propose: a tree of at most ``budget`` nodes after ``context`` (sibling draws from
    ``generator``, the round's drafting stream). Active ``processors`` never let a child be
    a token they forbid (a node may get fewer than ``k``). Returns ``(tree, draft forwards
    that ran)``. Raises ConfigError for a drafter that cannot draft a tree."""
    tree, frontier, forwards_before = DraftTree(), [-1], drafter.forwards
    process = processors is not None and processors.active
    with drafter.full_head_for(processors):  # a grammar: the full head (drafters/base.py)
        for k in shape:
            new_frontier, level = [], {}
            for n, parent in enumerate(frontier):
                room = budget - len(tree.tokens)
                if room <= 0:
                    break
                path = [tree.tokens[i] for i in tree.path(parent)] if parent >= 0 else []
                if parent not in level:  # this node and the next of its depth (≤ k each)
                    expand = frontier[n : n + (room + k - 1) // k]
                    paths = [[tree.tokens[i] for i in tree.path(p)] for p in expand]
                    rows = drafter.tree_level_logits(context, paths)  # [len(expand), V]
                    if rows is None:  # the block drafter: one path per forward; lookup: no q
                        raise tree_refused(no_tree_code(drafter), drafter.name)
                    level = dict(zip(expand, rows, strict=True))
                logits = level[parent]  # [V]
                if process:
                    assert processors is not None
                    logits = processors.row(logits, context + path)
                q = logits_to_probs(logits, sampling).cpu()
                if sampling.greedy:
                    kids = torch.topk(logits.float().cpu(), min(k, room)).indices.tolist()
                    if process:  # a forbidden token is never a candidate
                        kids = [t for t in kids if float(logits[t]) > float("-inf")]
                else:
                    kids = torch.multinomial(q, min(k, room), replacement=True, generator=generator)
                    kids = kids.tolist()
                tree.child_q[parent] = q
                depth = (tree.depths[parent] if parent >= 0 else 0) + 1
                for token in kids:
                    tree.tokens.append(int(token))
                    tree.parents.append(parent)
                    tree.depths.append(depth)
                    new_frontier.append(len(tree.tokens) - 1)
            frontier = new_frontier
    return tree, drafter.forwards - forwards_before


def tree_allowed(tree: DraftTree) -> torch.Tensor:
    """``[n, n]`` bool: node ``i`` may attend to node ``j`` (its ancestors and itself).
    Every node also sees every committed token (the prefix and the pending tokens)."""
    n = len(tree.tokens)
    allowed = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        allowed[i, tree.path(i)] = True
    return allowed


def tree_attention(prefix: int, pending: int, tree: DraftTree) -> torch.Tensor:
    """``[n, prefix + n]`` bool, ``n = pending + len(tree)``: pending tokens are causal;
    node ``i`` sees the prefix, every pending token, its ancestors and itself (the cache
    turns it into the additive mask, :meth:`ModelCache.extend_masked`)."""
    n = pending + len(tree.tokens)
    allowed = torch.zeros(n, prefix + n, dtype=torch.bool)
    allowed[:, :prefix] = True
    for r in range(pending):
        allowed[r, prefix : prefix + r + 1] = True
    allowed[pending:, prefix : prefix + pending] = True
    allowed[pending:, prefix + pending :] = tree_allowed(tree)
    return allowed


def tree_forward(target: ModelCache, ids: list[int], tree: DraftTree) -> tuple[torch.Tensor, int]:
    """Verify, part 1: ONE target forward over the pending committed ``ids`` and every
    node (masked by :func:`tree_attention`). Returns ``[1 + len(tree), V]`` float32 logits
    (row 0 for the root's children, row ``1 + i`` after node ``i``) and the tokens it fed.
    The cache (and ``target.hidden``) then holds every node; ``target.ids`` only the
    committed ones until :func:`compact`."""
    pending = target.sync_to(ids)
    prefix = target.kv_len
    base = prefix + len(pending) - 1
    positions = list(range(prefix, prefix + len(pending))) + [base + d for d in tree.depths]
    allowed = tree_attention(prefix, len(pending), tree)
    logits = target.extend_masked(pending + tree.tokens, positions, allowed, len(pending))
    return logits[len(pending) - 1 :], len(pending) + len(tree.tokens)  # [1 + n_nodes, V]


def compact(target: ModelCache, n_nodes: int, path: list[int], path_tokens: list[int]) -> None:
    """Keep the accepted path's keys/values (node indices ``path`` of the ``n_nodes`` after
    the committed prefix; ``target.hidden`` too) right after the prefix, drop every other
    node's (:meth:`ModelCache.keep_rows`); ``target.ids`` becomes prefix + path."""
    if any(not 0 <= i < n_nodes for i in path):
        raise ValueError(f"path {path} names a node outside 0..{n_nodes - 1}")
    target.keep_rows([target.kv_len + i for i in path], path_tokens)


@dataclass(frozen=True)
class NodeCheck:
    """The rule's look at one node: ``p(x)``/``q(x)`` of its token at the parent's row,
    ``accept_prob`` (sampling: ``min(1, p_i(x)/q(x))`` against the current residual;
    greedy: 1 for the argmax, else 0), ``u`` (``None`` greedy), ``near_tie``: the decision
    sat closer to its threshold than float error (``core/sampling.near_tie_*``)."""

    node: int
    p: float
    q: float
    accept_prob: float
    u: float | None
    accepted: bool
    near_tie: bool = False


@dataclass(frozen=True)
class TreeVerdict:
    """``path``: accepted node indices root → leaf; ``next_token``: correction or bonus;
    ``kind``: correction | bonus; ``checks``: every node the rule looked at, in order."""

    path: tuple[int, ...]
    next_token: int
    kind: VerdictKind
    checks: tuple[NodeCheck, ...] = ()

    @property
    def rejected(self) -> tuple[int, ...]:
        """Nodes checked and rejected."""
        return tuple(c.node for c in self.checks if not c.accepted)


def walk(
    tree: DraftTree,
    logits: torch.Tensor,
    sampling: SamplingConfig,
    generator: torch.Generator,
    processors: Processors | None = None,
    committed: Sequence[int] = (),
) -> TreeVerdict:
    """Verify, part 2: the walk from the root over :func:`tree_forward`'s rows (module
    doc), node rule draws from ``generator``, the round's verification stream. Active
    ``processors`` end on ``committed`` + the accepted path."""
    node, path, checks = -1, [], []
    process = processors is not None and processors.active
    base = list(committed)
    while True:
        row = logits[node + 1]
        if process:
            assert processors is not None
            row = processors.row(row, base + [tree.tokens[i] for i in path])
        p = logits_to_probs(row, sampling).cpu()
        kids = tree.children(node)
        q = tree.child_q.get(node, p)
        if sampling.greedy:
            want, tie = int(p.argmax()), near_tie_argmax(row)
            for c in kids:
                hit, x = tree.tokens[c] == want, tree.tokens[c]
                checks.append(NodeCheck(c, float(p[x]), float(q[x]), float(hit), None, hit, tie))
            match = [c for c in kids if tree.tokens[c] == want]
            if not match:
                kind = "correction" if kids else "bonus"
                return TreeVerdict(tuple(path), want, kind, tuple(checks))
            node = match[0]
        else:
            verdict = verify_node(p, q, [tree.tokens[c] for c in kids], generator)
            for i, u in enumerate(verdict.u):
                x = tree.tokens[kids[i]]
                a = verdict.accept_probs[i]
                hit, tie = verdict.accepted == i, near_tie_draw(u, a)
                checks.append(NodeCheck(kids[i], float(p[x]), float(q[x]), a, u, hit, tie))
            if verdict.accepted is None:
                kind = "correction" if kids else "bonus"
                return TreeVerdict(tuple(path), verdict.token, kind, tuple(checks))
            node = kids[verdict.accepted]
        path.append(node)


@dataclass(frozen=True)
class TreeContext:
    """What stays fixed over a run's rounds: the target's cache, the drafter, the history
    processors (``None``: none apply), the stop rule, and ``prompt_len`` (ids before the
    generated ones, which the stop counts)."""

    target: ModelCache
    drafter: Drafter
    processors: Processors | None
    stop: StopRule
    prompt_len: int


def decide_round(
    ctx: TreeContext,
    tree: DraftTree,
    verdict: TreeVerdict,
    committed: list[int],
    shape: Sequence[int],
    draft_forwards: int,
    target_forwards: int,
) -> tuple[TreeRoundRecord, str | None]:
    """What the round commits (path tokens + correction/bonus, cut short by the stop) and
    its record; ``committed`` is not changed. The forwards the round ran: the draft's, and
    the target's (verify, plus an EAGLE drafter's first prefill)."""
    path_tokens = [tree.tokens[i] for i in verdict.path]
    proposal = path_tokens + [verdict.next_token]
    appended, reason = ctx.stop.cut(committed, proposal, ctx.prompt_len)
    on_path = min(len(verdict.path), len(appended))
    record = TreeRoundRecord(
        shape=tuple(int(k) for k in shape),
        tokens=tuple(tree.tokens),
        parents=tuple(tree.parents),
        depths=tuple(tree.depths),
        states=node_states(len(tree.tokens), verdict.path, verdict.rejected, on_path),
        path=tuple(verdict.path),
        next_token=int(verdict.next_token),
        kind=round_kind(len(verdict.path), len(appended), verdict.kind),
        appended=tuple(int(t) for t in appended),
        draft_forwards=int(draft_forwards),
        target_forwards=int(target_forwards),
    )
    return record, reason


def apply_round(
    ctx: TreeContext, committed: list[int], record: TreeRoundRecord
) -> tuple[list[int], tuple[int, int]]:
    """Compact the target's cache to the committed path, roll both caches and the
    processors back to the new committed ids (the appended token keeps no KV;
    ``committed`` is not changed). Returns ``(ids, (target, draft) rows removed)``."""
    path = [i for i in record.path if record.states[i] == "accepted"]
    compact(ctx.target, len(record.tokens), path, [record.tokens[i] for i in path])
    ids = committed + list(record.appended)
    return ids, rollback(ctx.target, ctx.drafter, ctx.processors, ids)
