"""Tree verification (SpecInfer, Miao et al. 2024; EAGLE-2's dynamic trees build on it):
the draft proposes a *tree* of candidates, the target scores the whole tree in ONE
forward with a tree attention mask, and the accepted root-to-leaf path (at each node the
child the walk accepts: the target's argmax, or at T > 0 the first sibling the residual
rule accepts, so not necessarily the longest path that could pass) plus one target token
is committed.

* **Draft a tree.** ``shape = (k_1, k_2, …)``: every node at depth ``d − 1`` gets ``k_d``
  children, breadth first, until the node budget is spent (any drafter with a
  distribution; prompt lookup is refused). Greedy (temperature 0): the ``k`` most likely
  distinct tokens of the draft at that node. Sampling: ``k`` children
  drawn i.i.d. from the draft's ``q`` at that node (the multi-candidate rule needs
  i.i.d. siblings, ``rules/tree_node.py``).
* **Verify in one forward.** Inputs: the committed tokens without target KV, then every
  node. Each node attends to the cached prefix, those pending tokens, its ancestors and
  itself (a 4D float mask ``[1, 1, n, P + n]``: 0 where allowed, ``finfo.min``
  elsewhere) and sits at position ``depth`` after the last committed token (explicit
  ``position_ids``). Row ``i`` of the logits is then exactly what a chain forward over
  the root-to-``i`` path would give (tested to 1e-5).
* **Walk the tree.** From the root, at each node: greedy — move to the child equal to the
  target's argmax, else that argmax is the correction; sampling — the siblings' verdict of
  :func:`specdec_core.rules.tree_node.verify_node`. A leaf reached gives a bonus token from
  its ``p``.
* **History-dependent processors** (penalties, a grammar: ``core/processors.py``). Each
  node's rows are processed for *its own path*: the draft's row at a node (from which its
  children are drawn) and the target's row there both see ``committed + the tokens on the
  path from the root to that node`` (never a sibling's), with
  :meth:`~specdec_core.core.processors.Processors.row`, before temperature/top-k/top-p. The
  grammar matcher is synced path by path (rolled back to the common prefix, then advanced).
  Drafting leaves the processors on the last expanded node's path; the walk leaves them on
  ``committed + the accepted path`` (the correction/bonus token not yet included); the
  commit's :func:`specdec_core.engine.rounds.rollback` brings them to the committed ids.
* **Compact the KV.** The accepted path's keys/values are moved into place right after
  the committed prefix and the rest is cropped, so the target's cache ends equal to a
  plain decode of the committed text (tested); the draft's cache is rolled back as usual.

Beyond the paper: no dynamic tree shape and no tree attention in the *draft* (each
expanded node is one ``Drafter.tree_logits`` call from the drafter's cache: one forward of
the draft model or early exit, 0 to several of the EAGLE head, which catches up on
features; the round counts the forwards that ran), to keep the lesson readable.

This module is the tree mechanism — draft, mask, forward, compaction, walk and their
verdict types. The round driver that strings them together (settings checks, the
round's record and commit, :func:`~specdec_core.engine.tree.generate.generate_tree`) is
``engine/tree/generate.py``; ``engine/tree/session.py`` runs the same pieces step by step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.processors import Processors
from specdec_core.core.sampling import (
    SamplingConfig,
    logits_to_probs,
    near_tie_argmax,
    near_tie_draw,
)
from specdec_core.core.words import VerdictKind
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import no_tree_code
from specdec_core.rules.tree_node import verify_node


def parse_shape(text: str) -> tuple[int, ...]:
    """``"2,2,1,1"`` → ``(2, 2, 1, 1)``: children per node at each depth, each 1..4, depth
    1..8.

    Raises:
        ConfigError: anything else.
    """
    try:
        shape = tuple(int(x) for x in str(text).split(","))
    except ValueError as exc:
        raise ConfigError(f"tree shape must look like 2,2,1,1, got {text!r}", "tree") from exc
    if not 1 <= len(shape) <= 8 or not all(1 <= k <= 4 for k in shape):
        raise ConfigError(f"tree shape: 1..8 depths of 1..4 children, got {text!r}", "tree")
    return shape


def tree_refused(code: str, drafter: str = "") -> ConfigError:
    """The error for a tree setting refused for reason ``code`` (the UI's string key is
    ``err_<code>``): ``tree_no_ngram`` (``drafter`` has no distribution: it cannot give
    more than one candidate per position) or ``tree_needs_probabilistic`` (a greedy draft
    method at temperature > 0: siblings must be drawn i.i.d. from ``q``)."""
    if code == "tree_block":
        message = (
            f"the {drafter!r} drafter proposes one path per forward (a q row for each position "
            "of one block, none for a sibling), so it cannot draft a tree; verify a chain or "
            "use the draft model"
        )
    elif code == "tree_no_ngram":
        message = (
            f"the {drafter!r} drafter proposes one continuation without probabilities, so "
            "it cannot draft a tree; use the draft model"
        )
    else:
        message = "tree drafting at temperature > 0 needs the probabilistic method"
    return ConfigError(message, code, drafter=drafter)


@dataclass
class DraftTree:
    """Nodes in breadth-first order: ``tokens[i]``, ``parents[i]`` (−1: a child of the
    root, i.e. a candidate for the first new position), ``depths[i]`` (1-based).
    ``child_q[j]``: the draft's ``[V]`` float32 row the children of node ``j`` were drawn
    from (``j = −1`` for the root)."""

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
    """Expand a token tree after ``context`` with ``drafter.tree_logits`` (see the module
    doc; one call per expanded node, from and extending the drafter's own cache).
    Returns ``(tree, draft forwards)``: the forwards that really ran (the difference of
    ``drafter.forwards``; a call may run several or none); at most ``budget`` nodes.
    ``generator``: the round's drafting stream
    (:func:`specdec_core.engine.rounds.round_stream` ``"draft"``),
    for the sibling draws at temperature > 0. ``processors`` (active ones): the draft's row
    at each node is processed for ``context`` + that node's path before
    temperature/top-k/top-p, so a node's children are drawn from (greedy: the top ``k``
    of) the processed row and never from a token it forbids (a child with logit ``−inf``
    is dropped, so a node may get fewer than ``k`` children); the processors then stand on
    the last expanded node's path.

    Raises:
        ConfigError: the drafter has no distribution (prompt lookup): it cannot give
        more than one candidate per position.
    """
    tree, frontier, forwards_before = DraftTree(), [-1], drafter.forwards
    process = processors is not None and processors.active
    for k in shape:
        new_frontier = []
        for parent in frontier:
            room = budget - len(tree.tokens)
            if room <= 0:
                break
            path = [tree.tokens[i] for i in tree.path(parent)] if parent >= 0 else []
            logits = drafter.tree_logits(context + path)  # [V]
            if logits is None:  # the block drafter: one path per forward; prompt lookup: no q
                raise tree_refused(no_tree_code(drafter), drafter.name)
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


def tree_forward(target: ModelCache, committed: list[int], tree: DraftTree) -> torch.Tensor:
    """ONE target forward over the pending committed tokens and every node
    (:meth:`ModelCache.extend_masked`: node ``i`` at position ``depth`` after the last
    committed token, attending as :func:`tree_attention` says).

    Returns:
        ``[1 + len(tree), V]`` float32 logits: row 0 predicts the first new position (the
        root's children), row ``1 + i`` the position after node ``i``. The cache then holds
        the prefix, the pending tokens and all nodes (``target.ids`` covers only the
        prefix and the pending tokens until :func:`compact` is called); with
        ``target.track_hidden`` set, so does ``target.hidden`` (one row per cached
        position, the nodes' rows last).
    """
    pending = target.sync_to(committed)
    prefix = target.kv_len
    base = prefix + len(pending) - 1
    positions = list(range(prefix, prefix + len(pending))) + [base + d for d in tree.depths]
    allowed = tree_attention(prefix, len(pending), tree)
    logits = target.extend_masked(pending + tree.tokens, positions, allowed, len(pending))
    return logits[len(pending) - 1 :]  # [1 + n_nodes, V]


def compact(target: ModelCache, n_nodes: int, path: list[int], path_tokens: list[int]) -> None:
    """Keep the accepted path's keys/values (node indices ``path``, of the ``n_nodes``
    after the committed prefix) right after the prefix, drop every other node's
    (:meth:`ModelCache.keep_rows`); ``target.ids`` becomes prefix + path. ``target.hidden``
    (when kept) is compacted the same way."""
    if any(not 0 <= i < n_nodes for i in path):
        raise ValueError(f"path {path} names a node outside 0..{n_nodes - 1}")
    target.keep_rows([target.kv_len + i for i in path], path_tokens)


@dataclass(frozen=True)
class NodeCheck:
    """The rule's look at one node: ``p``/``q`` are ``p(x)``/``q(x)`` of its token at the
    parent's row (``p`` before any residual); ``accept_prob`` the probability it was
    accepted with (sampling: ``min(1, p_i(x)/q(x))`` against the current residual;
    greedy: 1 for the target's argmax, else 0); ``u`` the uniform draw (``None`` greedy);
    ``near_tie``: the decision sat closer to its threshold than float error (greedy: the
    target's top two logits at the parent, ``core/sampling.near_tie_argmax``; sampling:
    ``u`` against ``accept_prob``, ``near_tie_draw``)."""

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
    """Follow the tree from the root with the target's rows (``logits`` from
    :func:`tree_forward`): greedy match, or the multi-candidate rule per node, whose draws
    come from ``generator``, the round's verification stream
    (:func:`specdec_core.engine.rounds.round_stream` ``"verify"``), never the drafting stream.

    ``processors`` (active ones): the target's row at each node the walk reaches is
    processed for ``committed`` + that node's path (:meth:`Processors.row`) before
    temperature/top-k/top-p; only those rows decide anything (the others are never read).
    The processors then stand on ``committed`` + the accepted path."""
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
