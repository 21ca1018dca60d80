"""The recurrent drafter: a small GRU language model (``drafters/recurrent_lm.py``)
proposes serially from a state it checkpoints after every token it reads.

One proposal after the committed context ``x_1 … x_L`` (``γ`` reads, like the draft
model's ``γ`` forwards)::

    h = restore(longest checkpoint on the context)     # core/checkpoints.py
    h = read(x_{m+1} … x_L, h);  save(L)               # the tokens the state lacks
    y_1 ~ q_1 = softmax(head(h))
    h = read(y_1, h);  save(L + 1)                     # a checkpoint after each draft
    …                                                  # … read, save, draw, up to y_γ
    (y_γ is not read: its state is needed only once it is accepted, and then the next
     proposal reads it with the correction/bonus token)

On rejection after ``n`` accepted drafts the engine rolls the drafter back to ``L + n``
(``Drafter.rollback_to``): the checkpoint saved after ``y_n`` becomes the live state,
the later ones are discarded. The next proposal reads the correction from there. A
KV-cache drafter crops instead; a recurrent state cannot be cropped
(``core/checkpoints.py``). ``restore=False`` is the lesson's wrong way (the rollback
forgets the drafts' ids but keeps their state): output stays exact, because the target
verifies every draft, but acceptance drops (``lessons/wrong_state.py``).

Trees are refused (``tree_recurrent``): one state per path would mean one state per node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from specdec_core.core.checkpoints import StateLedger, StateView
from specdec_core.core.device import sync
from specdec_core.core.errors import ConfigError
from specdec_core.core.timeline import ForwardClock
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.recurrent_lm import CONFIG, RecurrentLM, load_recurrent

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

FOLDER = "recurrent"


class RecurrentDrafter(Drafter):
    """γ drafts from a recurrent model's state, checkpointed after each token read (see
    the module docstring).

    Args:
        model: a :class:`RecurrentLM` in eval mode (shared, never changed).
        restore: restore the checkpoint on rollback (``False``: the wrong way).
    """

    name = "recurrent"
    can_draft_tree = False

    def __init__(self, model: RecurrentLM, restore: bool = True) -> None:
        self.model = model
        self.ledger = StateLedger(restore)
        self.device = model.wte.weight.device
        self.vocab_size = model.config.vocab_size
        self._forwards = 0
        self.clock = ForwardClock()

    @property
    def forwards(self) -> int:
        """Reads run since the drafter was made (one model call each)."""
        return self._forwards

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside the model's reads (device-synchronised)."""
        return self.clock.forward_ms

    def cached_ids(self) -> list[int] | None:
        """The ids the live state has read (a prefix of the committed ids between rounds)."""
        return list(self.ledger.ids)

    def rollback(self, length: int) -> int:
        """Restore the checkpoint at ``length`` (:meth:`StateLedger.rollback`)."""
        return self.ledger.rollback(length)

    def state_view(self) -> StateView:
        """The checkpoints now (the step page's state table, the CLI's round ``state``)."""
        return self.ledger.view()

    @torch.inference_mode()
    def _read(self, ids: list[int]) -> torch.Tensor:
        """Read ``ids`` from the live state and save the new state (none: the live state
        as it is); ``[V]`` float32 logits after it. One model call."""
        started = time.perf_counter()
        state = self.model.read(ids, self.ledger.state) if ids else self.ledger.state
        assert state is not None, "a proposal needs at least one context id"
        logits = self.model.logits(state)  # state: [1, 1, H] → logits: [V]
        sync(self.device)
        self.clock.add(started)
        self._forwards += 1
        if ids:
            self.ledger.advance(ids, state)
        return logits

    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """``gamma`` reads (fewer on the confidence stop): the context ids the state lacks,
        then each draft but the last; a checkpoint after each read."""
        ids: list[int] = []
        pending = self.ledger.begin(context)  # may be empty: the state has read it all
        for _ in range(gamma):
            ids.append(pick(self._read(pending)))
            if not self._keep_drafting():
                break
            pending = [ids[-1]]
        return ids


# ---------------------------------------------------------------------- models by pair
_MODELS: dict[tuple[str, str], RecurrentLM] = {}  # (folder, device) → model, loaded once
_MODELS_LOCK = threading.Lock()


def recurrent_dir(pair: ModelPair) -> Path | None:
    """``recurrent/`` beside the pair's target folder, ``None`` when there is none."""
    source = Path(pair.target_source)
    if not source.is_dir():
        return None
    folder = source.parent / FOLDER
    return folder if (folder / CONFIG).is_file() else None


def preset_has_recurrent(name: str) -> bool:
    """Whether the preset ``name`` ships a recurrent drafter (files only: lesson links)."""
    from specdec_core.core.models import PRESETS

    preset = PRESETS.get(name)
    if preset is None or not preset.local:
        return False
    return (Path(preset.target).parent / FOLDER / CONFIG).is_file()


def has_recurrent(pair: ModelPair) -> bool:
    """Whether :func:`make_recurrent_drafter` can serve this pair."""
    return recurrent_dir(pair) is not None


def load_recurrent_model(pair: ModelPair) -> RecurrentLM:
    """The pair's recurrent model, loaded once per process (float32, eval, no gradients).

    Raises:
        ConfigError: code ``recurrent_missing``: no ``recurrent/`` folder, files that
            cannot be loaded, or a vocabulary other than the pair's.
    """
    folder = recurrent_dir(pair)
    why = "no recurrent/ folder beside it"
    if folder is not None:
        key = (str(folder.resolve()), str(pair.device))
        with _MODELS_LOCK:
            model = _MODELS.get(key)
            if model is None:
                try:
                    model = load_recurrent(folder, pair.device)
                except (OSError, ValueError) as exc:
                    why = f"recurrent/ cannot be loaded: {exc}"
                else:
                    _MODELS[key] = model
        if model is not None and model.config.vocab_size == pair.vocab_size:
            return model
        if model is not None:
            why = "recurrent/ was trained for another vocabulary"
    raise ConfigError(
        f"the pair {pair.name!r} has no recurrent drafter ({why}; only the embedded pair "
        "ships one, in assets/models/embedded/recurrent); choose another drafter",
        "recurrent_missing",
        pair=pair.name,
    )


def make_recurrent_drafter(pair: ModelPair) -> RecurrentDrafter:
    """A fresh :class:`RecurrentDrafter` (its own state) on the pair's shared model.

    Raises:
        ConfigError: see :func:`load_recurrent_model`.
    """
    return RecurrentDrafter(load_recurrent_model(pair))
