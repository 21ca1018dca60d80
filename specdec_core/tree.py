"""Tree verification (SpecInfer, Miao et al. 2024; EAGLE-2's dynamic trees build on it):
the draft proposes a *tree* of candidates, the target scores the whole tree in ONE
forward with a tree attention mask, and the longest accepted root-to-leaf path plus one
target token is committed.

* **Draft a tree.** ``shape = (k_1, k_2, …)``: every node at depth ``d − 1`` gets ``k_d``
  children, breadth first, until the node budget is spent. Greedy (temperature 0): the
  ``k`` most likely distinct tokens of the draft at that node. Sampling: ``k`` children
  drawn i.i.d. from the draft's ``q`` at that node (the multi-candidate rule needs
  i.i.d. siblings, ``acceptance_tree.py``).
* **Verify in one forward.** Inputs: the committed tokens without target KV, then every
  node. Each node attends to the cached prefix, those pending tokens, its ancestors and
  itself (a 4D float mask ``[1, 1, n, P + n]``: 0 where allowed, ``finfo.min``
  elsewhere) and sits at position ``depth`` after the last committed token (explicit
  ``position_ids``). Row ``i`` of the logits is then exactly what a chain forward over
  the root-to-``i`` path would give (tested to 1e-5).
* **Walk the tree.** From the root, at each node: greedy — move to the child equal to the
  target's argmax, else that argmax is the correction; sampling — the siblings' verdict of
  :func:`acceptance_tree.verify_node`. A leaf reached gives a bonus token from its ``p``.
* **Compact the KV.** The accepted path's keys/values are moved into place right after
  the committed prefix and the rest is cropped, so the target's cache ends equal to a
  plain decode of the committed text (tested); the draft's cache is rolled back as usual.

Beyond the paper: no dynamic tree shape and no tree attention in the *draft* (it runs one
cached forward per expanded node), to keep the lesson readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .acceptance_tree import verify_node
from .errors import ConfigError
from .inputs import SessionConfig, prompt_ids
from .kvcache import ModelCache, common_prefix_len
from .models import ModelPair
from .rounds import commit_tokens, stop_rule
from .sampling import SamplingConfig, logits_to_probs

MAX_TREE_NODES = 16


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
    draft: ModelCache,
    context: list[int],
    shape: Sequence[int],
    sampling: SamplingConfig,
    generator: torch.Generator,
    budget: int = 12,
) -> tuple[DraftTree, int]:
    """Expand a token tree after ``context`` with the draft model (see the module doc).
    Returns ``(tree, draft forwards)``; at most ``budget`` nodes."""
    tree, forwards, frontier = DraftTree(), 0, [-1]
    for k in shape:
        new_frontier = []
        for parent in frontier:
            room = budget - len(tree.tokens)
            if room <= 0:
                break
            path = [tree.tokens[i] for i in tree.path(parent)] if parent >= 0 else []
            logits = draft.extend(draft.sync_to(context + path))[-1]  # [V]
            forwards += 1
            q = logits_to_probs(logits, sampling).cpu()
            if sampling.greedy:
                kids = torch.topk(logits.float().cpu(), min(k, room)).indices.tolist()
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
    return tree, forwards


def tree_mask(prefix: int, pending: int, tree: DraftTree, dtype: torch.dtype) -> torch.Tensor:
    """``[1, 1, n, prefix + n]`` additive mask, ``n = pending + len(tree)``: pending tokens
    are causal; node ``i`` sees the prefix, every pending token, its ancestors and itself."""
    n = pending + len(tree.tokens)
    allowed = torch.zeros(n, prefix + n, dtype=torch.bool)
    allowed[:, :prefix] = True
    for r in range(pending):
        allowed[r, prefix : prefix + r + 1] = True
    for i in range(len(tree.tokens)):
        allowed[pending + i, prefix : prefix + pending] = True
        for a in tree.path(i):
            allowed[pending + i, prefix + pending + a] = True
    mask = torch.zeros(n, prefix + n, dtype=dtype)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


@torch.inference_mode()
def tree_forward(target: ModelCache, committed: list[int], tree: DraftTree) -> torch.Tensor:
    """ONE target forward over the pending committed tokens and every node.

    Returns:
        ``[1 + len(tree), V]`` float32 logits: row 0 predicts the first new position (the
        root's children), row ``1 + i`` the position after node ``i``. The cache then holds
        the prefix, the pending tokens and all nodes (``target.ids`` is *not* a sequence
        until :func:`compact` is called).
    """
    pending = target.sync_to(committed)
    prefix = target.kv_len
    model = target.model
    ids = torch.tensor([pending + tree.tokens], device=target.device)  # [1, n]
    base = prefix + len(pending) - 1
    positions = list(range(prefix, prefix + len(pending))) + [base + d for d in tree.depths]
    pos = torch.tensor([positions], device=target.device)
    mask = tree_mask(prefix, len(pending), tree, model.dtype).to(target.device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=target.cache,
                use_cache=True)  # fmt: skip
    target.ids.extend(pending)  # the tree part is reconciled by compact()
    target.forwards += 1
    logits = out.logits[0].float()  # [n, V]
    return logits[len(pending) - 1 :]


def compact(target: ModelCache, n_nodes: int, path: list[int], path_tokens: list[int]) -> None:
    """Keep the accepted path's keys/values (node indices ``path``) right after the
    committed prefix, drop every other node's; ``target.ids`` becomes prefix + path."""
    keep = target.kv_len  # prefix + pending (the nodes are not in target.ids)
    for layer in target.cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)  # [B, H, keep + n_nodes, D]
            picked = t[:, :, [keep + i for i in path]]
            setattr(layer, name, torch.cat([t[:, :, :keep], picked], dim=2))
    target.ids.extend(path_tokens)


