"""zh/en UI strings. Every visible label comes from ``assets/strings/*.json``
(``{key: {"en": ..., "zh": ...}}``; one file per page plus ``common.json``)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import streamlit as st

STRINGS_DIR = Path(__file__).resolve().parents[2] / "assets" / "strings"
LANGUAGES = {"en": "English", "zh": "中文"}


@cache
def strings() -> dict[str, dict[str, str]]:
    """All strings, merged from every JSON file (a key defined twice is an error)."""
    merged: dict[str, dict[str, str]] = {}
    for path in sorted(STRINGS_DIR.glob("*.json")):
        for key, value in json.loads(path.read_text(encoding="utf-8")).items():
            if key in merged:
                raise KeyError(f"UI string {key!r} defined twice ({path.name})")
            merged[key] = value
    return merged


_FORCED = threading.local()  # a language forced for this thread (:func:`in_language`)


def lang() -> str:
    return getattr(_FORCED, "lang", None) or st.session_state.get("lang", "en")


@contextmanager
def in_language(code: str) -> Iterator[None]:
    """Every :func:`t` of this thread in ``code`` for the block (a teacher's screen draws
    a live class's frame once per language for the followers)."""
    before = getattr(_FORCED, "lang", None)
    _FORCED.lang = code
    try:
        yield
    finally:
        _FORCED.lang = before


def tr(key: str, language: str) -> str:
    """The string ``key`` in a given language (for labels that must read the same in both)."""
    return strings()[key].get(language) or strings()[key]["en"]


#: ``{n|student|students}``: the singular when the field ``n`` is 1, else the plural (an
#: English string's count; Chinese has no plural and writes the noun once).
_PLURAL = re.compile(r"\{(\w+)\|([^|{}]*)\|([^|{}]*)\}")


def plural(text: str, fmt: dict[str, object]) -> str:
    """``text`` with each ``{field|one|many}`` resolved by ``fmt[field]`` (1 → ``one``)."""
    return _PLURAL.sub(lambda m: m[2] if fmt.get(m[1]) == 1 else m[3], text)


def t(key: str, **fmt: object) -> str:
    """The string ``key`` in the current language, formatted with ``fmt`` (plural forms
    ``{n|one|many}`` chosen first, :func:`plural`)."""
    entry = strings()[key]
    text = entry.get(lang()) or entry["en"]
    return plural(text, fmt).format(**fmt) if fmt else text


LANG_KEYED = "lang_keyed"  # keys of the pages' option widgets with per-language labels


def follows_language(key: str) -> str:
    """Register ``key``, an option widget whose labels are in the screen's language, so a
    language switch puts its choice back by key (the sidebar's language radio does; the
    browser still holds the old labels); returns ``key``."""
    st.session_state.setdefault(LANG_KEYED, set()).add(key)
    return key
