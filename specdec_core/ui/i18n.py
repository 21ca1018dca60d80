"""zh/en UI strings. Every visible label comes from ``assets/strings/*.json``
(``{key: {"en": ..., "zh": ...}}``; one file per page plus ``common.json``)."""

from __future__ import annotations

import json
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


def lang() -> str:
    return st.session_state.get("lang", "en")


def tr(key: str, language: str) -> str:
    """The string ``key`` in a given language (for labels that must read the same in both)."""
    return strings()[key].get(language) or strings()[key]["en"]


def t(key: str, **fmt: object) -> str:
    """The string ``key`` in the current language, formatted with ``fmt``."""
    entry = strings()[key]
    text = entry.get(lang()) or entry["en"]
    return text.format(**fmt) if fmt else text
