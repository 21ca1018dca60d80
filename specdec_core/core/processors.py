"""History-dependent logits processors under speculation: penalties and a grammar.

``p_i`` and ``q_i`` are the distributions actually sampled from, so every processor runs on
**the candidate prefix of its own row**: row ``i`` of a round (draft ``q_i`` or target
``p_i``) sees the committed ids followed by ``y_1..y_{i−1}``, never only the committed ids
(Leviathan et al. 2023, §2.3; the "broadcast" shortcut, one penalty vector from the
committed prefix at every position, changes the output distribution: see the rule lab).
Order per row, as transformers' ``generate`` applies them: repetition penalty, no-repeat
n-gram, frequency / presence penalties, grammar mask, then
:func:`specdec_core.core.sampling.logits_to_probs` (temperature → top-k → top-p).

* Penalties (repetition, frequency / presence, no-repeat n-gram): the formulas and their
  sources are in :mod:`specdec_core.core.penalties`.
* Grammar (xgrammar ``GrammarMatcher``, :mod:`specdec_core.core.grammar`): tokens the
  grammar does not allow after the *generated* text get ``−inf``. The matcher is state kept
  like a KV cache, so a round advances it through the drafts and a rejection rolls it back
  to the committed text with the caches.

Errors carry codes (``core/errors.py``) the UI translates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GrammarSpec, GrammarState, GrammarView, compile_grammar
from specdec_core.core.penalties import PenaltyConfig, PenaltyView, apply_penalties, penalty_counts


@dataclass(frozen=True)
class ProcessorView:
    """The processors' state next to the KV rows: ``length`` ids it stands on, the
    grammar's view (``None`` without a grammar) and the penalties' (``None`` without one)."""

    length: int
    grammar: GrammarView | None
    penalty: PenaltyView | None


@dataclass
class Processors:
    """The history-dependent processors of a session, applied row by row on each row's own
    candidate prefix. A session with none active is a no-op (:attr:`active` is ``False``,
    the engine then keeps its lean greedy paths).

    Attributes:
        penalties: the penalty settings. grammar: the matcher (``None``: no grammar).
        prompt_len: ids of every prefix that are the prompt.
        ids: the full prefix (prompt + generated + tentative) the state stands on.
        timing: milliseconds spent processing rows so far (``penalty_ms``, ``grammar_ms``)
            and the number of ``rows`` (a counter for benchmarks; never reset).
    """

    penalties: PenaltyConfig
    grammar: GrammarState | None
    prompt_len: int
    ids: list[int] = field(default_factory=list)
    timing: dict[str, float] = field(
        default_factory=lambda: {"penalty_ms": 0.0, "grammar_ms": 0.0, "rows": 0.0}
    )

    @property
    def active(self) -> bool:
        return self.penalties.active or self.grammar is not None

    def sync_to(self, ids: Sequence[int]) -> None:
        """Stand on ``ids`` (prompt + generated + tentative): the grammar accepts / rolls
        back the generated part."""
        self.ids = list(ids)
        if self.grammar is not None:
            self.grammar.sync_to(self.ids[self.prompt_len :])

    def row(self, logits: torch.Tensor, prefix: Sequence[int]) -> torch.Tensor:
        """``[V]`` logits → ``[V]`` float32 processed logits for the position after
        ``prefix``; the state then stands on ``prefix``. A row whose prefix the grammar
        refuses (a drafted token outside the grammar) is masked as after the accepted part
        (its position is rejected anyway: the refused token has ``p = 0``). When the
        no-repeat n-gram ban leaves no token the grammar allows, the grammar wins: the row
        is recomputed without the ban (never a row with no finite logit). The time spent
        is added to :attr:`timing` (``penalty_ms``, ``grammar_ms``: matcher sync + mask,
        ``rows``)."""
        started = time.perf_counter()
        self.ids = list(prefix)
        out = apply_penalties(logits, prefix, self.prompt_len, self.penalties)
        penalised = time.perf_counter()
        self.timing["penalty_ms"] += (penalised - started) * 1e3
        self.timing["rows"] += 1
        if self.grammar is None:
            return out
        self.grammar.sync_to(self.ids[self.prompt_len :])
        allowed = self.grammar.allowed().to(out.device)
        if not bool(allowed.any()):  # terminated: never sampled (the stop rule ends it)
            allowed[self.grammar.stop_token_ids] = True
        masked = out.masked_fill(~allowed, float("-inf"))
        if self.penalties.no_repeat_ngram_size > 0 and not bool(torch.isfinite(masked).any()):
            relaxed = replace(self.penalties, no_repeat_ngram_size=0)
            masked = apply_penalties(logits, prefix, self.prompt_len, relaxed)
            masked = masked.masked_fill(~allowed, float("-inf"))
        self.timing["grammar_ms"] += (time.perf_counter() - penalised) * 1e3
        return masked

    def rows(
        self, logits: torch.Tensor, base: Sequence[int], tokens: Sequence[int]
    ) -> torch.Tensor:
        """``[n, V]`` logits → ``[n, V]`` float32, row ``j`` processed for the prefix
        ``base + tokens[:j]`` (``n ≤ len(tokens) + 1``); the state then stands on
        ``base + tokens[:n−1]`` (a verify forward: advanced through the drafts)."""
        if not self.active:
            return logits.float()
        base = list(base)
        out = [self.row(logits[j], base + list(tokens[:j])) for j in range(logits.shape[0])]
        return torch.stack(out)

    def view(self, limit: int = 8) -> ProcessorView:
        grammar = self.grammar.view() if self.grammar is not None else None
        penalty = None
        if self.penalties.active:
            counts = penalty_counts(self.ids, self.prompt_len)
            top = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
            penalty = PenaltyView(tuple((t, w, g) for t, (w, g) in top), len(counts))
        return ProcessorView(len(self.ids), grammar, penalty)


def make_processors(
    tokenizer: object,
    vocab_size: int,
    penalties: PenaltyConfig,
    grammar: GrammarSpec | None,
    prompt_len: int,
    ids: Sequence[int] = (),
) -> Processors:
    """The processors of a session standing on ``ids``.

    Raises:
        ConfigError: a bad penalty or grammar (:meth:`PenaltyConfig.validate`,
        :func:`compile_grammar`, :class:`GrammarState`), or code ``grammar_prompt`` when the
        ids already generated (``ids[prompt_len:]``, a continued lesson) break the grammar.
    """
    penalties.validate()
    state = None
    if grammar is not None:
        state = GrammarState(compile_grammar(tokenizer, vocab_size, grammar), vocab_size)
    processors = Processors(penalties, state, prompt_len)
    processors.sync_to(ids)
    if state is not None and len(state.ids) < len(ids) - prompt_len:
        raise ConfigError("the text already generated does not match the grammar", "grammar_prompt")
    return processors
