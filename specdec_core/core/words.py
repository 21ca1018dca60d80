"""The typed words shared by the chain and the tree: one ``Literal`` per family, so a page
maps each word to a translation key through one table and a type checker sees a typo.

Every value here is part of the trace/JSON contract (trace files, CLI JSON, links): never
rename one. ``typing.get_args(Word)`` lists the values of a word in this order.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Where a step machine stands (:attr:`specdec_core.engine.session.Session.phase`):
#: the next step it accepts, or ``finished`` once a stop ended generation.
Phase = Literal["propose", "verify", "commit", "finished"]

#: The rule's own verdict on the target's token of a round: ``correction`` (a draft was
#: rejected, the token replaces it) or ``bonus`` (every draft on the path was accepted).
VerdictKind = Literal["correction", "bonus"]

#: How a round ended: the rule's :data:`VerdictKind`, or ``stopped`` when a stop (EOS, a
#: stop string, ``max_new_tokens``, the context) cut the commit short before that token.
RoundKind = Literal["correction", "bonus", "stopped"]

#: Why generation stopped (:func:`specdec_core.engine.rounds.stop_reason_after`, checked in
#: this order; ``until``: a search's ``until`` callback of
#: :func:`specdec_core.engine.chain.generate.generate` ended the run).
StopReason = Literal["eos", "stop_string", "max_new_tokens", "context_limit", "until"]

#: Status of one drafted position of a chain round after verification
#: (:func:`specdec_core.engine.chain.records.round_statuses`).
CheckStatus = Literal["accepted", "rejected", "discarded", "cut"]

#: State of one node of a tree round after verification
#: (:func:`specdec_core.engine.tree.records.node_states`).
NodeState = Literal["accepted", "rejected", "unchecked", "cut"]

#: A tree node as a view shows it: ``tentative`` before verification, then its
#: :data:`NodeState` (:class:`specdec_core.engine.tree.views.TreeNodeView`).
NodeViewState = Literal["tentative", "accepted", "rejected", "unchecked", "cut"]

#: State of one token of a token strip (the keys of ``ui/render.py`` ``STYLES``): the
#: prompt, text committed before, a draft not yet verified (``tentative``), a draft's
#: :data:`CheckStatus`, or the target's own token of the round (``correction``/``bonus``).
#: Chain rule: :func:`specdec_core.engine.chain.records.strip_states`; tree rule:
#: :func:`specdec_core.engine.tree.records.tree_strip_states`.
StripState = Literal[
    "accepted",
    "rejected",
    "discarded",
    "cut",
    "correction",
    "bonus",
    "committed",
    "prompt",
    "tentative",
]

PHASES: tuple[Phase, ...] = get_args(Phase)
ROUND_KINDS: tuple[RoundKind, ...] = get_args(RoundKind)
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
CHECK_STATUSES: tuple[CheckStatus, ...] = get_args(CheckStatus)
NODE_STATES: tuple[NodeState, ...] = get_args(NodeState)
STRIP_WORDS: tuple[StripState, ...] = get_args(StripState)
