"""Draft sources behind one interface: ``propose(context, gamma, ...) -> Draft``.

Modelled on transformers' ``CandidateGenerator``: a drafter proposes up to γ candidate
tokens after the committed context, with the distributions ``q_1..q_γ`` they were drawn
from. A drafter without a distribution returns one-hot rows.

Modules: ``base`` (the interface with its one proposal loop, :class:`Draft`,
:func:`draw_proposal`), ``model`` (draft model and early exit), ``ngram`` (prompt lookup),
``eagle`` (EAGLE drafting on the target's hidden states), ``eagle_head`` (the head's model,
files, and which pair ships one), ``mtp`` / ``mtp_heads`` (Medusa-style multi-token heads
on the target's hidden states: the drafter, and the heads' model and files), ``block``
(PARD-style parallel drafting, γ tokens in one forward), ``recurrent`` /
``recurrent_lm`` (a GRU drafter that checkpoints its state per token, and its model),
``head_files`` (a trained head's
files on disk), ``registry`` (the drafter table: one
:class:`~specdec_core.drafters.registry.DrafterSpec` per name, the only place a drafter is
known by name).
"""
