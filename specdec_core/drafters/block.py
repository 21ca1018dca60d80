"""A parallel block drafter (PARD-style): the pair's draft model, fine-tuned with one
extra mask token, proposes γ tokens in **one** forward.

Source: An et al. (2025), "PARD: Accelerating LLM Inference with Low-Cost PARallel Draft
Model Adaptation". The draft model reads the committed ids followed by ``γ − 1`` mask
tokens::

    input   x_1 … x_L  [M] [M] … [M]          (γ − 1 masks, positions L … L + γ − 2)
    rows    ·  …  q_1  q_2 q_3 … q_γ          (q_1 at x_L, q_{j+1} at the j-th mask)

Every row's logits are sliced back to the pair's vocabulary (the mask id ``V`` is never
proposed), so each ``q_i`` is a ``[V]`` row like every drafter's. Draft forwards per
round: 1, whatever γ (the serial draft model runs γ).

Why this is still exact. The mask rows do not see the drafts sampled before them: ``q_i``
depends on the committed prefix only, not on ``y_<i``. Speculative sampling does not need
it to: the acceptance rule ``min(1, p_i(y_i) / q_i(y_i))`` with a rejection resampled from
``norm(max(0, p_i − q_i))`` returns a token distributed exactly as ``p_i`` for **any**
``q_i`` fixed before ``y_i`` is drawn, as long as ``y_i ~ q_i`` (Leviathan et al. 2023,
Theorem 1; ``p_i`` is the target's row given the prefix and ``y_<i``). Each ``y_i`` here
is drawn from exactly the row that is returned as ``q_i`` (after the session's processors
for its own prefix), so a worse ``q_i`` only lowers acceptance, never correctness.

The drafter keeps its own KV cache of the committed prefix (:class:`ModelCache`): each
proposal runs one forward over the committed ids the cache lacks plus the masks, then
crops the masks off again, so :meth:`cached_ids` is always a prefix of the committed ids.
A block drafter cannot draft a tree (one row per depth, no row after a sibling):
:attr:`can_draft_tree` is false and the tree refusal's code is ``tree_block``.

Weights: ``block/`` beside the pair's target (``assets/models/embedded/block``), an
ordinary GPT-2 folder (float16 safetensors, ``config.json`` with ``vocab_size = V + 1``,
``block_mask_token_id`` and ``block_size``), loaded once per process without
``trust_remote_code``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from specdec_core.core.errors import ConfigError
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import quiet_transformers
from specdec_core.drafters.base import Drafter

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

FOLDER = "block"


class BlockDrafter(Drafter):
    """γ drafts from one forward of a block-trained draft model (see the module docstring).

    Args:
        model: a causal LM whose vocabulary is ``V + 1`` (the last id is the mask token),
            eval mode, float32.
        mask_id: the mask token's id (``V``).
        block_size: the most positions it was trained to propose (:attr:`max_gamma`).

    Raises:
        ValueError: ``mask_id`` is not the model's last vocabulary row, or
            ``block_size < 1``.
    """

    name = "block"
    draft_cost = "one_forward"  # γ drafts from one forward over γ − 1 masks
    can_draft_tree = False

    def __init__(self, model: PreTrainedModel, mask_id: int, block_size: int) -> None:
        if mask_id != model.config.vocab_size - 1:
            raise ValueError(
                f"the mask id {mask_id} is not the last of {model.config.vocab_size} rows"
            )
        if block_size < 1:
            raise ValueError(f"block size must be at least 1, got {block_size}")
        self.kv = self.clock = ModelCache(model)
        self.device = self.kv.device
        self.mask_id = mask_id
        self.vocab_size = mask_id  # q rows: [V], the mask's logit sliced off
        self.max_gamma = block_size

    def cached_ids(self) -> list[int] | None:
        return self.kv.ids

    def rollback(self, length: int) -> int:
        return self.kv.crop(length)

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside this drafter's model forwards (:class:`ModelCache`)."""
        return self.kv.forward_ms

    @property
    def forwards(self) -> int:
        """Model forwards run since the drafter was made (:class:`ModelCache` counts them)."""
        return self.kv.forwards

    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """One forward over the committed ids the cache lacks + ``γ − 1`` masks
        (``γ = min(gamma, max_gamma)``), the masks cropped off the cache right after; then
        ``pick`` on each ``[V]`` row in order (so processors see each row's own prefix),
        stopping early when :meth:`_keep_drafting` says so. ``last``: the LM head runs on
        the ``γ`` rows used only (the greedy fast path); otherwise on every fed row, as
        :meth:`ModelCache.extend` does (the same values)."""
        gamma = min(gamma, self.max_gamma or gamma)
        if gamma < 1:
            return []
        committed = len(context)
        pending = self.kv.sync_to(context)
        fed = pending + [self.mask_id] * (gamma - 1)
        if last:
            logits = self.kv.extend_keep(fed, gamma)  # [γ, V + 1]: LM head on the γ rows used
        else:
            logits = self.kv.extend(fed)[len(pending) - 1 :]  # [γ, V + 1]
        self.kv.crop(committed)  # the masks leave the cache: committed ids only
        rows = logits[:, : self.mask_id]  # [γ, V]
        ids: list[int] = []
        for row in rows:
            ids.append(pick(row))
            if not self._keep_drafting():
                break
        return ids


