"""A small recurrent language model (one GRU layer; Cho et al. 2014) on the embedded
pair's tokenizer: the draft source of the ``recurrent`` drafter (``drafters/recurrent.py``).

Unlike a transformer, its whole memory of the text is one fixed-size state ``h``: reading
token ``x_t`` maps ``h_{t−1}`` to ``h_t`` and the next-token logits are ``head(h_t)``.
There is no cache to crop: a state that has read drafts cannot be shortened, only replaced
by a copy saved earlier (a checkpoint, ``core/checkpoints.py``)::

    e_t = wte(x_t)                       # [E]
    h_t = GRU(e_t, h_{t−1})              # [H]   (h_0 = 0)
    logits_t = head(norm(h_t))           # [V]   the row for the token after x_t

Files: ``recurrent/`` beside the pair's target (``assets/models/embedded/recurrent``):
``config.json`` (``vocab_size``, ``embed``, ``hidden``, ``architecture: "gru"``) and
``model.safetensors`` (float16), loaded with ``safetensors`` (no pickle, no remote code) into
float32. Trained by ``python -m specdec_core.training.recurrent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

ARCHITECTURE = "gru"
CONFIG = "config.json"
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class RecurrentConfig:
    """Sizes: ``vocab_size`` V, ``embed`` E (token embedding width), ``hidden`` H (the
    state's width)."""

    vocab_size: int
    embed: int
    hidden: int


@dataclass(frozen=True)
class RecurrentOutput:
    """``logits``: ``[B, T, V]`` float32; ``state``: ``[1, B, H]`` after the last token."""

    logits: torch.Tensor
    state: torch.Tensor


class RecurrentLM(nn.Module):
    """Embedding → one GRU layer → layer norm → LM head (see the module docstring)."""

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.embed)
        self.rnn = nn.GRU(config.embed, config.hidden, batch_first=True)
        self.norm = nn.LayerNorm(config.hidden)
        self.head = nn.Linear(config.hidden, config.vocab_size, bias=False)

    def forward(
        self, input_ids: torch.Tensor, state: torch.Tensor | None = None
    ) -> RecurrentOutput:
        """Read ``input_ids`` ``[B, T]`` from ``state`` (``[1, B, H]``; ``None``: zeros).
        Returns every position's logits and the state after the last token."""
        out, last = self.rnn(self.wte(input_ids), state)  # out: [B, T, H], last: [1, B, H]
        return RecurrentOutput(self.head(self.norm(out)), last)

    def read(self, ids: list[int], state: torch.Tensor | None) -> torch.Tensor:
        """The state ``[1, 1, H]`` after reading ``ids`` (``T ≥ 1``) from ``state``,
        without the LM head."""
        x = torch.tensor([ids], dtype=torch.long, device=self.wte.weight.device)
        return self.rnn(self.wte(x), state)[1]

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        """``[V]`` float32 next-token logits of a state ``[1, 1, H]``."""
        return self.head(self.norm(state[-1, 0])).float()


def save_recurrent(model: RecurrentLM, folder: Path) -> None:
    """``config.json`` + float16 ``model.safetensors`` into ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    save_file(weights, str(folder / WEIGHTS))
    config = {"architecture": ARCHITECTURE, **vars(model.config)}
    (folder / CONFIG).write_text(json.dumps(config, indent=2) + "\n", "utf-8")


def read_config(folder: Path) -> RecurrentConfig:
    """The sizes in ``folder/config.json``.

    Raises:
        OSError: no readable file. ValueError: not a GRU config or sizes missing/invalid.
    """
    raw = json.loads((folder / CONFIG).read_text("utf-8"))
    if not isinstance(raw, dict) or raw.get("architecture") != ARCHITECTURE:
        raise ValueError(f"{folder / CONFIG} is not a {ARCHITECTURE} config")
    try:
        sizes = {k: int(raw[k]) for k in ("vocab_size", "embed", "hidden")}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{folder / CONFIG}: missing or invalid size ({exc})") from exc
    if min(sizes.values()) < 1 or max(sizes.values()) > 1 << 20:
        raise ValueError(f"{folder / CONFIG}: sizes out of range {sizes}")
    return RecurrentConfig(**sizes)


def load_recurrent(folder: Path, device: str | torch.device = "cpu") -> RecurrentLM:
    """The model in ``folder`` (float32, eval mode, no gradients); safetensors only.

    Raises:
        OSError: missing files. ValueError: a bad config or weights of other shapes.
    """
    model = RecurrentLM(read_config(folder))
    weights = load_file(str(folder / WEIGHTS))
    try:
        model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=True)
    except RuntimeError as exc:  # missing/unexpected keys, shape mismatches
        raise ValueError(f"{folder / WEIGHTS} does not fit its config: {exc}") from exc
    return model.to(device).eval().requires_grad_(False)
