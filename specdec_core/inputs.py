"""Student input and settings: the session config and its validation, prompt encoding,
one-token edit text. Errors carry a ``code`` and ``params`` so the UI can say them in zh
or en."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .drafters import DraftMethod
from .errors import InputError, PromptError, TokenTextError  # noqa: F401 - re-exported
from .models import ModelPair
from .sampling import ConfigError, SamplingConfig

MAX_GAMMA = 16


def single_token_id(pair: ModelPair, text: str) -> int:
    """The id of ``text`` if it encodes to exactly one token (e.g. ``" night"``).

    Raises:
        TokenTextError: zero or several tokens (the message lists the pieces).
    """
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


@dataclass(frozen=True)
class SessionConfig:
    """Settings of a session (validated by :meth:`validate`).

    ``gamma``: draft length γ, 1..``MAX_GAMMA``. ``temperature`` 0 = greedy.
    ``draft_method``: ``probabilistic`` (sample from ``q``) or ``greedy`` (argmax,
    one-hot ``q``). ``max_new_tokens`` ≥ 1. ``stop_strings``: generation stops right after
    the token that completes one. ``top_n``: tokens kept per distribution in traces.
    """

    gamma: int = 4
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    draft_method: DraftMethod = "probabilistic"
    seed: int = 0
    max_new_tokens: int = 40
    stop_strings: tuple[str, ...] = ()
    repropose_after_edit: bool = True
    top_n: int = 8

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_k, self.top_p)

    def validate(self, vocab_size: int | None = None) -> SessionConfig:
        if not isinstance(self.gamma, int) or not 1 <= self.gamma <= MAX_GAMMA:
            raise ConfigError(
                f"γ (gamma) must be a whole number from 1 to {MAX_GAMMA}, got {self.gamma!r}"
            )
        self.sampling.validate(vocab_size)
        if self.draft_method not in ("probabilistic", "greedy"):
            raise ConfigError(
                f"draft method must be probabilistic or greedy, got {self.draft_method!r}"
            )
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError(f"seed must be a whole number from 0 to 2**63 − 1, got {self.seed!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(f"max new tokens must be ≥ 1, got {self.max_new_tokens!r}")
        return self


#: Longest prompt text accepted, in characters: checked before tokenizing, so a
#: multi-megabyte paste costs nothing (a 1024-token GPT-2 context is ≈ 4–5 k characters).
MAX_PROMPT_CHARS = 20_000


def encode_prompt(pair: ModelPair, prompt: str) -> list[int]:
    """Tokenize a prompt and check it fits (:func:`check_prompt_ids`).

    Any text that encodes to at least one token is a prompt, whitespace included (``"\n"``
    is one token).

    Raises:
        PromptError: empty, over :data:`MAX_PROMPT_CHARS` characters (checked before
            tokenizing), no tokens, or too long for the context.
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