# ---------------------------------------------------------------------- models by pair
_MODELS: dict[tuple[str, str], PreTrainedModel] = {}  # (folder, device) → model, loaded once
_MODELS_LOCK = threading.Lock()


def block_dir(pair: ModelPair) -> Path | None:
    """Where a pair's block drafter lives: ``block/`` beside the target's folder (the
    embedded pair: ``assets/models/embedded/block``); ``None`` when there is none (hub
    presets, test pairs)."""
    source = Path(pair.target_source)
    if not source.is_dir():
        return None
    folder = source.parent / FOLDER
    return folder if (folder / "config.json").is_file() else None


def preset_has_block_drafter(name: str) -> bool:
    """Whether the preset ``name`` ships a block drafter (by name, without loading the
    pair: the lesson-link check)."""
    from specdec_core.core.models import PRESETS

    preset = PRESETS.get(name)
    if preset is None or not preset.local:
        return False
    return (Path(preset.target).parent / FOLDER / "config.json").is_file()


def preset_block_max_gamma(name: str) -> int | None:
    """The block size the preset ``name``'s block drafter was trained for (its
    ``config.json``'s ``block_size``, without loading the weights): the most drafts one
    block proposal can make (:attr:`BlockDrafter.max_gamma`); ``None`` when the preset
    ships none or the config cannot be read."""
    from specdec_core.core.models import PRESETS

    if not preset_has_block_drafter(name):
        return None
    try:
        config = Path(PRESETS[name].target).parent / FOLDER / "config.json"
        return int(json.loads(config.read_text("utf-8"))["block_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def has_block_drafter(pair: ModelPair) -> bool:
    """Whether :func:`make_block_drafter` can serve this pair."""
    return block_dir(pair) is not None


def _missing(pair: ModelPair, why: str) -> ConfigError:
    return ConfigError(
        f"the pair {pair.name!r} has no block drafter ({why}; only the embedded pair ships "
        "one, in assets/models/embedded/block); choose another drafter",
        "block_missing",
        pair=pair.name,
    )


def load_block_model(pair: ModelPair) -> PreTrainedModel:
    """The pair's block draft model, loaded once per process (float32, eval mode, no
    gradients; shared read-only like the pair's models).

    Raises:
        ConfigError: code ``block_missing``: no ``block/`` folder beside the pair, weights
            that cannot be loaded, or a model whose vocabulary is not the pair's + 1 mask.
    """
    folder = block_dir(pair)
    if folder is None:
        raise _missing(pair, "no block/ folder beside it")
    key = (str(folder.resolve()), str(pair.device))
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            try:
                with quiet_transformers():  # no progress bar on stderr (as the pair loads)
                    model = AutoModelForCausalLM.from_pretrained(
                        folder, dtype=torch.float32, use_safetensors=True, trust_remote_code=False
                    )
            except (OSError, ValueError) as exc:
                raise _missing(pair, f"block/ cannot be loaded: {exc}") from exc
            model.to(pair.device).eval().requires_grad_(False)
            _MODELS[key] = model
    mask_id = getattr(model.config, "block_mask_token_id", None)
    if mask_id != pair.vocab_size or model.config.vocab_size != pair.vocab_size + 1:
        raise _missing(pair, f"block/ was trained for another vocabulary (mask id {mask_id})")
    return model


def make_block_drafter(pair: ModelPair) -> BlockDrafter:
    """A fresh :class:`BlockDrafter` (its own cache) on the pair's shared block model.

    Raises:
        ConfigError: see :func:`load_block_model`.
    """
    model = load_block_model(pair)
    return BlockDrafter(model, model.config.block_mask_token_id, model.config.block_size)
