"""History-dependent logits processors under speculation: penalties and a grammar.

``p_i`` and ``q_i`` are the distributions actually sampled from, so every processor runs on
**the candidate prefix of its own row**: row ``i`` of a round (draft ``q_i`` or target
``p_i``) sees the committed ids followed by ``y_1..y_{i−1}``, never only the committed ids
(Leviathan et al. 2023, §2.3; the "broadcast" shortcut, one penalty vector from the
committed prefix at every position, changes the output distribution: see the rule lab).
Order per row, as transformers' ``generate`` applies them: repetition penalty, no-repeat
n-gram, frequency / presence penalties, grammar mask, then
:func:`specdec_core.core.sampling.logits_to_probs` (temperature → top-k → top-p).

* Repetition penalty (Keskar et al. 2019, CTRL §4.1; transformers
  ``RepetitionPenaltyLogitsProcessor``): for every token id in the prefix (prompt
  included), a logit ``s`` becomes ``s / θ`` if ``s > 0`` else ``s · θ``. ``θ = 1`` is off.
* Frequency and presence penalties (OpenAI API; vLLM ``apply_penalties``): over the
  *generated* tokens only (after ``prompt_len``), ``s[t] −= f · count[t] + r · [count[t] > 0]``.
* No-repeat n-gram (transformers ``NoRepeatNGramLogitsProcessor``): a token that would
  complete an n-gram already in the prefix (prompt included) gets ``−inf``.
* Grammar (xgrammar ``GrammarMatcher``, the library vLLM and SGLang use): tokens the
  grammar does not allow after the *generated* text get ``−inf``. The matcher is state: it
  is kept like a KV cache, synced to a list of generated ids (:meth:`GrammarState.sync_to`:
  roll back to the common prefix, accept the rest), so a round advances it through the
  drafts and a rejection rolls it back to the committed text with the caches.

Errors carry codes (``core/errors.py``) the UI translates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar_compile import GRAMMAR_COMPILE_S as GRAMMAR_COMPILE_S
from specdec_core.core.grammar_compile import compile_bounded

#: Bounds of the penalty settings (CLI, sidebar, links).
REPETITION_PENALTY_RANGE = (0.1, 10.0)
FREQUENCY_PENALTY_RANGE = (-2.0, 2.0)  # OpenAI's documented range
PRESENCE_PENALTY_RANGE = (-2.0, 2.0)
MAX_NGRAM_SIZE = 10
#: Longest grammar source (regex or JSON schema text), in characters.
MAX_GRAMMAR_CHARS = 2000

GrammarKind = Literal["regex", "json_schema"]

#: Grammars that make sense for the embedded pair (Shakespeare-style text): name → spec.
GRAMMAR_PRESETS: dict[str, tuple[GrammarKind, str]] = {
    "speaker_line": ("regex", r"(ROMEO|JULIET|NURSE): [A-Za-z ,.;'!?]{1,80}\n"),
    "short_answer": ("regex", r" (yes|no|perhaps)[.!]"),
    "json_person": (
        "json_schema",
        '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, '
        '"age": {"type": "integer", "minimum": 0, "maximum": 120}}, '
        '"required": ["name", "age"], '
        '"additionalProperties": false}',
    ),
}


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar the generated text must match: a regular expression or a JSON schema
    (text, at most :data:`MAX_GRAMMAR_CHARS` characters)."""

    kind: GrammarKind
    source: str

    def validate(self) -> GrammarSpec:
        """Raises ConfigError (code ``grammar_bad``): unknown kind, empty or too long."""
        if self.kind not in ("regex", "json_schema"):
            raise ConfigError(f"grammar kind must be regex or json_schema, got {self.kind!r}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ConfigError("the grammar is empty", "grammar_bad", reason="empty")
        if len(self.source) > MAX_GRAMMAR_CHARS:
            raise ConfigError(
                f"the grammar has {len(self.source)} characters; at most "
                f"{MAX_GRAMMAR_CHARS} are accepted",
                "grammar_too_long",
                chars=len(self.source),
                limit=MAX_GRAMMAR_CHARS,
            )
        return self


@dataclass(frozen=True)
class PenaltyConfig:
    """The history-dependent penalties (all off by default)."""

    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0

    @property
    def active(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.no_repeat_ngram_size > 0
        )

    def validate(self) -> PenaltyConfig:
        """Raises ConfigError (code ``bad_penalty``, params ``what``, ``low``, ``high``,
        ``value``): a value out of range or not a number."""
        for what, value, (low, high) in (
            ("repetition penalty", self.repetition_penalty, REPETITION_PENALTY_RANGE),
            ("frequency penalty", self.frequency_penalty, FREQUENCY_PENALTY_RANGE),
            ("presence penalty", self.presence_penalty, PRESENCE_PENALTY_RANGE),
        ):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or math.isnan(value) or not low <= value <= high:
                raise ConfigError(
                    f"{what} must be between {low:g} and {high:g}, got {value!r}",
                    "bad_penalty",
                    what=what,
                    low=low,
                    high=high,
                    value=str(value)[:20],
                )
        n = self.no_repeat_ngram_size
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NGRAM_SIZE:
            raise ConfigError(
                f"no-repeat n-gram size must be a whole number from 1 to {MAX_NGRAM_SIZE} "
                f"(0 = off), got {n!r}",
                "bad_penalty",
                what="no-repeat n-gram size",
                low=0,
                high=MAX_NGRAM_SIZE,
                value=str(n)[:20],
            )
        return self


def banned_ngram_tokens(prefix: Sequence[int], n: int) -> list[int]:
    """Tokens that would complete an ``n``-gram already in ``prefix`` (transformers
    ``NoRepeatNGramLogitsProcessor``): every ``t`` such that ``prefix[-(n−1):] + [t]``
    occurs in ``prefix``. ``n = 1`` bans every token seen. Empty if ``len(prefix) < n``."""
    if n <= 0 or len(prefix) + 1 < n or len(prefix) < n:
        return []
    if n == 1:
        return sorted(set(prefix))
    tail = tuple(prefix[len(prefix) - n + 1 :])
    return sorted(
        {
            prefix[i + n - 1]
            for i in range(len(prefix) - n + 1)
            if tuple(prefix[i : i + n - 1]) == tail
        }
    )


def apply_penalties(
    logits: torch.Tensor, prefix: Sequence[int], prompt_len: int, config: PenaltyConfig
) -> torch.Tensor:
    """One row of logits after the penalties, for the candidate prefix ``prefix``.

    Args:
        logits: ``[V]`` any float dtype (a new tensor is returned; the input is not
            changed). prefix: prompt + generated + tentative ids before this position.
        prompt_len: ids of ``prefix`` that are the prompt (frequency / presence count the
            rest only).

    Returns:
        ``[V]`` float32 (module docstring: the formulas and their sources).
    """
    out = logits.float().clone()
    vocab = out.shape[-1]
    if config.repetition_penalty != 1.0 and len(prefix):
        seen = torch.tensor(sorted(set(prefix)), dtype=torch.long, device=out.device)
        s = out[seen]
        theta = config.repetition_penalty
        out[seen] = torch.where(s > 0, s / theta, s * theta)
    if config.no_repeat_ngram_size > 0:
        banned = banned_ngram_tokens(prefix, config.no_repeat_ngram_size)
        if banned:
            out[torch.tensor(banned, dtype=torch.long, device=out.device)] = float("-inf")
    if (config.frequency_penalty or config.presence_penalty) and len(prefix) > prompt_len:
        generated = torch.tensor(list(prefix[prompt_len:]), dtype=torch.long)
        counts = torch.bincount(generated, minlength=vocab)[:vocab].to(out.device).float()
        out -= config.frequency_penalty * counts + config.presence_penalty * (counts > 0).float()
    return out


def penalty_counts(prefix: Sequence[int], prompt_len: int) -> dict[int, tuple[int, int]]:
    """What the penalties see for ``prefix``: ``token id → (count in the whole prefix,
    count in the generated part)``, for every id that occurs."""
    out: dict[int, tuple[int, int]] = {}
    for i, t in enumerate(prefix):
        whole, gen = out.get(t, (0, 0))
        out[t] = (whole + 1, gen + (1 if i >= prompt_len else 0))
    return out


# ---------------------------------------------------------------- grammar
#: JSON-schema keywords xgrammar 0.2.9 compiles but does not enforce (checked one by one:
#: ``{"not": {}}`` let ``-3`` through, ``allOf`` ignored a ``minimum``, ``oneOf`` does not
#: exclude a value matching two branches, ``if``/``then`` ignored): refused, so no
#: constrained output can break the schema it was given.
UNSUPPORTED_SCHEMA_KEYWORDS = frozenset(
    {
        "not",
        "allOf",
        "oneOf",
        "if",
        "then",
        "else",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
    }
)
#: Keywords whose value maps names (not keywords) to subschemas.
_NAMED_SUBSCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
#: Keywords whose value is data, never a schema.
_DATA_KEYWORDS = frozenset(
    {"enum", "const", "default", "examples", "required", "dependentRequired"}
)


def unsupported_schema_keyword(schema: object) -> str | None:
    """The first keyword of :data:`UNSUPPORTED_SCHEMA_KEYWORDS` used anywhere in a JSON
    schema (a parsed object), or a ``$ref`` outside the document (``"$ref": "http…"``);
    ``None`` when there is none. Property names are names, not keywords (a property called
    ``"not"`` is fine); ``enum`` / ``const`` values are data."""
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in UNSUPPORTED_SCHEMA_KEYWORDS:
                return key
            if key == "$ref" and not (isinstance(value, str) and value.startswith("#")):
                return "$ref"
            if key in _DATA_KEYWORDS:
                continue
            if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
                stack.extend(value.values())
            else:
                stack.append(value)
    return None


def compile_grammar(tokenizer: object, vocab_size: int, spec: GrammarSpec) -> object:
    """Compile ``spec`` for a tokenizer within the limits of
    :mod:`specdec_core.core.grammar_compile` (a cost bound, a cache, per-client and
    per-process caps, and a child process killed after :data:`GRAMMAR_COMPILE_S` s).

    Returns:
        an ``xgrammar.CompiledGrammar``.

    Raises:
        ConfigError: code ``grammar_bad`` (the regex or schema does not parse; param
        ``reason`` = the library's first line), ``grammar_unsupported`` (a schema keyword
        the library would ignore, :func:`unsupported_schema_keyword`; param ``keyword``),
        ``grammar_slow`` (compiling took longer than the bound), ``grammar_too_long``,
        and ``grammar_costly`` / ``grammar_busy`` / ``grammar_rate`` / ``grammar_child``
        (:func:`~specdec_core.core.grammar_compile.compile_bounded`).
    """
    spec.validate()
    if spec.kind == "json_schema":
        import json

        try:
            schema = json.loads(spec.source)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(
                f"the JSON schema is not JSON: {exc}", "grammar_bad", reason=str(exc)[:120]
            ) from exc
        keyword = unsupported_schema_keyword(schema)
        if keyword is not None:
            raise ConfigError(
                f"the JSON schema uses {keyword!r}, which the grammar engine does not enforce "
                "(its output could break the schema)",
                "grammar_unsupported",
                keyword=keyword[:40],
            )
    return compile_bounded(tokenizer, vocab_size, spec.kind, spec.source)


@dataclass(frozen=True)
class GrammarView:
    """The matcher's state for the state table: generated tokens it has accepted, whether it
    accepted a stop token (``terminated``), whether the text so far is a complete match
    (``completed``), and how many tokens it allows at the next position (0 when
    terminated)."""

    accepted_tokens: int
    terminated: bool
    completed: bool
    allowed_next: int


#: Bit ``j`` of a 32-bit word as an int32 (bit 31 is the sign bit): unpacking a bitmask
#: with one ``&`` is ≈ 18× faster than shifting int64 words (0.05 vs 0.9 ms a row, V = 4096).
_BITS = torch.tensor([1 << j for j in range(31)] + [-(1 << 31)], dtype=torch.int32)


class GrammarState:
    """One ``xgrammar.GrammarMatcher`` kept in step with a list of generated ids, like a KV
    cache (``ids``: the generated ids it has accepted).

    Raises:
        ConfigError: from the constructor, code ``grammar_empty`` when the grammar allows no
        token but a stop token at the first position.
    """

    def __init__(self, compiled: object, vocab_size: int) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        self.vocab_size = vocab_size
        self.matcher = xgr.GrammarMatcher(compiled)
        self.stop_token_ids = list(self.matcher.stop_token_ids)
        self.ids: list[int] = []
        self._bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        first = self.allowed()
        if int(first.sum()) - int(first[self.stop_token_ids].sum()) == 0:
            raise ConfigError("the grammar allows no token at all", "grammar_empty")

    def sync_to(self, ids: Sequence[int]) -> int:
        """Roll back to the longest common prefix of :attr:`ids` and ``ids``, then accept
        the rest one by one, stopping at the first token the grammar refuses. Returns how
        many of ``ids`` are now accepted (``len(ids)`` unless one was refused)."""
        ids = list(ids)
        common = 0
        for a, b in zip(self.ids, ids, strict=False):
            if a != b:
                break
            common += 1
        if len(self.ids) > common:
            self.matcher.rollback(len(self.ids) - common)
            del self.ids[common:]
        for token in ids[common:]:
            if self.matcher.is_terminated() or not self.matcher.accept_token(int(token)):
                break
            self.ids.append(int(token))
        return len(self.ids)

    def allowed(self) -> torch.Tensor:
        """``[V]`` bool: tokens allowed after :attr:`ids` (all ``False`` once terminated)."""
        if self.matcher.is_terminated():
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        self.matcher.fill_next_token_bitmask(self._bitmask)
        words = self._bitmask[0]  # [⌈V/32⌉] int32 words, bit j of word w = token 32·w + j
        return (words.unsqueeze(-1) & _BITS).ne(0).flatten()[: self.vocab_size]

    def view(self) -> GrammarView:
        terminated = bool(self.matcher.is_terminated())
        allowed = 0 if terminated else int(self.allowed().sum())
        return GrammarView(len(self.ids), terminated, bool(self.matcher.is_completed()), allowed)


@dataclass(frozen=True)
class PenaltyView:
    """What the penalties see at the prefix the state stands on: ``counts`` as
    ``(token id, count in the whole prefix, count in the generated part)``, most frequent
    first, at most ``limit`` of them; ``distinct`` ids in all."""

    counts: tuple[tuple[int, int, int], ...]
    distinct: int


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
