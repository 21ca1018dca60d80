"""A grammar the generated text must match (a regex or a JSON schema), compiled with
xgrammar (the library vLLM and SGLang use) and kept as state like a KV cache.

The matcher follows a list of generated ids (:meth:`GrammarState.sync_to`: roll back to the
common prefix, accept the rest), so a round advances it through the drafts and a rejection
rolls it back to the committed text with the caches. Tokens the grammar does not allow
after the generated text get ``−inf`` (:class:`specdec_core.core.processors.Processors`).
Errors carry codes (``core/errors.py``) the UI translates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar_compile import compile_bounded

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
    per-process caps, and a child process killed after
    :data:`~specdec_core.core.grammar_compile.GRAMMAR_COMPILE_S` s).

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
