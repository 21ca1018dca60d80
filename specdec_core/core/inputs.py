"""Student input: prompt text or ids checked and encoded, one-token edit text, whole
numbers from a form. Errors carry a ``code`` and ``params`` so the UI can say them in zh
or en."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specdec_core.core.errors import InputError, PromptError, TokenTextError
from specdec_core.core.models import ModelPair

#: multi-megabyte paste costs nothing (a 1024-token GPT-2 context is ≈ 4–5 k characters).
MAX_PROMPT_CHARS = 20_000


#: Longest one-token edit text or rule-lab token name, in characters; also how much of a bad
#: value an error message quotes.
SHORT_CHARS = 40


def is_valid_text(text: object) -> bool:
    """Whether ``text`` is a ``str`` of valid Unicode: encodable as UTF-8, i.e. no lone
    surrogate (``"\\ud800"`` decodes from JSON but breaks the tokenizer, protobuf and
    every later encode). Cheap: one C-level encode, ≈ 1 ms per MB."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def single_token_id(pair: ModelPair, text: str) -> int:
    """The id of ``text`` if it encodes to exactly one token (e.g. ``" night"``).

    Raises:
        TokenTextError: zero or several tokens (the message lists the pieces), or text that
            is not valid Unicode (code ``bad_text``).
    """
    if not is_valid_text(text):
        raise TokenTextError("the text is not valid Unicode (a lone surrogate)", "bad_text")
    ids = pair.tokenizer.encode(text, add_special_tokens=False) if text else []
    if len(ids) != 1:
        shown = [pair.tokenizer.decode([i]).replace(" ", "␣").replace("\n", "↵") for i in ids]
        pieces = " | ".join(shown[:12]) + (" | …" if len(shown) > 12 else "") or "∅"
        short = text if len(text) <= 40 else text[:40] + "…"
        raise TokenTextError(
            f"{short!r} is {len(ids)} tokens, not exactly one: {pieces}",
            "not_one_token",
            text=short.replace(" ", "␣"),
            n=len(ids),
            pieces=pieces,
        )
    return ids[0]


def whole_number(value: object, low: int, high: int, what: str) -> int:
    """``value`` as an int in ``low..high`` (a float only when it is whole).

    Raises:
        InputError: code ``bad_value`` (not a whole number, or out of range); ``params``
        ``what``, ``low``, ``high`` and ``value`` (its first :data:`SHORT_CHARS` characters).
    """
    try:
        number = int(value)  # type: ignore[call-overload]
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not low <= number <= high:
        shown = str(value)[:SHORT_CHARS]
        raise InputError(
            f"{what} must be a whole number from {low} to {high}, got {shown!r}",
            "bad_value",
            what=what,
            low=low,
            high=high,
            value=shown,
        )
    return number


def encode_prompt(pair: ModelPair, prompt: str) -> list[int]:
    """Tokenize a prompt and check it fits (:func:`check_prompt_ids`).

    Any text that encodes to at least one token is a prompt, whitespace included (``"\n"``
    is one token).

    Raises:
        PromptError: empty, over :data:`MAX_PROMPT_CHARS` characters (checked before
            tokenizing), not valid Unicode (``prompt_bad_text``: a lone surrogate, which the
            tokenizer would refuse with a ``TypeError``), no tokens, or too long for the
            context.
    """
    if not isinstance(prompt, str) or not prompt:
        raise PromptError("the prompt is empty: type some text to continue", "prompt_empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(
            f"the prompt has {len(prompt)} characters; at most {MAX_PROMPT_CHARS} are accepted",
            "prompt_too_many_chars",
            chars=len(prompt),
            limit=MAX_PROMPT_CHARS,
        )
    if not is_valid_text(prompt):
        raise PromptError("the prompt is not valid Unicode (a lone surrogate)", "prompt_bad_text")
    return check_prompt_ids(pair, pair.tokenizer.encode(prompt, add_special_tokens=False))


def check_prompt_ids(pair: ModelPair, ids: Sequence[int]) -> list[int]:
    """``ids`` as a list if they are a usable prompt: 1..``context_length − 1`` whole
    numbers, each a token id in ``[0, V)``.

    Raises:
        PromptError: empty, too long for the context, or an id out of range.
    """
    ids = list(ids)
    if not ids:
        raise PromptError("the prompt encodes to no tokens", "prompt_empty")
    limit = pair.context_length - 1
    if len(ids) > limit:
        raise PromptError(
            f"the prompt has {len(ids)} tokens; this pair's context holds "
            f"{pair.context_length}, so a prompt may have at most {limit} tokens",
            "prompt_too_long",
            tokens=len(ids),
            context=pair.context_length,
            limit=limit,
        )
    bad = [t for t in ids if isinstance(t, bool) or not isinstance(t, int | np.integer)]
    bad += [t for t in ids if t not in bad and not 0 <= int(t) < pair.vocab_size]
    if bad:
        raise PromptError(
            f"prompt ids must be token ids from 0 to {pair.vocab_size - 1}, got {bad[0]!r}",
            "prompt_bad_id",
            token=str(bad[0])[:20],
            vocab=pair.vocab_size,
        )
    return [int(t) for t in ids]


def prompt_ids(pair: ModelPair, prompt: str | Sequence[int]) -> list[int]:
    """Text (:func:`encode_prompt`) or ids (:func:`check_prompt_ids`) → checked ids: the
    one prompt validation of the step machine, the fast path and the comparisons."""
    if isinstance(prompt, str):
        return encode_prompt(pair, prompt)
    return check_prompt_ids(pair, prompt)


# ---------------------------------------------------------------- JSON from outside
