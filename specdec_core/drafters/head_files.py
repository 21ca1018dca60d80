"""A trained drafting head on disk, written once for every head this project trains (the
EAGLE head, :mod:`specdec_core.drafters.eagle_head`; the MTP heads,
:mod:`specdec_core.drafters.mtp_heads`): float16 safetensors (``model.safetensors``) and a
``config.json`` holding the head's config dataclass with its ``kind``. Loading is
safetensors only (no pickle, no remote code) and upcasts to float32.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors.torch import load_file, save_file
from torch import nn

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
M = TypeVar("M", bound=nn.Module)


def save_head(module: nn.Module, config: Any, folder: Path, kind: str) -> Path:
    """``module``'s weights as float16 safetensors (metadata ``kind``) and
    ``asdict(config)`` as ``config.json`` into ``folder`` (made if missing); returns the
    weights path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        k: v.detach().to(torch.float16).contiguous().cpu() for k, v in module.state_dict().items()
    }
    path = folder / WEIGHTS
    save_file(tensors, str(path), metadata={"format": "pt", "kind": kind})
    (folder / CONFIG).write_text(json.dumps(asdict(config), indent=2) + "\n")
    return path


def load_head(
    folder: Path, kind: str, what: str, build: Callable[[dict], M], device: str | torch.device
) -> M:
    """The head saved by :func:`save_head` in ``folder``: ``build(config dict)`` filled
    with the weights upcast to float32, on ``device``, eval mode, no gradients.

    Raises:
        FileNotFoundError: no ``config.json`` / ``model.safetensors`` in ``folder``.
        ValueError: the config's ``kind`` is not ``kind`` (``what`` names the head in the
            message), or weights that do not fit the module.
    """
    folder = Path(folder)
    raw = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    if raw.get("kind") != kind:
        raise ValueError(f"{folder / CONFIG} is not {what} config")
    module = build(raw)
    state = {k: v.float() for k, v in load_file(str(folder / WEIGHTS)).items()}
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"weights in {folder} do not fit {what}: {exc}") from exc
    return module.to(device).eval().requires_grad_(False)
