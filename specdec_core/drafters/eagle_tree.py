"""EAGLE's tree drafting: the next-token logits after any tree path, and a whole tree
level in one head forward (tree attention over the level's nodes, as EAGLE drafts a tree;
Li et al. 2024). The tree's shape is the session's (``engine/tree/round.py``). A base of
:class:`~specdec_core.drafters.eagle.EagleDrafter`, whose module docstring says where the
features come from.

A level's entries sit in the head's cache past :attr:`entries` (the context's), each
attending to the context's entries and its own ancestors; they are dropped at the next
proposal or rollback (:meth:`_drop_tree`).
"""

from __future__ import annotations

import time

import torch

from specdec_core.core.device import sync
from specdec_core.core.timeline import ForwardClock
from specdec_core.drafters.base import Drafter


class EagleTreeLevels(Drafter):
    """The tree half of :class:`~specdec_core.drafters.eagle.EagleDrafter`, which supplies
    what is used here: ``head``, its ``cache`` and :attr:`entries`, ``wte``, ``int8``,
    ``_next_feature`` (catch-up, the feature after a context), ``_logits`` /
    ``_head_mm`` / ``_head_width`` (the LM head rows) and the forward counters."""

    clock: ForwardClock

    def _drop_tree(self) -> None:
        """Forget a tree level's entries (head-cache rows past :attr:`entries`)."""
        self._tree: dict[tuple[int, ...], tuple[int, torch.Tensor]] = {}  # path → (row, f̂)
        self._tree_context: list[int] = []
        if self.cache.length > self.entries:
            self.cache.truncate(self.entries)

    @torch.inference_mode()
    def tree_logits(self, context: list[int]) -> torch.Tensor:
        """``[V]`` float32 next-token logits after ``context`` (committed ids + a tree
        path), extending the head's cache over the path (predicted features). A one-token
        context the target has not run yet has no feature to start from: zeros (a uniform
        ``q``; the rule stays lossless, the first level is then a guess). Runs 0 to
        several head forwards (none when the cache already holds the path's features; a
        catch-up on real features, then one per path token without a cached entry); each
        is counted in :attr:`forwards`."""
        feature, _ = self._next_feature(context)
        if feature is None:
            return self.widen(torch.zeros(self._head_width(), device=self.device))
        return self.widen(self._logits(feature))

    @torch.inference_mode()
    def tree_level_logits(self, context: list[int], paths: list[list[int]]) -> torch.Tensor:
        """``[n, V]`` float32 logits after ``context + paths[i]``, a tree level in ONE head
        forward: each path's entry (its parent's feature, the embedding of its last token)
        at head position ``len(context) + depth − 2``, attending to the context's entries
        and its ancestors' (left past :attr:`entries` by the previous level, dropped at the
        next proposal or rollback). The root level (one empty path) is :meth:`tree_logits`;
        a level whose parents this drafter did not draft falls back to one call per path."""
        depth = len(paths[0])
        if depth == 0 and len(paths) == 1:
            feature, _ = self._next_feature(context)  # drops an earlier tree's entries
            if feature is None:
                return self.widen(torch.zeros(1, self._head_width(), device=self.device))
            self._tree, self._tree_context = {(): (-1, feature)}, list(context)
            return self.widen(self._logits(feature)[None])  # [1, V]
        parents = [self._tree.get(tuple(p[:-1])) for p in paths]
        same = self._tree_context == context and all(len(p) == depth for p in paths)
        if depth == 0 or not same or any(parent is None for parent in parents):
            return super().tree_level_logits(context, paths)  # type: ignore[return-value]
        started, rows, n = time.perf_counter(), self.cache.length, len(paths)
        allowed = torch.zeros(n, rows + n, dtype=torch.bool, device=self.device)
        allowed[:, : self.entries] = True
        for i, path in enumerate(paths):
            ancestors = [self._tree[tuple(path[:j])][0] for j in range(1, depth)]
            allowed[i, ancestors + [rows + i]] = True
        features = torch.stack([parent[1] for parent in parents])  # type: ignore[index]
        emb = self.wte.weight[torch.tensor([p[-1] for p in paths], device=self.device)]
        positions = torch.full((n,), len(context) + depth - 2, device=self.device)
        out = self.head.step(features.to(emb.dtype), emb, self.cache, positions, allowed, self.int8)
        for i, path in enumerate(paths):
            self._tree[tuple(path)] = (rows + i, out[i])
        logits = self.widen(self._head_mm(out))  # [n, V]
        sync(self.device)
        self.clock.add(started)
        self.forwards += 1
        return logits
