"""The frozen pieces every trace is made of: tokens, probability slices, the KV-state
table (their JSON round-trip is ``core/trace_json.py``; each shape's step traces sit
beside its round: ``engine/chain/trace.py``, ``engine/tree/views.py``).

Traces hold numpy arrays and plain values only (no tensors, no full-vocabulary rows), so
they pickle into ``st.session_state`` and serialise to JSON. Probability slices keep the
top tokens of ``p`` and ``q`` plus the drafted/correction token, and an "other" bucket with
the rest of the mass, computed from the full rows.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specdec_core.core.checkpoints import StateView
from specdec_core.core.processors import ProcessorView


@dataclass(frozen=True)
class TokenInfo:
    """A token: ``id``, decoded ``text`` and BPE ``piece`` (``Ġ`` marks a leading space).

    A byte-level BPE token may hold only part of a multi-byte UTF-8 character (春 is three
    tokens ``E6 | 98 | A5`` in the embedded vocabulary): its ``text`` is then "�" and
    :attr:`raw` gives its bytes (from ``piece``; display only, not a JSON field)."""

    id: int
    text: str
    piece: str

    @property
    def raw(self) -> bytes | None:
        """The token's bytes (byte-level BPE: each character of ``piece`` is one byte,
        GPT-2's ``bytes_to_unicode``), or ``None`` when ``piece`` is not byte-level."""
        return piece_bytes(self.piece)

    @property
    def partial(self) -> bool:
        """Whether the token's bytes are not all whole UTF-8 characters (decoding it
        alone gives "�")."""
        raw = self.raw if "\ufffd" in self.text else None
        return raw is not None and not _decodes(raw)


_FALLBACK = re.compile(r"<0x([0-9A-F]{2})>")


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: printable stand-in character → byte."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


def piece_bytes(piece: str) -> bytes | None:
    """The bytes of a byte-level BPE ``piece`` (``"æĺ"`` → ``b"\\xe6\\x98"``) or of a
    byte-fallback piece (``"<0xE6>"`` → ``b"\\xe6"``: the Chinese pair's tokenizer, a
    character outside its vocabulary), ``None`` when a character of ``piece`` is not one
    of the 256 byte stand-ins."""
    fallback = _FALLBACK.fullmatch(piece)
    if fallback:
        return bytes([int(fallback[1], 16)])
    table = _byte_decoder()
    if not piece or any(c not in table for c in piece):
        return None
    return bytes(table[c] for c in piece)


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def byte_segments(raw: bytes) -> list[tuple[str, bool]]:
    """``raw`` split into ``(text, is_bytes)`` runs: whole UTF-8 characters as text, the
    bytes of an incomplete character as upper-case hex (``"E6 98"``)."""
    out: list[tuple[str, bool]] = []
    for ch in raw.decode("utf-8", errors="surrogateescape"):
        is_byte = 0xDC80 <= ord(ch) <= 0xDCFF
        piece = f"{ord(ch) - 0xDC00:02X}" if is_byte else ch
        if out and out[-1][1] == is_byte:
            out[-1] = (out[-1][0] + (" " if is_byte else "") + piece, is_byte)
        else:
            out.append((piece, is_byte))
    return out


def byte_groups(tokens: Sequence[TokenInfo], max_len: int = 6) -> dict[int, tuple[int, str]]:
    """Runs of consecutive byte tokens that together complete UTF-8 characters: ``start →
    (end, text)`` (``tokens[start:end]`` joined decode to ``text``; each run starts at a
    :attr:`TokenInfo.partial` token and is the shortest that decodes, at most ``max_len``
    tokens). A partial token no run completes (a character cut by the end of the list)
    is in no group."""
    groups: dict[int, tuple[int, str]] = {}
    i = 0
    while i < len(tokens):
        if not tokens[i].partial:
            i += 1
            continue
        raw = b""
        for j in range(i, min(len(tokens), i + max_len)):
            part = tokens[j].raw if "\ufffd" in tokens[j].text else tokens[j].text.encode()
            if part is None:
                break
            raw += part
            if j > i and _decodes(raw):
                groups[i] = (j + 1, raw.decode("utf-8"))
                break
        i = groups[i][0] if i in groups else i + 1
    return groups


def token_lookup(tokenizer: Any) -> Callable[[int], TokenInfo]:
    """A memoised id → :class:`TokenInfo` (decoded text and BPE piece) for ``tokenizer``."""
    cache: dict[int, TokenInfo] = {}

    def info(token_id: int) -> TokenInfo:
        if token_id not in cache:
            piece = tokenizer.convert_ids_to_tokens(token_id)
            cache[token_id] = TokenInfo(token_id, tokenizer.decode([token_id]), piece)
        return cache[token_id]

    return info


@dataclass(frozen=True)
class DistSlice:
    """Part of a position's distributions: the shown tokens plus an "other" bucket.

    Arrays are ``[K]`` float32 aligned with ``token_ids`` (``[K]`` int64). ``min_pq`` is
    ``min(p, q)`` and ``excess`` is ``[p − q]+``; the ``*_other`` floats are the same sums
    over all tokens not shown (exact, from the full rows). ``q``-derived fields are
    ``None`` for the bonus position γ+1, which has no draft.
    """

    token_ids: np.ndarray
    tokens: tuple[TokenInfo, ...]
    p: np.ndarray | None
    q: np.ndarray | None
    min_pq: np.ndarray | None
    excess: np.ndarray | None
    p_other: float
    q_other: float
    min_other: float
    excess_other: float


@dataclass(frozen=True)
class KVRow:
    """One row of the KV-state table (``position`` is 0-based, prompt included)."""

    position: int
    token_id: int
    piece: str
    text: str
    committed: bool
    target_kv: bool
    draft_kv: bool
    # prompt | committed | committed-no-KV-yet | tentative | accepted | rejected | discarded | cut
    state: str


@dataclass(frozen=True)
class KVState:
    """Counters (all in tokens, prompt included) and the table; ``processors``: the state
    beyond the KV cache at the same moment (grammar matcher, penalty counts; ``None`` when
    the session has no history-dependent processor, ``core/processors.py``);
    ``draft_state``: a recurrent drafter's checkpoints (``core/checkpoints.py``; ``None``
    for a drafter whose only state is a KV cache)."""

    committed_len: int
    target_kv_len: int
    draft_kv_len: int
    rows: tuple[KVRow, ...]
    processors: ProcessorView | None = None
    draft_state: StateView | None = None
