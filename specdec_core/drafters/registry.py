"""Drafters by name (the CLI's and the pages' ``--drafter``), with their knobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Drafter
from .model import EarlyExitDrafter, ModelDrafter
from .ngram import NgramDrafter

if TYPE_CHECKING:
    from ..models import ModelPair

DRAFTER_NAMES = ("model", "ngram", "early-exit")


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
    ``early-exit`` (knob = layers, default half the target's).

    Raises:
        ValueError: unknown name or knob out of range (``0`` is out of range, not "default").
    """
    if knob is None:
        knob = default_knob(pair, name)
    if name == "model":
        return ModelDrafter(pair.draft)
    if name == "ngram":
        return NgramDrafter(pair.vocab_size, knob)
    if name == "early-exit":
        return EarlyExitDrafter(pair.target, knob)
    raise ValueError(f"unknown drafter {name!r}; choose model, ngram or early-exit")
