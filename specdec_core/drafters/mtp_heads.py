"""Multi-token prediction heads (Medusa-1 style) on a frozen GPT-2 target.

Source: Cai, Li, Geng, Peng, Lee, Chen, Dao (2024), "Medusa: Simple LLM Inference
Acceleration Framework with Multiple Decoding Heads" (ICML 2024); DeepSeek-V3 ships a
sequential variant of the same idea (MTP modules). ``K`` heads read the target's last
hidden state ``h_t`` at position ``t`` (after GPT-2's final layer norm ``ln_f``: the LM
head's input, :attr:`specdec_core.core.kvcache.ModelCache.hidden`); head ``k`` predicts
the token ``k + 1`` positions ahead of ``t`` (the target's own LM head is "head 0": it
predicts the token right after ``t``):

    r_k(h)      = h + SiLU(W_k h + b_k)                  (one residual block, [d] → [d])
    logits_k(h) = lm_head_target(r_k(h))                 ([V], the frozen, tied ``wte``)

``W_k`` and ``b_k`` start at zero (Medusa zero-initialises the block's weight), so every
head starts as the identity: head ``k`` first predicts what the target predicts for the
next token, a reasonable guess that training moves forward ``k`` positions.

The heads hold only their own weights (``K × (d² + d)`` parameters); the target's
``lm_head`` is passed at call time and never copied or saved. Weights are float16
safetensors plus ``config.json`` (never pickle), upcast to float32 on load, loaded once
per process and shared; nothing is loaded with ``trust_remote_code``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from specdec_core.core.errors import ConfigError
from specdec_core.drafters.head_files import CONFIG, load_head, save_head

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

KIND = "medusa-1-heads"
FOLDER = "mtp"  # beside the target's folder


@dataclass(frozen=True)
class MtpConfig:
    """Shape of the heads and the target they were trained for.

    Attributes:
        width: ``d``, the target's hidden size (``n_embd``).
        heads: ``K``, the number of heads (head ``k`` predicts ``k + 1`` tokens ahead).
        target_vocab: the target's vocabulary size ``V`` (a check at load time).
        target_layers: the target's layer count (a check at load time).
    """

    width: int
    heads: int
    target_vocab: int
    target_layers: int
    kind: str = KIND

    @classmethod
    def for_target(cls, target_config, heads: int = 4) -> MtpConfig:
        """Heads matching a GPT-2 target config."""
        return cls(
            width=target_config.n_embd,
            heads=heads,
            target_vocab=target_config.vocab_size,
            target_layers=target_config.n_layer,
        )

    def matches(self, target_config) -> bool:
        """Whether these heads were made for a target with this config."""
        return (
            self.width == target_config.n_embd
            and self.target_vocab == target_config.vocab_size
            and self.target_layers == target_config.n_layer
        )


class MtpHeads(nn.Module):
    """``K`` residual blocks ``h + SiLU(W_k h + b_k)`` (``W_k``: ``[d, d]``, zero-initialised).

    Shapes (float32): ``hidden`` ``[..., d]`` → :meth:`forward` ``[K, ..., d]`` (all heads),
    :meth:`block` ``[..., d]`` (head ``k`` only, ``1 ≤ k ≤ K``). The LM head is applied by
    the caller (the target's own, frozen).
    """

    def __init__(self, config: MtpConfig) -> None:
        super().__init__()
        self.config = config
        d = config.width
        self.blocks = nn.ModuleList(nn.Linear(d, d) for _ in range(config.heads))
        for lin in self.blocks:
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)
        self._stacked: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def k(self) -> int:
        """``K``, the number of heads."""
        return self.config.heads

    def block(self, k: int, hidden: torch.Tensor) -> torch.Tensor:
        """Head ``k``'s residual block (``1 ≤ k ≤ K``) on ``[..., d]`` hidden states.

        Raises:
            IndexError: ``k`` outside ``1..K``.
        """
        if not 1 <= k <= self.k:
            raise IndexError(f"head {k} outside 1..{self.k}")
        return hidden + F.silu(self.blocks[k - 1](hidden))

    def blocks_from(self, first: int, n: int, hidden: torch.Tensor) -> torch.Tensor:
        """``[n, d]``: heads ``first .. first + n − 1`` on one ``[d]`` hidden state, in one
        batched matmul (head ``0`` is the identity: the target's own LM head input).

        Raises:
            IndexError: a head outside ``0..K``.
        """
        if first < 0 or first + n - 1 > self.k:
            raise IndexError(f"heads {first}..{first + n - 1} outside 0..{self.k}")
        out = hidden.expand(n, -1).clone()  # [n, d]
        lo = max(first, 1)  # head 0 stays the identity
        if lo <= first + n - 1:
            weight, bias = self.stacked()
            w, b = weight[lo - 1 : first + n - 1], bias[lo - 1 : first + n - 1]  # [m, d, d]
            out[lo - first :] += F.silu(torch.matmul(w, hidden) + b)  # [m, d]
        return out

    def stacked(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``([K, d, d], [K, d])``: every head's ``W_k`` and ``b_k``, stacked (kept once the
        heads are frozen, as :meth:`load` leaves them; rebuilt each call while training)."""
        frozen = not any(p.requires_grad for p in self.parameters())
        if frozen and self._stacked is not None:
            return self._stacked
        stacked = (
            torch.stack([lin.weight for lin in self.blocks]),
            torch.stack([lin.bias for lin in self.blocks]),
        )
        if frozen:
            self._stacked = stacked
        return stacked

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[K, ..., d]``: every head's block on ``[..., d]`` hidden states."""
        return torch.stack([self.block(k, hidden) for k in range(1, self.k + 1)])

    # ------------------------------------------------------------------ files
    def save(self, folder: Path) -> Path:
        """float16 safetensors + ``config.json`` into ``folder``; returns the weights path
        (:func:`~specdec_core.drafters.head_files.save_head`)."""
        return save_head(self, self.config, folder, KIND)

    @classmethod
    def load(cls, folder: Path, device: str | torch.device = "cpu") -> MtpHeads:
        """Load heads saved by :meth:`save` (safetensors only), upcast to float32, eval
        mode, no gradients.

        Raises:
            FileNotFoundError: no ``config.json`` / ``model.safetensors`` in ``folder``.
            ValueError: not an MTP heads config, or weights that do not fit it.
        """
        return load_head(folder, KIND, "MTP heads", lambda raw: cls(MtpConfig(**raw)), device)


def parameter_count(heads: MtpHeads) -> int:
    """Parameters the heads add (the target's LM head is not counted)."""
    return sum(p.numel() for p in heads.parameters())


# ---------------------------------------------------------------------- heads by pair
_HEADS: dict[tuple[str, str], MtpHeads] = {}  # (folder, device) → heads, loaded once
_HEADS_LOCK = threading.Lock()


def mtp_heads_dir(pair: ModelPair) -> Path | None:
    """Where a pair's heads live: ``mtp/`` beside the target's folder (the embedded pair:
    ``assets/models/embedded/mtp``); ``None`` when there are none (hub presets, test pairs)."""
    source = Path(pair.target_source)
    if not source.is_dir():
        return None
    folder = source.parent / FOLDER
    return folder if (folder / CONFIG).is_file() else None


def preset_has_mtp_heads(name: str) -> bool:
    """Whether the preset ``name`` ships MTP heads (by name, without loading the pair)."""
    from specdec_core.core.models import PRESETS

    preset = PRESETS.get(name)
    if preset is None or not preset.local:
        return False
    return (Path(preset.target).parent / FOLDER / CONFIG).is_file()


def preset_mtp_max_gamma(name: str) -> int | None:
    """``K``, the heads' count, of the heads the preset ``name`` ships (read from their
    ``config.json``'s ``heads``, without loading the pair or the weights): the most drafts
    one MTP proposal can make (:attr:`MtpDrafter.max_gamma`); ``None`` when the preset
    ships no heads or the config cannot be read."""
    from specdec_core.core.models import PRESETS

    if not preset_has_mtp_heads(name):
        return None
    try:
        k = json.loads((Path(PRESETS[name].target).parent / FOLDER / CONFIG).read_text("utf-8"))
        return int(k["heads"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def has_mtp_heads(pair: ModelPair) -> bool:
    """Whether the ``mtp`` drafter can serve this pair."""
    return mtp_heads_dir(pair) is not None


def mtp_missing(pair: ModelPair, detail: str = "") -> ConfigError:
    """The ``mtp_missing`` error for ``pair`` (``detail``: why, when the heads exist but
    cannot serve it)."""
    message = detail or (
        f"the pair {pair.name!r} has no MTP heads (only the embedded pair ships them, in "
        "assets/models/embedded/mtp); choose another drafter"
    )
    return ConfigError(message, "mtp_missing", pair=pair.name)


def load_mtp_heads(pair: ModelPair) -> MtpHeads:
    """The pair's heads, loaded once per process (shared read-only, like the models).

    Raises:
        ConfigError: code ``mtp_missing``: the pair has no heads, they cannot be read,
        or they were trained for another target.
    """
    folder = mtp_heads_dir(pair)
    if folder is None:
        raise mtp_missing(pair)
    key = (str(folder.resolve()), str(pair.device))
    with _HEADS_LOCK:
        heads = _HEADS.get(key)
        if heads is None:
            try:
                heads = MtpHeads.load(folder, pair.device)
            except (OSError, ValueError) as exc:
                raise mtp_missing(
                    pair, f"the MTP heads in {folder.name}/ cannot be loaded: {exc}"
                ) from exc
            _HEADS[key] = heads
    if not heads.config.matches(pair.target.config):
        raise mtp_missing(
            pair,
            f"the MTP heads beside {pair.name!r} were trained for another target "
            f"(width {heads.config.width}, vocabulary {heads.config.target_vocab})",
        )
    return heads