@dataclass(frozen=True)
class TreeVerdict:
    """``path``: accepted node indices root → leaf; ``next_token``: correction or bonus;
    ``kind``: correction | bonus."""

    path: tuple[int, ...]
    next_token: int
    kind: str


def walk(
    tree: DraftTree, logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator
) -> TreeVerdict:
    """Follow the tree from the root with the target's rows (``logits`` from
    :func:`tree_forward`): greedy match, or the multi-candidate rule per node."""
    node, path = -1, []
    while True:
        p = logits_to_probs(logits[node + 1], sampling).cpu()
        kids = tree.children(node)
        if sampling.greedy:
            want = int(p.argmax())
            match = [c for c in kids if tree.tokens[c] == want]
            if not match:
                return TreeVerdict(tuple(path), want, "correction" if kids else "bonus")
            node = match[0]
        else:
            q = tree.child_q.get(node, p)
            verdict = verify_node(p, q, [tree.tokens[c] for c in kids], generator)
            if verdict.accepted is None:
                return TreeVerdict(tuple(path), verdict.token, "correction" if kids else "bonus")
            node = kids[verdict.accepted]
        path.append(node)


@dataclass(frozen=True)
class TreeRun:
    """A tree-speculative generation: ``output_ids`` (prompt excluded), ``stop_reason``,
    per round the node count, the accepted path length and the tokens committed, and the
    forwards run."""

    output_ids: list[int]
    stop_reason: str
    nodes_per_round: tuple[int, ...]
    accepted_per_round: tuple[int, ...]
    committed_per_round: tuple[int, ...]
    target_forwards: int
    draft_forwards: int

    @property
    def tokens_per_target_forward(self) -> float:
        return len(self.output_ids) / self.target_forwards if self.target_forwards else 0.0


def generate_tree(
    pair: ModelPair, prompt: str | list[int], config: SessionConfig, shape: Sequence[int],
    budget: int = 12,
) -> TreeRun:  # fmt: skip
    """Tree-speculative decoding with the pair's draft model: draft a tree, verify it in
    one target forward, commit the accepted path + one target token, compact both caches.

    Raises:
        PromptError, ConfigError: bad prompt or settings (a greedy *draft method* at
        temperature > 0 is refused: sibling candidates must be drawn from ``q``).
    """
    config = config.validate(pair.vocab_size)
    sampling = config.sampling
    if config.draft_method == "greedy" and not sampling.greedy:
        raise ConfigError("tree drafting at temperature > 0 needs the probabilistic method", "tree")
    ids = prompt_ids(pair, prompt)
    prompt_len = len(ids)
    target, draft = ModelCache(pair.target), ModelCache(pair.draft)
    generator = torch.Generator().manual_seed(config.seed)
    nodes, accepted, committed = [], [], []
    reason, draft_forwards = None, 0

    stop = stop_rule(pair, config)
    while reason is None:
        room = min(config.max_new_tokens - (len(ids) - prompt_len), pair.context_length - len(ids))
        depth = max(0, min(len(shape), room - 1))
        tree, forwards = draft_tree(draft, ids, shape[:depth], sampling, generator, budget)
        draft_forwards += forwards
        logits = tree_forward(target, ids, tree)
        verdict = walk(tree, logits, sampling, generator)
        path_tokens = [tree.tokens[i] for i in verdict.path]
        compact(target, len(tree.tokens), list(verdict.path), path_tokens)
        appended, reason = commit_tokens(ids, path_tokens + [verdict.next_token], prompt_len, stop)
        ids += appended
        target.crop(min(common_prefix_len(target.ids, ids), len(ids) - 1))
        draft.crop(min(common_prefix_len(draft.ids, ids), len(ids) - 1))
        nodes.append(len(tree.tokens))
        accepted.append(len(verdict.path))
        committed.append(len(appended))
    return TreeRun(ids[prompt_len:], reason, tuple(nodes), tuple(accepted), tuple(committed),
                   len(nodes), draft_forwards)  # fmt: skip
