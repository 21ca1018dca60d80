"""The tree round's settings and its fast path: the shape, budget and refusals
(:func:`parse_shape`, :func:`check_budget`, :func:`check_tree_settings`), the drafter
choice, the round's depth, and :func:`generate_tree` (no views, returns a
:class:`TreeRun`), a loop over the functions of ``engine/tree/round.py``, which
``engine/tree/session.py`` runs step by step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from specdec_core.core.device import sync
from specdec_core.core.errors import ConfigError
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.core.processors import make_processors
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.model import make_model_drafter
from specdec_core.drafters.registry import TREE_DRAFTERS, make_named_drafter, no_tree_code
from specdec_core.engine.rounds import (
    check_grammar_drafter,
    gamma_for_round,
    round_stream,
    stop_rule,
)
from specdec_core.engine.schedule import check_gamma_settings
from specdec_core.engine.tree.records import TreeRoundRecord, TreeStats, summarize_tree
from specdec_core.engine.tree.round import (
    TreeContext,
    apply_round,
    decide_round,
    draft_tree,
    tree_forward,
    tree_refused,
    walk,
)

MAX_TREE_NODES = 16


def check_budget(budget: int) -> int:
    """The node budget, 1..:data:`MAX_TREE_NODES`. Raises ConfigError otherwise."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_TREE_NODES:
        raise ConfigError(f"tree node budget must be 1..{MAX_TREE_NODES}, got {budget!r}", "tree")
    return budget


def parse_shape(text: str) -> tuple[int, ...]:
    """``"2,2,1,1"`` → ``(2, 2, 1, 1)``: children per node at each depth, each 1..4, depth
    1..8.

    Raises:
        ConfigError: anything else.
    """
    try:
        shape = tuple(int(x) for x in str(text).split(","))
    except ValueError as exc:
        raise ConfigError(f"tree shape must look like 2,2,1,1, got {text!r}", "tree") from exc
    if not 1 <= len(shape) <= 8 or not all(1 <= k <= 4 for k in shape):
        raise ConfigError(f"tree shape: 1..8 depths of 1..4 children, got {text!r}", "tree")
    return shape


def tree_refusal(
    drafter: Drafter | str | None, draft_method: str, temperature: float
) -> str | None:
    """Why a tree cannot be drafted with these settings, as a code (the UI's string key
    is ``err_<code>``), or ``None`` when it can. The one rule the engine, the tree page
    and the lesson links share:

    * ``tree_no_ngram``: the drafter (an object, a name of
      :data:`specdec_core.drafters.registry.DRAFTER_NAMES`; ``None`` is the pair's draft
      model) has no distribution (:attr:`Drafter.can_draft_tree` is false: prompt
      lookup), so it cannot give more than one candidate per position;
    * ``tree_block``: the parallel block drafter (``block``) has one row per depth, all
      from one forward, and no row after a sibling, so it cannot branch;
    * ``tree_recurrent``: the recurrent drafter keeps one state per path, and a tree would
      need one per node;
    * ``tree_needs_probabilistic``: a greedy *draft method* at temperature > 0 (sibling
      candidates must be drawn i.i.d. from ``q`` for the multi-candidate rule).
    """
    if isinstance(drafter, str):
        can_tree = drafter in TREE_DRAFTERS
    else:
        can_tree = drafter is None or drafter.can_draft_tree
    if not can_tree:
        return no_tree_code(drafter)
    if draft_method == "greedy" and temperature > 0:
        return "tree_needs_probabilistic"
    return None


def check_tree_settings(config: SessionConfig, drafter: Drafter | str | None = None) -> None:
    """Raises the ConfigError of :func:`tree_refusal` (code ``tree_no_ngram`` or
    ``tree_needs_probabilistic``, English message for the CLI and logs) when
    ``config`` and ``drafter`` cannot draft a tree, and code ``acceptance_mode`` for a lossy
    acceptance rule (``rules/lossy.py`` verifies chains only; the tree keeps the exact
    multi-candidate rule, never silently), code ``block_tree`` for block verification (it
    verifies a chain; a tree keeps the token-wise SpecInfer rule), and the γ schedule's refusals
    (:func:`~specdec_core.engine.schedule.check_gamma_settings`: ``gamma_schedule_tree``)."""
    if config.acceptance != "exact":
        raise ConfigError(
            f"the {config.acceptance} rule verifies chains only, not a tree",
            "acceptance_mode",
            rule=config.acceptance,
        )
    if config.verification != "token":
        raise ConfigError(
            "block verification verifies a chain; a tree keeps token-wise (SpecInfer) verification",
            "block_tree",
            rule=config.verification,
        )
    check_gamma_settings(config, drafter, tree=True)  # gamma_schedule_tree, confidence_ngram
    code = tree_refusal(drafter, config.draft_method, config.temperature)
    if code is not None:
        name = drafter if isinstance(drafter, str) else getattr(drafter, "name", "model")
        raise tree_refused(code, name)


def resolve_drafter(pair: ModelPair, drafter: Drafter | str | None) -> Drafter:
    """A drafter object: the pair's draft model by default, or one made by name
    (:func:`specdec_core.drafters.registry.make_named_drafter`, e.g. ``"model"``, ``"eagle"``)."""
    if drafter is None:
        return make_model_drafter(pair)
    if isinstance(drafter, str):
        return make_named_drafter(pair, drafter)
    return drafter


