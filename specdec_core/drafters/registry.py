"""The drafter table: one :class:`DrafterSpec` per ``--drafter`` name, the one place a
drafter is known by name.

Everything else asks a drafter object (:class:`~specdec_core.drafters.base.Drafter`'s
attributes: ``max_gamma``, ``can_draft_tree``, ``follows_grammar``, ``draft_cost``) or
its row here, :func:`spec_of` (by name or object), never ``name == "…"``:

=============  ===========================================================================
``make``       a fresh drafter, ``make(pair, knob)`` (:func:`make_named_drafter` checks
               the name and fills the knob)
``knob``       the default knob on a pair (``ngram`` n = 3, ``early-exit`` half the
               target's layers), ``None``: no knob
``on_pair``    whether a loaded pair can run it (EAGLE/MTP/block: trained files beside it)
``on_preset``  the same for a preset name, reading files only (lesson links, the sidebar)
``preset_gamma`` the most drafts one proposal can make on a preset (``None``: no limit of
               its own; the heads' ``K``, the block size), read from the shipped config
``tree_code``  the refusal code, set exactly when its class cannot draft a tree
               (``Drafter.can_draft_tree``, the one source of that fact; ``tree_no_ngram``,
               ``tree_block``, ``tree_recurrent``); ``None`` on a row that drafts trees
``confidence`` whether the confidence stop applies (its rows can fall under a threshold;
               prompt lookup's one-hot rows never do: ``confidence_ngram``)
``empty_draft`` the reason shown for a round that drafted nothing (``ngram``: no match in
               the context; ``drafter``)
``hf_assisted`` whether transformers' assisted generation is a peer to time (it takes a
               draft *model*)
=============  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specdec_core.drafters.base import Drafter
from specdec_core.drafters.block import (
    BlockDrafter,
    has_block_drafter,
    make_block_drafter,
    preset_block_max_gamma,
    preset_has_block_drafter,
)
from specdec_core.drafters.eagle import EagleDrafter, make_eagle_drafter
from specdec_core.drafters.eagle_head import has_eagle_head, preset_has_eagle_head
from specdec_core.drafters.model import EarlyExitDrafter, ModelDrafter, make_model_drafter
from specdec_core.drafters.mtp import MtpDrafter, make_mtp_drafter
from specdec_core.drafters.mtp_heads import (
    has_mtp_heads,
    preset_has_mtp_heads,
    preset_mtp_max_gamma,
)
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.recurrent import (
    RecurrentDrafter,
    has_recurrent,
    make_recurrent_drafter,
    preset_has_recurrent,
)

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair


def _no_knob(pair: ModelPair) -> int | None:
    return None


def _any_pair(pair: ModelPair) -> bool:
    return True


def _any_preset(preset: str) -> bool:
    return True


def _no_limit(preset: str) -> int | None:
    return None


@dataclass(frozen=True)
class DrafterSpec:
    """One drafter's row of the table (the fields are described in the module docstring);
    ``cls`` is its class, whose ``draft_cost`` and ``max_gamma`` are read from it."""

    name: str
    cls: type[Drafter]
    make: Callable[[ModelPair, int | None], Drafter]
    knob: Callable[[ModelPair], int | None] = _no_knob
    on_pair: Callable[[ModelPair], bool] = _any_pair
    on_preset: Callable[[str], bool] = _any_preset
    preset_gamma: Callable[[str], int | None] = _no_limit
    tree_code: str | None = None
    confidence: bool = True
    empty_draft: str = "drafter"
    hf_assisted: bool = False

    def __post_init__(self) -> None:
        """ValueError: a refusal code on a row whose class drafts trees, or none on one
        whose class cannot."""
        if (self.tree_code is None) != self.cls.can_draft_tree:
            raise ValueError(
                f"drafter {self.name!r}: tree_code {self.tree_code!r} disagrees "
                f"with {self.cls.__name__}.can_draft_tree"
            )

    @property
    def can_draft_tree(self) -> bool:
        """Whether it drafts trees (:attr:`Drafter.can_draft_tree` of its class)."""
        return self.cls.can_draft_tree

    @property
    def draft_cost(self) -> str:
        """What a drafting round runs, for the cost model (:attr:`Drafter.draft_cost`)."""
        return self.cls.draft_cost


#: Why a drafter cannot draft a tree, in English (the CLI, logs), by its row's
#: :attr:`DrafterSpec.tree_code` (the UI says ``err_<code>``).
NO_TREE_WHY: dict[str, str] = {
    "tree_block": "proposes one path per forward (a q row for each position of one block, "
    "none for a sibling), so it cannot draft a tree; verify a chain or use the draft model",
    "tree_no_ngram": "proposes one continuation without probabilities, so it cannot draft a "
    "tree; use the draft model",
    "tree_recurrent": "keeps one recurrent state per path (a tree would need one per node), "
    "so it cannot draft a tree; verify a chain or use the draft model",
}

#: The table, in the order the pages list the drafters.
DRAFTERS: dict[str, DrafterSpec] = {
    s.name: s
    for s in (
        DrafterSpec(
            "model", ModelDrafter, lambda pair, _: make_model_drafter(pair), hf_assisted=True
        ),
        DrafterSpec(
            "ngram",
            NgramDrafter,
            lambda pair, n: NgramDrafter(pair.vocab_size, n),
            knob=lambda pair: 3,
            tree_code="tree_no_ngram",
            confidence=False,
            empty_draft="ngram",
        ),
        DrafterSpec(
            "early-exit",
            EarlyExitDrafter,
            lambda pair, k: EarlyExitDrafter(pair.target, k),
            knob=lambda pair: max(1, pair.target.config.n_layer // 2),
        ),
        DrafterSpec(
            "eagle",
            EagleDrafter,
            lambda pair, _: make_eagle_drafter(pair),
            on_pair=has_eagle_head,
            on_preset=preset_has_eagle_head,
        ),
        DrafterSpec(
            "mtp",
            MtpDrafter,
            lambda pair, _: make_mtp_drafter(pair),
            on_pair=has_mtp_heads,
            on_preset=preset_has_mtp_heads,
            preset_gamma=preset_mtp_max_gamma,
        ),
        DrafterSpec(
            "block",
            BlockDrafter,
            lambda pair, _: make_block_drafter(pair),
            on_pair=has_block_drafter,
            on_preset=preset_has_block_drafter,
            preset_gamma=preset_block_max_gamma,
            tree_code="tree_block",
        ),
        DrafterSpec(
            "recurrent",
            RecurrentDrafter,
            lambda pair, _: make_recurrent_drafter(pair),
            on_pair=has_recurrent,
            on_preset=preset_has_recurrent,
            tree_code="tree_recurrent",
        ),
    )
}
DRAFTER_NAMES = tuple(DRAFTERS)
#: The drafter classes by name (:data:`DRAFTERS` order).
DRAFTER_CLASSES: dict[str, type[Drafter]] = {n: s.cls for n, s in DRAFTERS.items()}
#: The drafters that can draft a tree, by name, in :data:`DRAFTER_NAMES` order.
TREE_DRAFTERS = tuple(n for n, s in DRAFTERS.items() if s.can_draft_tree)


def spec_of(drafter: Drafter | str | None) -> DrafterSpec | None:
    """The table row of a drafter given by name or object (``None``: the pair's draft
    model, ``"model"``); ``None`` for a name or an object not in the table (a test's own
    drafter: ask the object)."""
    name = "model" if drafter is None else drafter if isinstance(drafter, str) else drafter.name
    return DRAFTERS.get(name)


def runs_int8(pair: ModelPair, name: str) -> bool:
    """Whether the drafter ``name`` made on ``pair`` now runs weight-only int8 weights
    (asked of a fresh drafter: the device, ``SPECDEC_DRAFT_WEIGHTS``, its default, a self
    pair and the widths the kernel reads all decide it)."""
    return bool(getattr(make_named_drafter(pair, name), "int8", False))


def default_knob(pair: ModelPair, name: str) -> int | None:
    """The knob a drafter gets when none is given (:attr:`DrafterSpec.knob`)."""
    spec = DRAFTERS.get(name)
    return None if spec is None else spec.knob(pair)


def make_named_drafter(pair: ModelPair, name: str, knob: int | None = None) -> Drafter:
    """A fresh drafter (its own cache; the pair's models are shared, not copied):
    ``model`` (the pair's draft model; no knob), ``ngram`` (knob = max n, default 3) or
    ``early-exit`` (knob = layers, default half the target's) or ``eagle`` (the pair's
    EAGLE feature head, loaded once per process; no knob) or ``mtp`` (the pair's MTP
    heads, loaded once per process; no knob) or ``block`` (the pair's parallel block
    drafter, loaded once per process; no knob) or ``recurrent`` (the pair's GRU drafter,
    loaded once per process; no knob).

    Raises:
        ValueError: unknown name or knob out of range (``0`` is out of range, not "default").
        ConfigError: ``eagle`` on a pair without a head, ``mtp`` (code ``mtp_missing``) on
        a pair without heads, ``block`` (code ``block_missing``) on a pair without a block
        drafter, ``recurrent`` (code ``recurrent_missing``) on a pair without one (a
        ``ValueError`` too).
    """
    spec = DRAFTERS.get(name)
    if spec is None:
        raise ValueError(f"unknown drafter {name!r}; choose one of {', '.join(DRAFTER_NAMES)}")
    return spec.make(pair, spec.knob(pair) if knob is None else knob)


def drafters_for(pair: ModelPair) -> tuple[str, ...]:
    """The drafter names this pair can run (:attr:`DrafterSpec.on_pair`)."""
    return tuple(n for n, s in DRAFTERS.items() if s.on_pair(pair))


def preset_max_gamma(preset: str, drafter: str) -> int | None:
    """The most drafts one proposal of ``drafter`` can make on the preset ``preset``
    (:attr:`DrafterSpec.preset_gamma`, read from the shipped config without loading
    anything); ``None``: no limit of its own (or an unknown name)."""
    spec = DRAFTERS.get(drafter)
    return None if spec is None else spec.preset_gamma(preset)


def no_tree_code(drafter: Drafter | str | None) -> str:
    """The refusal code for a drafter that cannot draft a tree: its row's
    :attr:`DrafterSpec.tree_code`; ``tree_no_ngram`` (no distribution to branch on) for a
    drafter without a row or one whose row has none (it returned no rows to branch on)."""
    spec = spec_of(drafter)
    code = spec.tree_code if spec is not None else None
    return code or "tree_no_ngram"
