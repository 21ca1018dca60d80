"""The one device-sync helper: wait for queued GPU kernels before a clock is read.

On CUDA a forward returns as soon as its kernels are queued; every wall time in the
project (a forward's ``forward_ms``, a round's draft/verify split, a run's total) is read
after :func:`sync`, so it is the kernels' time, not the launch's. On a CPU device it does
nothing.
"""

from __future__ import annotations

import torch


def sync(device: torch.device | str) -> None:
    """``torch.cuda.synchronize()`` when ``device`` is a CUDA device (``"cuda"``,
    ``"cuda:1"`` or a ``torch.device``); nothing otherwise."""
    kind = device.type if isinstance(device, torch.device) else str(device)
    if kind.startswith("cuda"):
        torch.cuda.synchronize()
