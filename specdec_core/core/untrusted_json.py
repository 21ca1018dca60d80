"""JSON from outside (a lesson link, an uploaded trace file), parsed with bounds: nesting
checked on the raw bytes before parsing, every string valid Unicode, every number finite."""

from __future__ import annotations

import json
import math
import re

import numpy as np

from specdec_core.core.inputs import is_valid_text

#: file needs 7). Checked on the raw text before parsing: ``json.loads`` recurses once per
#: level, so 30,000 nested ``[`` raise ``RecursionError``, which no caller expects.
MAX_JSON_DEPTH = 16
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _scan(raw: bytes) -> tuple[int, bool]:
    """The deepest nesting of ``[`` / ``{`` outside strings in JSON bytes, and whether a
    number may not fit a float (an exponent that is not negative, or a run of ≥ 300
    digits). Vectorised over the sparse positions of quotes, brackets and exponents:
    ≈ 30 ms for a 5 MB trace file on an idle core (a regex took ≈ 140 ms)."""
    b = np.frombuffer(raw, dtype=np.uint8)
    quotes = np.flatnonzero(b == ord('"'))
    escaped = quotes[(quotes > 0) & (b[quotes - 1] == ord("\\"))]
    if escaped.size:  # a quote is escaped when an odd number of backslashes runs before it
        idx = np.arange(len(b))
        last_other = np.maximum.accumulate(np.where(b != ord("\\"), idx, -1))
        odd = (escaped - 1 - last_other[escaped - 1]) % 2 == 1
        quotes = np.setdiff1d(quotes, escaped[odd], assume_unique=True)

    def outside(positions: np.ndarray) -> np.ndarray:  # an even number of quotes before
        return positions[np.searchsorted(quotes, positions) % 2 == 0]

    opening = outside(np.flatnonzero((b == ord("[")) | (b == ord("{"))))
    closing = outside(np.flatnonzero((b == ord("]")) | (b == ord("}"))))
    depth = 0
    if opening.size:
        order = np.argsort(np.concatenate([opening, closing]), kind="stable")
        steps = np.concatenate([np.ones(opening.size), -np.ones(closing.size)])[order]
        depth = int(np.cumsum(steps).max())
    e = outside(np.flatnonzero((b[:-1] == ord("e")) | (b[:-1] == ord("E"))))
    after = b[e + 1]  # "1e+300", "1e300": may overflow; "1e-05" cannot; "true," is no number
    big_exp = bool(np.any((after == ord("+")) | ((after >= ord("0")) & (after <= ord("9")))))
    digit = np.concatenate([[0], ((b >= ord("0")) & (b <= ord("9"))).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(digit))  # run starts and ends, alternating
    long_run = bool(edges.size) and int((edges[1::2] - edges[::2]).max()) >= 300
    return depth, big_exp or long_run


def _all_text_valid(value: object) -> bool:
    if isinstance(value, str):
        return is_valid_text(value)
    if isinstance(value, list):
        return all(_all_text_valid(v) for v in value)
    if isinstance(value, dict):
        return all(is_valid_text(k) and _all_text_valid(v) for k, v in value.items())
    return True


def load_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH, strict: bool = True) -> object:
    """``json.loads`` for JSON from outside (a link, an uploaded file): nesting bounded
    *before* parsing; with ``strict`` also every string valid Unicode (no lone surrogate
    from a ``\\ud800`` escape) and every number finite (``1e400`` would parse as
    ``inf``; ``NaN`` is refused). ``strict=False`` leaves both to a field-by-field check
    (a link drops the one bad field and keeps the rest).

    Raises:
        ValueError: (only) for bytes that are not such JSON: not UTF-8, nested deeper than
            ``max_depth``, not JSON, a lone surrogate, a non-finite number, an integer
            over Python's 4,300-digit limit.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8")  # raises UnicodeEncodeError (a ValueError) on surrogates
    text = raw.decode("utf-8")  # first: random bytes hold many "[" and would read as nested
    depth, odd_numbers = _scan(raw)
    if depth > max_depth:
        if text.lstrip()[:1] not in ("[", "{"):  # deep brackets in text that is no JSON
            raise ValueError("not JSON: the text does not start with [ or {")
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    hooks = {"parse_constant": _refuse_constant} if strict else {}
    if odd_numbers and strict:  # slow path (a call per float) only for text that may hold one
        hooks["parse_float"] = _finite_float
    try:
        data = json.loads(text, **hooks)
    except RecursionError as exc:  # cannot happen below max_depth; never escapes anyway
        raise ValueError("JSON nested too deeply") from exc
    if strict and _SURROGATE_ESCAPE.search(raw) and not _all_text_valid(data):
        raise ValueError("JSON text that is not valid Unicode (a lone surrogate)")
    return data


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
