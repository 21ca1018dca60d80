"""Drafters by name (the CLI's and the pages' ``--drafter``), with their knobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specdec_core.drafters.base import Drafter
from specdec_core.drafters.block import BlockDrafter, has_block_drafter, make_block_drafter
from specdec_core.drafters.eagle import EagleDrafter, make_eagle_drafter
from specdec_core.drafters.eagle_head import has_eagle_head
from specdec_core.drafters.model import EarlyExitDrafter, ModelDrafter
from specdec_core.drafters.mtp import MtpDrafter, make_mtp_drafter
from specdec_core.drafters.mtp_heads import has_mtp_heads
from specdec_core.drafters.ngram import NgramDrafter

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

#: The drafter classes by name (the order the pages list them in).
DRAFTER_CLASSES: dict[str, type[Drafter]] = {
    "model": ModelDrafter,
    "ngram": NgramDrafter,
    "early-exit": EarlyExitDrafter,
    "eagle": EagleDrafter,
    "mtp": MtpDrafter,
    "block": BlockDrafter,
}
DRAFTER_NAMES = tuple(DRAFTER_CLASSES)
#: The drafters that can draft a tree (:attr:`Drafter.can_draft_tree`: they have a
#: distribution), by name, in :data:`DRAFTER_NAMES` order.
TREE_DRAFTERS = tuple(n for n, cls in DRAFTER_CLASSES.items() if cls.can_draft_tree)


def default_knob(pair: ModelPair, name: str) -> int | None:
    """The knob a drafter gets when none is given: ``ngram`` n = 3, ``early-exit`` half
    the target's layers (at least 1), ``model`` none."""
    if name == "ngram":
        return 3
    if name == "early-exit":
        return max(1, pair.target.config.n_layer // 2)
    return None


def make_named_drafter(pair: ModelPair, name: str, knob: int | None = None) -> Drafter:
    """A fresh drafter (its own cache; the pair's models are shared, not copied):
    ``model`` (the pair's draft model; no knob), ``ngram`` (knob = max n, default 3) or
    ``early-exit`` (knob = layers, default half the target's) or ``eagle`` (the pair's
    EAGLE feature head, loaded once per process; no knob) or ``mtp`` (the pair's MTP
    heads, loaded once per process; no knob) or ``block`` (the pair's parallel block
    drafter, loaded once per process; no knob).

    Raises:
        ValueError: unknown name or knob out of range (``0`` is out of range, not "default").
        ConfigError: ``eagle`` on a pair without a head, ``mtp`` (code ``mtp_missing``) on
        a pair without heads, ``block`` (code ``block_missing``) on a pair without a block
        drafter (a ``ValueError`` too).
    """
    if knob is None:
        knob = default_knob(pair, name)
    if name == "model":
        return ModelDrafter(pair.draft)
    if name == "ngram":
        return NgramDrafter(pair.vocab_size, knob)
    if name == "early-exit":
        return EarlyExitDrafter(pair.target, knob)
    if name == "eagle":
        return make_eagle_drafter(pair)
    if name == "mtp":
        return make_mtp_drafter(pair)
    if name == "block":
        return make_block_drafter(pair)
    raise ValueError(f"unknown drafter {name!r}; choose one of {', '.join(DRAFTER_NAMES)}")


def drafters_for(pair: ModelPair) -> tuple[str, ...]:
    """The drafter names this pair can run (``eagle`` only with a head beside it, ``mtp``
    only with heads beside it, ``block`` only with a block drafter beside it)."""
    needs = {"eagle": has_eagle_head, "mtp": has_mtp_heads, "block": has_block_drafter}
    return tuple(n for n in DRAFTER_NAMES if n not in needs or needs[n](pair))
