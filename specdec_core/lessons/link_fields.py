"""One field of a lesson link checked: every value from a URL or a trace file is bounded
and typed before it reaches a :class:`~specdec_core.lessons.link.LessonState`
(:func:`check_field` returns the value or :data:`BAD`, never raises).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specdec_core.core.grammar import MAX_GRAMMAR_CHARS
from specdec_core.core.inputs import is_valid_text
from specdec_core.core.penalties import (
    FREQUENCY_PENALTY_RANGE,
    MAX_NGRAM_SIZE,
    PRESENCE_PENALTY_RANGE,
    REPETITION_PENALTY_RANGE,
)
from specdec_core.core.settings import GAMMA_SCHEDULES, VERIFICATIONS
from specdec_core.drafters.registry import DRAFTER_NAMES

MAX_LINK_PROMPT_CHARS = 1_000  # longer prompts are refused for links (URL ≤ ~2,000 chars)
MAX_EDITS = 64
MAX_ROUNDS = 200
MAX_CONT = 1_024
UI_MAX_GAMMA = 8
PAGES = ("step_through", "acceptance_lab", "speed", "drafters", "lessons", "lossless")
PHASES = ("propose", "verify", "commit")
LANGS = ("en", "zh")


BAD = object()  # the marker check_field returns for a value it refuses


def _int(value: object, low: int, high: int) -> object:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return BAD
    return value


def _float(value: object, low: float, high: float) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return BAD
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else BAD


def check_field(name: str, value: object, offered_pairs: Sequence[str]) -> object:
    """The validated value of one field, or ``BAD``."""
    choices = {
        "page": PAGES,
        "pair": tuple(offered_pairs),
        "draft_method": ("probabilistic", "greedy"),
        "drafter": DRAFTER_NAMES,
        "phase": PHASES,
        "gamma_schedule": GAMMA_SCHEDULES,
        "verification": VERIFICATIONS,
    }
    if name in choices:
        return value if isinstance(value, str) and value in choices[name] else BAD
    if name in ("gamma", "top_k", "seed", "max_new_tokens", "round"):
        high = {
            "gamma": UI_MAX_GAMMA,
            "top_k": 1 << 20,
            "seed": 2**31 - 1,
            "max_new_tokens": 1 << 16,
            "round": MAX_ROUNDS,
        }[name]
        return _int(value, 1 if name in ("gamma", "max_new_tokens") else 0, high)
    if name == "temperature":
        return _float(value, 0.0, 2.0)
    if name == "confidence":  # the open interval (0, 1), as SessionConfig.validate
        checked = _float(value, 0.0, 1.0)
        return BAD if checked in (BAD, 0.0, 1.0) else checked
    penalty_ranges = {
        "repetition_penalty": REPETITION_PENALTY_RANGE,
        "frequency_penalty": FREQUENCY_PENALTY_RANGE,
        "presence_penalty": PRESENCE_PENALTY_RANGE,
    }
    if name in penalty_ranges:
        return _float(value, *penalty_ranges[name])
    if name == "no_repeat_ngram_size":
        return _int(value, 0, MAX_NGRAM_SIZE)
    if name == "grammar":  # [kind, source]: a regex or a JSON schema, bounded text; [] none
        if value == []:
            return ()
        ok = isinstance(value, list) and len(value) == 2 and value[0] in ("regex", "json_schema")
        ok = ok and is_valid_text(value[1]) and len(value[1]) <= MAX_GRAMMAR_CHARS
        ok = ok and bool(value[1].strip())
        return (value[0], value[1]) if ok else BAD
    if name == "top_p":
        return _float(value, 0.05, 1.0)
    if name == "presenter":
        return value if isinstance(value, bool) else BAD
    if name == "prompt":
        ok = is_valid_text(value) and len(value) <= MAX_LINK_PROMPT_CHARS  # type: ignore[arg-type]
        return value if ok else BAD
    if name == "tree":  # 1..8 depths of 1..4 children (tree.parse_shape), or [] (a chain)
        ok = isinstance(value, list) and len(value) <= 8
        ok = ok and all(_int(v, 1, 4) is not BAD for v in value)
        return tuple(value) if ok else BAD
    if name == "cont":
        ok = isinstance(value, list) and len(value) <= MAX_CONT
        ok = ok and all(_int(v, 0, 1 << 24) is not BAD for v in value)
        return tuple(value) if ok else BAD
    if name == "edits":
        if not isinstance(value, list) or len(value) > MAX_EDITS:
            return BAD
        edits = []
        for item in value:
            ok = isinstance(item, list) and len(item) == 3
            if not ok or any(_int(v, 0, 1 << 24) is BAD for v in item):
                return BAD
            edits.append((item[0], item[1], item[2]))
        return tuple(edits)
    return BAD
