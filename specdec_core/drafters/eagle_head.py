"""A feature-level draft head (EAGLE-1 style) on a frozen GPT-2 target.

Source: Li, Wei, Zhang, Zhang (2024), "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty" (ICML 2024). The head drafts at the *feature* level: from the
target's last hidden state ``f_t`` at position ``t`` and the embedding of the token that
followed, ``e_{t+1}``, it predicts the next hidden state ``f̂_{t+1}``; the target's own,
frozen LM head turns ``f̂_{t+1}`` into next-token logits.

    f̂_{t+1} = ln_f_head( Block( W · [f_t ; e_{t+1}] + b + wpe_head[t] ) )
    logits   = lm_head_target(f̂_{t+1})                         (V = target vocabulary)

Choices made here (all documented in the model card):

* ``f_t`` is the target's last hidden state **after** its final layer norm (GPT-2's
  ``ln_f``), i.e. exactly the LM head's input (``ModelCache.hidden``). The head ends in a
  layer norm of its own (the ``ln_f`` of the small :class:`GPT2Model` below, trained) and
  its output is fed to the target's LM head directly: the target's ``ln_f`` is **not**
  applied again (the regression target is already normalised; normalising twice would
  distort the scale the LM head expects).
* ``e_{t+1}`` is the target's frozen token embedding (``wte``) only, without the target's
  position embedding; the head has its own position embeddings (``wpe`` of its block).
* the block is a one-layer ``transformers`` :class:`GPT2Model` driven by ``inputs_embeds``
  (its token table has one unused row), so it brings position embeddings and the final
  layer norm with it (training runs it); drafting runs the same weights through the lean
  forward (:meth:`EagleHead.step`), one small forward per token.
* the target's ``wte`` / ``lm_head`` are never copied or saved here: the head holds only
  its own weights (``fc`` + the block), passed the target's modules at call time.

Weights are saved as float16 safetensors plus ``config.json`` (never pickle) and upcast
to float32 on load; nothing is loaded with ``trust_remote_code``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache, GPT2Config, GPT2Model

from specdec_core.core.errors import ConfigError
from specdec_core.core.int8_linear import int8_linear, int8_weights
from specdec_core.core.kvbuffer import KVBuffer
from specdec_core.core.lean_gpt2 import Gpt2Weights, forward_embeds, gpt2_weights
from specdec_core.drafters.head_files import load_head, save_head

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

KIND = "eagle-1-head"


@dataclass(frozen=True)
class EagleConfig:
    """Shape of a head and the target it was trained for.

    Attributes:
        width: ``d``, the target's hidden size (``n_embd``); the head works at this width.
        heads: attention heads of the head's block.
        positions: position embeddings of the head (the target's context length).
        target_vocab: the target's vocabulary size ``V`` (a check at load time).
        target_layers: the target's layer count (a check at load time).
        inner: the block's MLP inner width (GPT-2's ``n_inner``; ``None``: ``4 d``).
    """

    width: int
    heads: int
    positions: int
    target_vocab: int
    target_layers: int
    inner: int | None = None
    kind: str = KIND

    def gpt2(self) -> GPT2Config:
        """The one-block GPT-2 config of the head (no dropout, one unused token row)."""
        return GPT2Config(
            vocab_size=1,
            n_positions=self.positions,
            n_embd=self.width,
            n_layer=1,
            n_head=self.heads,
            n_inner=self.inner,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=0,
            eos_token_id=0,
        )

    @classmethod
    def for_target(
        cls, target_config, heads: int | None = None, inner: int | None = None
    ) -> EagleConfig:
        """A head config matching a GPT-2 target config (heads default: the target's;
        ``inner``: the MLP's inner width, default ``4 d``)."""
        return cls(
            width=target_config.n_embd,
            heads=heads or target_config.n_head,
            positions=target_config.n_positions,
            target_vocab=target_config.vocab_size,
            target_layers=target_config.n_layer,
            inner=inner,
        )

    def matches(self, target_config) -> bool:
        """Whether this head was made for a target with this config."""
        return (
            self.width == target_config.n_embd
            and self.target_vocab == target_config.vocab_size
            and self.target_layers == target_config.n_layer
            and self.positions <= target_config.n_positions
        )


class EagleHead(nn.Module):
    """``fc`` (Linear 2d → d) + one GPT-2 block with its own position embeddings and final
    layer norm. Predicts the target's next last-layer feature.

    Shapes (``B`` batch, ``T`` positions, ``d`` width; float32):

    * ``features``: ``[B, T, d]`` — ``f_t`` for ``t = s … s+T−1``, real target features or
      the head's own earlier predictions;
    * ``token_embeds``: ``[B, T, d]`` — the target's ``wte`` of tokens ``s+1 … s+T``;
    * returns ``[B, T, d]`` — ``f̂_{s+1} … f̂_{s+T}``.

    Position ``t`` of the head is the position of ``f_t``; with a ``cache`` the positions
    continue after the cached ones (transformers derives them from the cache length).
    """

    def __init__(self, config: EagleConfig) -> None:
        super().__init__()
        self.config = config
        d = config.width
        self.fc = nn.Linear(2 * d, d)
        self.block = GPT2Model(config.gpt2())

    def new_cache(self) -> KVBuffer:
        """An empty KV cache for the head's one layer (the lean forward's, :meth:`step`)."""
        return self.lean().new_cache()

    def lean(self, int8: bool = False) -> Gpt2Weights:
        """References to the block's weights for the lean forward (made once); ``int8``:
        its linears as weight-only int8 layers (:mod:`specdec_core.core.int8_linear`)."""
        key = "_lean8" if int8 else "_lean"
        weights = self.__dict__.get(key)
        if weights is None:
            weights = gpt2_weights(self.block)
            self.__dict__[key] = weights = int8_weights(weights) if int8 else weights
        return weights

    def step(
        self,
        features: torch.Tensor,
        token_embeds: torch.Tensor,
        cache: KVBuffer,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        int8: bool = False,
    ) -> torch.Tensor:
        """:meth:`forward` for drafting, batch 1, through the lean forward
        (:func:`~specdec_core.core.lean_gpt2.forward_embeds`): ``[T, d]`` features + ``[T,
        d]`` token embeddings → ``[T, d]`` predicted next features; ``cache`` (from
        :meth:`new_cache`) is extended in place. Equal to :meth:`forward` within 1e-5.
        ``positions`` ``[T]`` and ``mask`` ``[T, rows + T]`` bool: a tree level's entries
        (default: after the cached rows, causal). ``int8``: ``fc`` and the block's
        linears run weight-only int8 (:mod:`specdec_core.core.int8_linear`; close to,
        not equal to, :meth:`forward`)."""
        x = torch.cat([features, token_embeds], dim=-1)  # [T, 2d]
        if int8:
            x = int8_linear(self.fc.weight, self.fc.bias, 0)(x)
        else:
            x = F.linear(x, self.fc.weight, self.fc.bias)
        return forward_embeds(self.lean(int8), cache, x, positions, mask)  # [T, d]

    def forward(
        self,
        features: torch.Tensor,
        token_embeds: torch.Tensor,
        cache: DynamicCache | None = None,
    ) -> torch.Tensor:
        """``[B, T, d]`` features + ``[B, T, d]`` token embeddings → ``[B, T, d]`` predicted
        next features (see the class docstring). ``cache`` is extended in place."""
        x = self.fc(torch.cat([features, token_embeds], dim=-1))  # [B, T, d]
        out = self.block(inputs_embeds=x, cache=cache, use_cache=cache is not None)
        return out.last_hidden_state  # [B, T, d], after the head's own ln_f

    # ------------------------------------------------------------------ files
    def save(self, folder: Path) -> Path:
        """float16 safetensors + ``config.json`` into ``folder``; returns the weights path
        (:func:`~specdec_core.drafters.head_files.save_head`)."""
        return save_head(self, self.config, folder, KIND)

    @classmethod
    def load(cls, folder: Path, device: str | torch.device = "cpu") -> EagleHead:
        """Load a head saved by :meth:`save` (safetensors only), upcast to float32, eval
        mode, no gradients.

        Raises:
            FileNotFoundError: no ``config.json`` / ``model.safetensors`` in ``folder``.
            ValueError: not an EAGLE head config, or weights that do not fit it.
        """
        return load_head(folder, KIND, "an EAGLE head", lambda raw: cls(EagleConfig(**raw)), device)


def target_parts(target) -> tuple[nn.Embedding, nn.Module]:
    """The target's frozen token embedding ``wte`` (``[V, d]``) and LM head (``d → V``)."""
    return target.get_input_embeddings(), target.get_output_embeddings()


def parameter_count(head: EagleHead) -> int:
    """Parameters the head adds (the target's embedding / LM head are not counted)."""
    return sum(p.numel() for p in head.parameters())


# ---------------------------------------------------------------------- heads by pair
_HEADS: dict[tuple[str, str], EagleHead] = {}  # (folder, device) → head, loaded once
_HEADS_LOCK = threading.Lock()


def eagle_head_dir(pair: ModelPair) -> Path | None:
    """Where a pair's head lives: ``eagle/`` beside the target's folder (the embedded
    pair: ``assets/models/embedded/eagle``); ``None`` when the folder has no head (hub
    presets, test pairs)."""
    source = Path(pair.target_source)
    if not source.is_dir():
        return None
    folder = source.parent / "eagle"
    return folder if (folder / "config.json").is_file() else None


def preset_has_eagle_head(name: str) -> bool:
    """Whether the preset ``name`` ships a head (by name, without loading the pair: the
    lesson-link check)."""
    from specdec_core.core.models import PRESETS

    preset = PRESETS.get(name)
    if preset is None or not preset.local:
        return False
    return (Path(preset.target).parent / "eagle" / "config.json").is_file()


def has_eagle_head(pair: ModelPair) -> bool:
    """Whether :func:`make_eagle_drafter` can serve this pair."""
    return eagle_head_dir(pair) is not None


def load_eagle_head(pair: ModelPair) -> EagleHead:
    """The pair's head, loaded once per process (shared read-only, like the models).

    Raises:
        ConfigError: the pair has no head, or its head was trained for another target.
    """
    folder = eagle_head_dir(pair)
    if folder is None:
        raise ConfigError(
            f"the pair {pair.name!r} has no EAGLE draft head (only the embedded pair ships "
            "one, in assets/models/embedded/eagle); choose another drafter",
            "no_eagle_head",
            pair=pair.name,
        )
    key = (str(folder.resolve()), str(pair.device))
    with _HEADS_LOCK:
        head = _HEADS.get(key)
        if head is None:
            try:
                head = EagleHead.load(folder, pair.device)
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"the EAGLE head in {folder.name}/ cannot be loaded: {exc}",
                    "no_eagle_head",
                    pair=pair.name,
                ) from exc
            _HEADS[key] = head
    if not head.config.matches(pair.target.config):
        raise ConfigError(
            f"the EAGLE head beside {pair.name!r} was trained for another target "
            f"(width {head.config.width}, vocabulary {head.config.target_vocab})",
            "no_eagle_head",
            pair=pair.name,
        )
    return head
