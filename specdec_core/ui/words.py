"""Engine words → translation keys: one table per word family of
:mod:`specdec_core.core.words` (and the few words the step page adds), so a page never
builds a string key by concatenation and ``tests/test_ui_words.py`` checks that every
value of every family has its string in English and Chinese.

Use: ``t(STOP_REASON[session.stop_reason])``, or :func:`say` for the common case;
:func:`step_where` words where a step state stands (the step page's phase box and a live
class's line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from specdec_core.core.words import (
    CheckStatus,
    NodeViewState,
    Phase,
    RoundKind,
    StopReason,
    StripState,
)
from specdec_core.ui.i18n import t

Step = Literal["propose", "verify", "commit"]  # a phase a button runs
#: why a chain round has no drafts (``ui/step/view.py`` ``no_drafts_reason``)
NoDraftsReason = Literal["budget", "ngram", "hidden", "drafter"]
#: the drafters page's strip legend (its own words: which model made the token), in order
DRAFTERS_STRIP: dict[StripState, str] = {
    "accepted": "dr_leg_accepted",
    "rejected": "dr_leg_rejected",
    "discarded": "dr_leg_discarded",
    "correction": "dr_leg_correction",
    "bonus": "dr_leg_bonus",
    "committed": "dr_leg_committed",
}
#: a row of the chain's KV table (``core/kvcache.py`` ``kv_state``)
KvRowState = Literal[
    "prompt",
    "committed",
    "committed-no-KV-yet",
    "tentative",
    "accepted",
    "rejected",
    "discarded",
    "cut",
]
#: a node of the drawn tree (``ui/figures/tree.py`` ``STATE_STYLE``): a node view's state,
#: the root, and the ★ token (appended, or ``_cut`` when a stop came first)
FigureState = Literal[
    "root",
    "tentative",
    "accepted",
    "rejected",
    "unchecked",
    "cut",
    "correction",
    "bonus",
    "correction_cut",
    "bonus_cut",
]
#: a slot of the tree's KV tables: a committed row or a node
SlotState = Literal["prompt", "committed", "tentative", "accepted", "rejected", "unchecked", "cut"]
Mode = Literal["chain", "tree"]
#: why the settings cannot draft a tree (``engine/tree/generate.py`` ``tree_refusal``)
TreeRefusal = Literal["tree_no_ngram", "tree_block", "tree_recurrent", "tree_needs_probabilistic"]

#: why generation stopped (``phase_finished``'s ``{reason}``, the stop notices)
STOP_REASON: dict[StopReason, str] = {
    "eos": "stop_eos",
    "stop_string": "stop_stop_string",
    "max_new_tokens": "stop_max_new_tokens",
    "context_limit": "stop_context_limit",
    "until": "stop_until",
}
#: how a round of each shape ended (the history lines, the tree's outcome line)
ROUND_KIND: dict[tuple[Mode, RoundKind], str] = {
    ("chain", "correction"): "kind_correction",
    ("chain", "bonus"): "kind_bonus",
    ("chain", "stopped"): "kind_stopped",
    ("tree", "correction"): "tree_kind_correction",
    ("tree", "bonus"): "tree_kind_bonus",
    ("tree", "stopped"): "tree_kind_stopped",
}
#: the verdict on one drafted position (the checks table, the verdict sentence)
CHECK_STATUS: dict[CheckStatus, str] = {
    "accepted": "verdict_accepted",
    "rejected": "verdict_rejected",
    "discarded": "verdict_discarded",
    "cut": "verdict_cut",
}
#: the same under block verification: every ``u`` is tested (backwards), none "unchecked"
BLOCK_STATUS: dict[CheckStatus, str] = {**CHECK_STATUS, "discarded": "verdict_block_discarded"}
#: a token of a token strip (its legend chip)
STRIP_STATE: dict[StripState, str] = {
    "prompt": "legend_prompt",
    "committed": "legend_committed",
    "tentative": "legend_tentative",
    "accepted": "legend_accepted",
    "rejected": "legend_rejected",
    "discarded": "legend_discarded",
    "cut": "legend_cut",
    "correction": "legend_correction",
    "bonus": "legend_bonus",
}
#: a row of the chain's KV table
KV_ROW_STATE: dict[KvRowState, str] = {
    "prompt": "state_prompt",
    "committed": "state_committed",
    "committed-no-KV-yet": "state_committed-no-KV-yet",
    "tentative": "state_tentative",
    "accepted": "state_accepted",
    "rejected": "state_rejected",
    "discarded": "state_discarded",
    "cut": "state_cut",
}
#: a node of a tree view (the mask grid; the figure uses :data:`FIGURE_STATE`)
NODE_STATE: dict[NodeViewState, str] = {
    "tentative": "tree_state_tentative",
    "accepted": "tree_state_accepted",
    "rejected": "tree_state_rejected",
    "unchecked": "tree_state_unchecked",
    "cut": "tree_state_cut",
}
#: a node of the drawn tree (legend and hover)
FIGURE_STATE: dict[FigureState, str] = {
    "root": "tree_state_root",
    **NODE_STATE,
    "correction": "tree_state_correction",
    "bonus": "tree_state_bonus",
    "correction_cut": "tree_state_correction_cut",
    "bonus_cut": "tree_state_bonus_cut",
}
#: a slot of the tree's KV tables
SLOT_STATE: dict[SlotState, str] = {
    "prompt": "tree_slot_prompt",
    "committed": "tree_slot_committed",
    **NODE_STATE,
}
#: where each shape's step machine stands (the phase line; ``finished`` takes ``{reason}``,
#: the tree's ``propose`` ``{shape}`` and ``{budget}``)
PHASE: dict[tuple[Mode, Phase], str] = {
    ("chain", "propose"): "phase_propose",
    ("chain", "verify"): "phase_verify",
    ("chain", "commit"): "phase_commit",
    ("chain", "finished"): "phase_finished",
    ("tree", "propose"): "tree_phase_propose",
    ("tree", "verify"): "tree_phase_verify",
    ("tree", "commit"): "tree_phase_commit",
    ("tree", "finished"): "phase_finished",
}
#: the chain's phase line in a round without drafts, by phase and reason
NO_DRAFTS_PHASE: dict[tuple[Step, NoDraftsReason], str] = {
    ("verify", "budget"): "phase_verify_no_drafts_budget",
    ("verify", "ngram"): "phase_verify_no_drafts_ngram",
    ("verify", "hidden"): "phase_verify_no_drafts_hidden",
    ("verify", "drafter"): "phase_verify_no_drafts_drafter",
    ("commit", "budget"): "phase_commit_no_drafts_budget",
    ("commit", "ngram"): "phase_commit_no_drafts_ngram",
    ("commit", "hidden"): "phase_commit_no_drafts_hidden",
    ("commit", "drafter"): "phase_commit_no_drafts_drafter",
}
#: the chain's "what comes next" line in a round without drafts (``{tok}``)
NEXT_NO_DRAFTS: dict[NoDraftsReason, str] = {
    "budget": "next_no_drafts",
    "ngram": "next_no_drafts_ngram",
    "hidden": "next_no_drafts_hidden",
    "drafter": "next_no_drafts_drafter",
}
#: each shape's step buttons
STEP_BUTTON: dict[tuple[Mode, Step], str] = {
    ("chain", "propose"): "st_propose",
    ("chain", "verify"): "st_verify",
    ("chain", "commit"): "st_commit",
    ("tree", "propose"): "tree_propose",
    ("tree", "verify"): "tree_verify",
    ("tree", "commit"): "tree_commit",
}
#: why tree mode is refused with the sidebar's settings (the tree panel's warning)
TREE_REFUSAL: dict[TreeRefusal, str] = {
    "tree_no_ngram": "err_tree_no_ngram",
    "tree_block": "err_tree_block",
    "tree_recurrent": "err_tree_recurrent",
    "tree_needs_probabilistic": "err_tree_needs_probabilistic",
}
#: the step page's verification shape (its mode control)
MODE: dict[Mode, str] = {"chain": "tree_mode_chain", "tree": "tree_mode_tree"}

W = TypeVar("W", bound=str)


def say(table: Mapping[W, str], word: W, **fmt: object) -> str:
    """``word`` in the page's language: ``t(table[word], **fmt)``. Raises ``KeyError`` for
    a word the table does not have (never a made-up key)."""
    return t(table[word], **fmt)


#: a round's steps in order (the step done before ``propose`` is the last round's commit)
STEPS: tuple[Step, ...] = ("propose", "verify", "commit")


def step_where(r: int, phase: str, carried: object = None, mode: Mode = "chain") -> str:
    """What a step state has done and what comes next (``r``: finished rounds; ``phase``:
    the next step, :class:`~specdec_core.lessons.link.LessonState`; any other phase reads
    as ``propose``), in the words of ``mode``'s buttons (:data:`STEP_BUTTON`): "round 1:
    ① Propose done — next: ② Verify", "round 1: ③ Commit & compact done — next: round 2,
    ① Propose tree", with the new run's note when ``carried`` tokens came over from a
    switch (chain ↔ tree, settings): the step page counts its rounds from there too. The
    one wording of the step page's phase box, the teacher card, the pushed and the polled
    follower."""
    step: Step = phase if phase in STEPS else "propose"  # type: ignore[assignment]
    done = say(STEP_BUTTON, (mode, STEPS[STEPS.index(step) - 1]))
    next_ = say(STEP_BUTTON, (mode, step))
    if step != "propose":
        where = t("live_at_step", r=r + 1, done=done, next=next_)
    elif r > 0:
        where = t("live_at_new_round", p=r, done=done, r=r + 1, next=next_)
    else:
        where = t("live_at_start_round", r=1, next=next_)
    if isinstance(carried, int) and not isinstance(carried, bool) and carried > 0:
        where += t("live_carried", n=carried)
    return where