def round_shape(
    shape: Sequence[int], generated: int, config: SessionConfig, committed: int, context_length: int
) -> tuple[int, ...]:
    """The shape for this round: ``shape`` cut to the depth a round may reach before
    ``max_new_tokens`` or the context end (:func:`specdec_core.engine.rounds.gamma_for_round`)."""
    depth = gamma_for_round(len(shape), generated, config.max_new_tokens, committed, context_length)
    return tuple(shape[:depth])


@dataclass(frozen=True)
class TreeRun:
    """A tree-speculative generation: ``output_ids`` (prompt excluded), ``stop_reason``,
    one :class:`TreeRoundRecord` per round, the forwards run and the wall time (ms).
    ``processor_timing``: what the history-dependent processors cost over the run
    (:attr:`specdec_core.core.processors.Processors.timing`: ``penalty_ms``,
    ``grammar_ms`` (matcher sync + mask) and ``rows`` processed; empty when none was
    active)."""

    output_ids: list[int]
    text: str
    stop_reason: str
    records: tuple[TreeRoundRecord, ...]
    target_forwards: int
    draft_forwards: int
    total_ms: float = 0.0
    processor_timing: dict[str, float] = field(default_factory=dict)

    @property
    def processor_ms_per_round(self) -> float:
        """Penalty + grammar milliseconds per round (0.0 without a processor)."""
        spent = self.processor_timing.get("penalty_ms", 0.0)
        spent += self.processor_timing.get("grammar_ms", 0.0)
        return spent / len(self.records) if self.records else 0.0

    @property
    def stats(self) -> TreeStats:
        return summarize_tree(self.records)

    @property
    def nodes_per_round(self) -> tuple[int, ...]:
        return tuple(r.nodes for r in self.records)

    @property
    def accepted_per_round(self) -> tuple[int, ...]:
        return tuple(r.accepted for r in self.records)

    @property
    def committed_per_round(self) -> tuple[int, ...]:
        return tuple(len(r.appended) for r in self.records)

    @property
    def tokens_per_target_forward(self) -> float:
        return len(self.output_ids) / self.target_forwards if self.target_forwards else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / len(self.output_ids) if self.output_ids else 0.0


def generate_tree(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig,
    shape: Sequence[int],
    budget: int = 12,
    drafter: Drafter | str | None = None,
) -> TreeRun:
    """Tree-speculative decoding: draft a tree with ``drafter`` (default the pair's draft
    model; a name goes through
    :func:`specdec_core.drafters.registry.make_named_drafter`), verify it in one target
    forward, commit the accepted path + one target token, compact the target's cache and
    roll both back to the committed history. The history-dependent processors of
    ``config`` (penalties, a grammar) process each node's draft and target rows for that
    node's own path (``engine/tree/round.py``) and follow the committed ids; with none
    active the run is exactly the unprocessed one.

    Raises:
        PromptError, ConfigError: bad prompt or settings (a greedy *draft method* at
        temperature > 0 is refused; a grammar with prompt lookup, ``grammar_ngram``; a
        drafter without a distribution, ``tree_no_ngram``; a bad penalty or grammar,
        :func:`specdec_core.core.processors.make_processors`), in the order
        :class:`~specdec_core.engine.tree.session.TreeSession` checks them.
    """
    config = config.validate(pair.vocab_size)
    check_tree_settings(config)  # the step machine's order: the draft method,
    check_grammar_drafter(drafter, config.grammar)  # a grammar with prompt lookup,
    check_tree_settings(config, drafter)  # then a drafter that cannot draft a tree
    shape = parse_shape(",".join(str(k) for k in shape))
    budget = check_budget(budget)
    sampling = config.sampling
    ids = prompt_ids(pair, prompt)
    prompt_len = len(ids)
    made = make_processors(
        pair.tokenizer, pair.vocab_size, config.penalties, config.grammar, prompt_len, ids
    )
    processors = made if made.active else None  # none active: the lean path
    target = ModelCache(pair.target)
    drafter = resolve_drafter(pair, drafter)
    drafter.attach(target)
    records: list[TreeRoundRecord] = []
    reason = None
    ctx = TreeContext(target, drafter, processors, stop_rule(pair, config), prompt_len)
    started = time.perf_counter()
    while reason is None:
        now = round_shape(shape, len(ids) - prompt_len, config, len(ids), pair.context_length)
        before = target.forwards
        r = len(records)  # this round's two streams, as in engine/tree/session.py
        draws = round_stream(config.seed, r, "draft")
        tree, forwards = draft_tree(drafter, ids, now, sampling, draws, budget, processors)
        logits, _ = tree_forward(target, ids, tree)
        draws = round_stream(config.seed, r, "verify")
        verdict = walk(tree, logits, sampling, draws, processors, ids)
        ran = target.forwards - before
        record, reason = decide_round(ctx, tree, verdict, ids, now, forwards, ran)
        ids, _ = apply_round(ctx, ids, record)
        records.append(record)
    sync(target.device)
    total_ms = (time.perf_counter() - started) * 1e3
    output = ids[prompt_len:]
    return TreeRun(
        output,
        pair.tokenizer.decode(output),
        reason,
        tuple(records),
        target.forwards,
        sum(r.draft_forwards for r in records),
        total_ms,
        dict(processors.timing) if processors is not None else {},
    )
