"""Student input and settings: the session config and its validation, prompt encoding,
one-token edit text. Errors carry a ``code`` and ``params`` so the UI can say them in zh
or en."""

from __future__ import annotations

from dataclasses import dataclass

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


def encode_prompt(pair: ModelPair, prompt: str) -> list[int]:
    """Tokenize a prompt; raises :class:`PromptError` if empty or too long for the context."""
    if not prompt or not prompt.strip():
        raise PromptError("the prompt is empty: type some text to continue", "prompt_empty")
    ids = pair.tokenizer.encode(prompt, add_special_tokens=False)
    limit = pair.context_length - 1
    if not ids:
        raise PromptError("the prompt encodes to no tokens", "prompt_empty")
    if len(ids) > limit:
        raise PromptError(
            f"the prompt has {len(ids)} tokens; this pair's context holds "
            f"{pair.context_length}, so a prompt may have at most {limit} tokens",
            "prompt_too_long",
            tokens=len(ids),
            context=pair.context_length,
            limit=limit,
        )
    return ids
