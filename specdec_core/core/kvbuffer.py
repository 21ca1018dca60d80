"""Keys and values of every layer in two preallocated tensors: the lean forward's KV cache.
Every edit runs in inference mode (a buffer grown inside a forward holds inference
tensors, which only inference mode may change).

A cache is ``kv: [n_layer, 2, H, capacity, Dh]`` (keys at ``[:, 0]``, values at ``[:, 1]``,
so a forward writes a layer's new keys and values in one copy) plus a length. A forward
writes its new rows in place after the cached ones (:meth:`KVBuffer.reserve` first, which grows the
capacity by doubling, so a generation of ``n`` tokens copies ``O(log n)`` times); a
rollback moves the length (:meth:`KVBuffer.truncate`, no copy); the tree's compaction
gathers the kept rows into place (:meth:`KVBuffer.keep_rows`). Attention reads the views
``kv[i, 0, :, :end]``, whose shape does not depend on the capacity (a test holds the results
bit-identical across capacities, so a replay equals the session it replays).

``layers`` and ``get_seq_length()`` mirror transformers' ``DynamicCache`` for readers
(tests, the KV lesson): ``layers[i].keys`` is ``[1, H, length, Dh]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Rows a new cache holds before it first grows (a lesson prompt and a few rounds).
FIRST_CAPACITY = 64


@dataclass(frozen=True)
class LayerView:
    """One layer's cached keys and values, ``[1, H, length, Dh]`` views (read only)."""

    keys: torch.Tensor
    values: torch.Tensor


class KVBuffer:
    """Preallocated keys/values of ``layers`` attention layers (see the module doc).

    Invariant: rows ``0..length−1`` of every layer hold the keys/values written for those
    positions; rows beyond ``length`` are garbage and never read.
    """

    def __init__(
        self, layers: int, heads: int, head_dim: int, device: torch.device, dtype: torch.dtype
    ) -> None:
        shape = (layers, 2, heads, FIRST_CAPACITY, head_dim)
        self.kv = torch.zeros(shape, device=device, dtype=dtype)  # [n_layer, 2, H, cap, Dh]
        self.length = 0

    @property
    def k(self) -> torch.Tensor:
        """Keys, ``[n_layer, H, capacity, Dh]`` (a view of :attr:`kv`)."""
        return self.kv[:, 0]

    @property
    def v(self) -> torch.Tensor:
        """Values, ``[n_layer, H, capacity, Dh]`` (a view of :attr:`kv`)."""
        return self.kv[:, 1]

    @property
    def capacity(self) -> int:
        """Rows each layer can hold before the next growth."""
        return self.kv.shape[3]

    @torch.inference_mode()
    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all (doubling the capacity until they fit; the
        first ``length`` rows are copied, the rest stays garbage)."""
        if rows <= self.capacity:
            return
        capacity = self.capacity
        while capacity < rows:
            capacity *= 2
        old = self.kv
        new = old.new_zeros((*old.shape[:3], capacity, old.shape[4]))
        new[:, :, :, : self.length] = old[:, :, :, : self.length]
        self.kv = new

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` rows (a rollback: only the length moves)."""
        self.length = max(0, min(length, self.length))

    @torch.inference_mode()
    def keep_rows(self, keep: int, rows: list[int]) -> None:
        """Keep rows ``0..keep−1``, then rows ``rows`` (absolute indices ≥ ``keep``, in
        order, below the capacity) moved into ``keep, keep + 1, …``; the length becomes
        ``keep + len(rows)`` (the tree's compaction of the kept path)."""
        if rows:
            index = torch.tensor(rows, device=self.kv.device)
            self.kv[:, :, :, keep : keep + len(rows)] = self.kv.index_select(3, index)
        self.length = keep + len(rows)

    # ------------------------------------------------------------------ readers
    def get_seq_length(self) -> int:
        """Cached rows (``DynamicCache``'s name for :attr:`length`)."""
        return self.length

    @property
    def layers(self) -> list[LayerView]:
        """Per layer, ``[1, H, length, Dh]`` views of the cached keys and values."""
        end = self.length
        return [
            LayerView(self.k[i, None, :, :end], self.v[i, None, :, :end])
            for i in range(len(self.kv))
        ]


class RowBuffer:
    """Rows of one width appended in place, ``[length, d]`` (:attr:`rows`), in a
    preallocated ``[capacity, d]`` tensor that grows by doubling like :class:`KVBuffer`: a
    generation of ``n`` positions copies ``O(log n)`` times instead of once per append
    (the target's hidden states an EAGLE or MTP drafter reads, the EAGLE head's
    predictions). Rows beyond ``length`` are garbage and never read."""

    def __init__(self, width: int, device: torch.device, dtype: torch.dtype) -> None:
        self.data = torch.empty(FIRST_CAPACITY, width, device=device, dtype=dtype)
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def rows(self) -> torch.Tensor:
        """``[length, d]``, a view (valid until the next edit)."""
        return self.data[: self.length]

    @torch.inference_mode()
    def append(self, new: torch.Tensor) -> None:
        """Add ``[T, d]`` rows after the kept ones."""
        end = self.length + new.shape[0]
        if end > self.data.shape[0]:
            capacity = self.data.shape[0]
            while capacity < end:
                capacity *= 2
            grown = self.data.new_empty((capacity, self.data.shape[1]))
            grown[: self.length] = self.data[: self.length]
            self.data = grown
        self.data[self.length : end] = new
        self.length = end

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` rows (only the length moves)."""
        self.length = max(0, min(length, self.length))

    @torch.inference_mode()
    def keep_rows(self, keep: int, rows: list[int]) -> None:
        """Keep rows ``0..keep−1``, then ``rows`` (absolute indices ≥ ``keep``) moved into
        ``keep, keep + 1, …`` (:meth:`KVBuffer.keep_rows` for these rows)."""
        if rows:
            index = torch.tensor(rows, device=self.data.device)
            self.data[keep : keep + len(rows)] = self.data.index_select(0, index)
        self.length = keep + len(rows)
