"""The text each pair reads: its default prompt, the prompts the scenario search tries and
the repetitive ones prompt lookup feeds on. Content, not UI text: a Chinese screen on the
English pair still types English, an English screen on the Chinese pair types a poem.

The English pair was trained on Tiny Shakespeare (speeches), ``embedded-zh`` on Tang
poems, one token per character (``data/poetry_zh.txt``): each gets prompts in its own
language. A preset not listed reads English.

Pure module: no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PairPrompts:
    """``default``: the step page's first prompt (``None``: the UI string's);
    ``scenarios``: tried in order by the scenario search; ``repetitive``: for prompt
    lookup; ``speed``: the speed page's prompt; ``drafters_repetitive`` /
    ``drafters_novel``: the drafters page's two preset prompts (``None``: the UI
    string's)."""

    default: str | None
    scenarios: tuple[str, ...]
    repetitive: tuple[str, ...]
    speed: str | None = None
    drafters_repetitive: str | None = None
    drafters_novel: str | None = None


ENGLISH = PairPrompts(
    default=None,
    scenarios=(
        "ROMEO:\nBut soft, what light through yonder window breaks?",
        "First Citizen:\nBefore we proceed any further, hear me speak.",
        "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?",
        "KING RICHARD III:\nNow is the winter of our discontent",
        "HAMLET:\nTo be, or not to be, that is the question:",
        "MENENIUS:\nI tell you, friends, most charitable care",
    ),
    repetitive=(
        "To be, or not to be. To be, or not to be. To be, or not to be. To be,",
        "ha ha ha ha ha ha ha ha ha ha ha ha",
        "ROMEO:\nGood night, good night! Good night, good night! Good night,",
    ),
)
CHINESE = PairPrompts(
    default="床前明月光，",
    scenarios=(
        "床前明月光，",
        "春眠不觉晓，",
        "白日依山尽，",
        "月落乌啼霜满天，",
        "红豆生南国，",
        "千山鸟飞绝，",
    ),
    repetitive=(
        "明月光，明月光，明月光，明月光，明月光，明月光，",
        "哈哈哈哈哈哈哈哈哈哈哈哈",
        "春风春雨春风春雨春风春雨春风春雨春风",
    ),
    speed="春眠不觉晓，处处闻啼鸟。",
    drafters_repetitive="床前明月光，疑是地上霜。\n床前明月光，疑是地上霜。\n床前明月光，",
    drafters_novel="春眠不觉晓，处处闻啼鸟。",
)
BY_PAIR = {"embedded-zh": CHINESE}


def prompts_for(pair_name: str) -> PairPrompts:
    """The prompts of the preset ``pair_name`` (English for a preset not listed)."""
    return BY_PAIR.get(pair_name, ENGLISH)
