"""The device helpers: wait for queued GPU kernels before a clock is read, and make the
GPU compute a replay bit for bit as it computed the session it replays.

On CUDA a forward returns as soon as its kernels are queued; every wall time in the
project (a forward's ``forward_ms``, a round's draft/verify split, a run's total) is read
after :func:`sync`, so it is the kernels' time, not the launch's. On a CPU device it does
nothing.

Determinism: a replay runs the same forwards with the same shapes in the same order as
the session it replays (``lessons/replay.py``); on one device and thread count that is
bit-identical once the kernels themselves are deterministic. cuBLAS needs
``CUBLAS_WORKSPACE_CONFIG`` set before CUDA starts (set here, at import, unless
``SPECDEC_CUBLAS_WORKSPACE=off``, see :func:`cublas_workspace`: every engine
module imports this one before a model is loaded), and torch's deterministic algorithms
are switched on by :func:`deterministic` when a pair is loaded on CUDA. Across devices and
thread counts only low bits move (DESIGN.md, "Determinism").
"""

from __future__ import annotations

import os

import torch

#: cuBLAS's deterministic workspace setting (read when CUDA creates its first handle).
CUBLAS_WORKSPACE = ":4096:8"


def cublas_workspace(env: dict[str, str]) -> str | None:
    """The ``CUBLAS_WORKSPACE_CONFIG`` to set in ``env`` (``None``: leave it as it is).

    A value already set is kept. ``SPECDEC_CUBLAS_WORKSPACE=off`` leaves it unset: on an
    H200 with torch 2.11 the setting made a batch-1 GEMM's launch 11x dearer on the host
    (128 vs 11 us per small ``addmm``), about 2 ms of a 5 ms step of the embedded target;
    without it a replay is still bit-identical on one stream, but torch cannot promise it.
    """
    if "CUBLAS_WORKSPACE_CONFIG" in env:
        return None
    choice = env.get("SPECDEC_CUBLAS_WORKSPACE", CUBLAS_WORKSPACE).strip()
    return None if choice.lower() == "off" else choice or CUBLAS_WORKSPACE


_WORKSPACE = cublas_workspace(dict(os.environ))
if _WORKSPACE is not None:
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = _WORKSPACE


def sync(device: torch.device | str) -> None:
    """``torch.cuda.synchronize()`` when ``device`` is a CUDA device (``"cuda"``,
    ``"cuda:1"`` or a ``torch.device``); nothing otherwise."""
    if _is_cuda(device):
        torch.cuda.synchronize()


def deterministic(device: torch.device | str) -> bool:
    """On a CUDA ``device``: torch's deterministic algorithms on (``warn_only``: an op
    without a deterministic kernel warns instead of raising) and TF32 off, so the same
    forward gives the same bits every time. Returns whether it changed anything (nothing
    on a CPU device, whose kernels are deterministic for a given thread count)."""
    if not _is_cuda(device):
        return False
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    return True


def _is_cuda(device: torch.device | str) -> bool:
    kind = device.type if isinstance(device, torch.device) else str(device)
    return kind.startswith("cuda")
