"""Token-strip styles: discarded and cut tokens stay readable from the back of a room
(WCAG AA: text/background contrast ≥ 4.5:1) while still looking discarded."""

from __future__ import annotations

import re

import pytest

from specdec_core.ui.render import STYLES


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("state", list(STYLES))
def test_every_token_state_meets_wcag_aa(state):
    style = STYLES[state]
    text = re.search(r"(?<![-\w])color:(#[0-9a-f]{6})", style).group(1)
    background = re.search(r"background:([^;]*)", style).group(1)
    backgrounds = re.findall(r"#[0-9a-f]{6}", background)  # a hatch has two colours
    assert backgrounds
    assert min(contrast(text, bg) for bg in backgrounds) >= 4.5, state


@pytest.mark.parametrize(
    ("state", "border", "hatched"), [("discarded", "dashed", True), ("cut", "dotted", False)]
)
def test_discarded_still_looks_discarded(state, border, hatched):
    """Struck through, with its own border line (discarded: dashed, cut: dotted) so the two
    are told apart without colour; only a discarded token has the hatched background."""
    style = STYLES[state]
    assert re.search(r"text-decoration:line-through[ ;]", style), style
    assert re.findall(r"border:1px (\w+) #[0-9a-f]{6};", style) == [border], style
    assert ("repeating-linear-gradient" in style) is hatched
