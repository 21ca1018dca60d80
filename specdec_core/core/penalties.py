"""History-dependent penalties, applied to one row of logits for that row's own candidate
prefix (:mod:`specdec_core.core.processors` runs them row by row).

* Repetition penalty (Keskar et al. 2019, CTRL §4.1; transformers
  ``RepetitionPenaltyLogitsProcessor``): for every token id in the prefix (prompt
  included), a logit ``s`` becomes ``s / θ`` if ``s > 0`` else ``s · θ``. ``θ = 1`` is off.
* Frequency and presence penalties (OpenAI API; vLLM ``apply_penalties``): over the
  *generated* tokens only (after ``prompt_len``), ``s[t] −= f · count[t] + r · [count[t] > 0]``.
* No-repeat n-gram (transformers ``NoRepeatNGramLogitsProcessor``): a token that would
  complete an n-gram already in the prefix (prompt included) gets ``−inf``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec_core.core.errors import ConfigError

#: Bounds of the penalty settings (CLI, sidebar, links).
REPETITION_PENALTY_RANGE = (0.1, 10.0)
FREQUENCY_PENALTY_RANGE = (-2.0, 2.0)  # OpenAI's documented range
PRESENCE_PENALTY_RANGE = (-2.0, 2.0)
MAX_NGRAM_SIZE = 10


@dataclass(frozen=True)
class PenaltyConfig:
    """The history-dependent penalties (all off by default)."""

    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0

    @property
    def active(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.no_repeat_ngram_size > 0
        )

    def validate(self) -> PenaltyConfig:
        """Raises ConfigError (code ``bad_penalty``, params ``what``, ``low``, ``high``,
        ``value``): a value out of range or not a number."""
        for what, value, (low, high) in (
            ("repetition penalty", self.repetition_penalty, REPETITION_PENALTY_RANGE),
            ("frequency penalty", self.frequency_penalty, FREQUENCY_PENALTY_RANGE),
            ("presence penalty", self.presence_penalty, PRESENCE_PENALTY_RANGE),
        ):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or math.isnan(value) or not low <= value <= high:
                raise ConfigError(
                    f"{what} must be between {low:g} and {high:g}, got {value!r}",
                    "bad_penalty",
                    what=what,
                    low=low,
                    high=high,
                    value=str(value)[:20],
                )
        n = self.no_repeat_ngram_size
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NGRAM_SIZE:
            raise ConfigError(
                f"no-repeat n-gram size must be a whole number from 1 to {MAX_NGRAM_SIZE} "
                f"(0 = off), got {n!r}",
                "bad_penalty",
                what="no-repeat n-gram size",
                low=0,
                high=MAX_NGRAM_SIZE,
                value=str(n)[:20],
            )
        return self


def banned_ngram_tokens(prefix: Sequence[int], n: int) -> list[int]:
    """Tokens that would complete an ``n``-gram already in ``prefix`` (transformers
    ``NoRepeatNGramLogitsProcessor``): every ``t`` such that ``prefix[-(n−1):] + [t]``
    occurs in ``prefix``. ``n = 1`` bans every token seen. Empty if ``len(prefix) < n``."""
    if n <= 0 or len(prefix) + 1 < n or len(prefix) < n:
        return []
    if n == 1:
        return sorted(set(prefix))
    tail = tuple(prefix[len(prefix) - n + 1 :])
    return sorted(
        {
            prefix[i + n - 1]
            for i in range(len(prefix) - n + 1)
            if tuple(prefix[i : i + n - 1]) == tail
        }
    )


def apply_penalties(
    logits: torch.Tensor, prefix: Sequence[int], prompt_len: int, config: PenaltyConfig
) -> torch.Tensor:
    """One row of logits after the penalties, for the candidate prefix ``prefix``.

    Args:
        logits: ``[V]`` any float dtype (a new tensor is returned; the input is not
            changed). prefix: prompt + generated + tentative ids before this position.
        prompt_len: ids of ``prefix`` that are the prompt (frequency / presence count the
            rest only).

    Returns:
        ``[V]`` float32 (module docstring: the formulas and their sources).
    """
    out = logits.float().clone()
    vocab = out.shape[-1]
    if config.repetition_penalty != 1.0 and len(prefix):
        seen = torch.tensor(sorted(set(prefix)), dtype=torch.long, device=out.device)
        s = out[seen]
        theta = config.repetition_penalty
        out[seen] = torch.where(s > 0, s / theta, s * theta)
    if config.no_repeat_ngram_size > 0:
        banned = banned_ngram_tokens(prefix, config.no_repeat_ngram_size)
        if banned:
            out[torch.tensor(banned, dtype=torch.long, device=out.device)] = float("-inf")
    if (config.frequency_penalty or config.presence_penalty) and len(prefix) > prompt_len:
        generated = torch.tensor(list(prefix[prompt_len:]), dtype=torch.long)
        counts = torch.bincount(generated, minlength=vocab)[:vocab].to(out.device).float()
        out -= config.frequency_penalty * counts + config.presence_penalty * (counts > 0).float()
    return out


def penalty_counts(prefix: Sequence[int], prompt_len: int) -> dict[int, tuple[int, int]]:
    """What the penalties see for ``prefix``: ``token id → (count in the whole prefix,
    count in the generated part)``, for every id that occurs."""
    out: dict[int, tuple[int, int]] = {}
    for i, t in enumerate(prefix):
        whole, gen = out.get(t, (0, 0))
        out[t] = (whole + 1, gen + (1 if i >= prompt_len else 0))
    return out


# ---------------------------------------------------------------- grammar
#: JSON-schema keywords xgrammar 0.2.9 compiles but does not enforce (checked one by one:
#: ``{"not": {}}`` let ``-3`` through, ``allOf`` ignored a ``minimum``, ``oneOf`` does not


@dataclass(frozen=True)
class PenaltyView:
    """What the penalties see at the prefix the state stands on: ``counts`` as
    ``(token id, count in the whole prefix, count in the generated part)``, most frequent
    first, at most ``limit`` of them; ``distinct`` ids in all."""

    counts: tuple[tuple[int, int, int], ...]
    distinct: int
