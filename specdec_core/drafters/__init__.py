"""Draft sources behind one interface: ``propose(context, gamma, ...) -> Draft``.

Modelled on transformers' ``CandidateGenerator``: a drafter proposes up to γ candidate
tokens after the committed context, with the distributions ``q_1..q_γ`` they were drawn
from. A drafter without a distribution returns one-hot rows.

Modules: ``base`` (the interface with its one proposal loop, :class:`Draft`,
:func:`draw_proposal`), ``model`` (draft model and early exit), ``ngram`` (prompt lookup),
``eagle`` (EAGLE drafting on the target's hidden states), ``eagle_head`` (the head's model,
files, and which pair ships one), ``mtp`` / ``mtp_heads`` (Medusa-style multi-token heads
on the target's hidden states: the drafter, and the heads' model and files), ``block``
(PARD-style parallel drafting, γ tokens in one forward), ``head_files`` (a trained head's
files on disk), ``registry`` (the drafter table: one
:class:`~specdec_core.drafters.registry.DrafterSpec` per name, the only place a drafter is
known by name).
"""

from specdec_core.drafters.base import Draft, Drafter, draw_proposal
from specdec_core.drafters.eagle import EagleDrafter, make_eagle_drafter
from specdec_core.drafters.eagle_head import has_eagle_head, load_eagle_head, preset_has_eagle_head
from specdec_core.drafters.model import EarlyExitDrafter, ModelDrafter, early_exit_model
from specdec_core.drafters.mtp import MtpDrafter, make_mtp_drafter
from specdec_core.drafters.mtp_heads import has_mtp_heads, load_mtp_heads, preset_has_mtp_heads
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.registry import (
    DRAFTER_NAMES,
    DRAFTERS,
    TREE_DRAFTERS,
    DrafterSpec,
    default_knob,
    drafters_for,
    make_named_drafter,
    preset_max_gamma,
    spec_of,
)

__all__ = [
    "DRAFTERS",
    "DRAFTER_NAMES",
    "TREE_DRAFTERS",
    "Draft",
    "Drafter",
    "DrafterSpec",
    "EagleDrafter",
    "EarlyExitDrafter",
    "ModelDrafter",
    "MtpDrafter",
    "NgramDrafter",
    "default_knob",
    "drafters_for",
    "draw_proposal",
    "early_exit_model",
    "has_eagle_head",
    "has_mtp_heads",
    "load_eagle_head",
    "load_mtp_heads",
    "make_eagle_drafter",
    "make_mtp_drafter",
    "make_named_drafter",
    "preset_has_eagle_head",
    "preset_has_mtp_heads",
    "preset_max_gamma",
    "spec_of",
]
