"""What the session and the fast paths give a round of either shape (chain:
``engine/chain/round.py``; tree: ``engine/tree/round.py``) besides its own steps: the
round's two random streams, the grammar refusal, γ for the round, and the stop rule (which
also cuts a round's commit short, :meth:`StopRule.cut`). Reads top to bottom as a run uses
them. The rollback of the caches is theirs (``ModelCache.rollback_to``,
``Drafter.rollback_to``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GrammarSpec
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import DRAFTER_CLASSES

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair
    from specdec_core.core.settings import SessionConfig


Stream = Literal["draft", "verify"]
#: Each stream's number in the seed mix (part of the replay contract: never renumber).
STREAM_KEYS: dict[str, int] = {"draft": 0, "verify": 1}
_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """SplitMix64's output function (Steele, Lea and Flood 2014): a bijection of 64-bit
    words that spreads every input bit over the output."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def stream_seed(seed: int, round_index: int, stream: Stream) -> int:
    """The 64-bit seed of one stream of one round:
    ``mix(mix(mix(seed) ^ round_index) ^ STREAM_KEYS[stream])`` with ``mix`` =
    :func:`_splitmix64` (≈ 2 µs; ``numpy.random.SeedSequence`` would cost 50–150 µs a call
    on the fast path's every round).

    Raises:
        KeyError: an unknown stream name. ValueError: ``seed`` outside ``0..2**64 − 1`` or a
        negative ``round_index``.
    """
    key = STREAM_KEYS[stream]
    if not 0 <= seed <= _MASK64 or round_index < 0:
        raise ValueError(f"seed must be 0..2**64 − 1, round index ≥ 0: {seed}, {round_index}")
    return _splitmix64(_splitmix64(_splitmix64(seed) ^ round_index) ^ key)


def round_stream(seed: int, round_index: int, stream: Stream) -> torch.Generator:
    """A fresh CPU ``torch.Generator`` for one of the two random streams of a round,
    seeded with :func:`stream_seed` ``(seed, round_index, stream)``.

    Every speculative round (chain and tree, step machine and fast path) draws from two
    streams of its own: ``"draft"`` (drafting, and re-drafting after an edit: each
    ``y_i ~ q_i``; the tree's sibling draws) and ``"verify"`` (each ``u_i``, then the
    correction/bonus draw; the tree walk's draws). So the verification draws do not
    depend on how many draws drafting used: an edit at position ``k`` re-drafts from the
    drafting stream and leaves ``u_1..u_{k−1}`` and their verdicts as they were
    (``docs/ARCHITECTURE.md``, "One round, step by step", step 3). ``round_index`` counts the rounds
    finished before this one in the session or run (0 first). The autoregressive
    baseline (``engine/chain/generate.py``) keeps one generator seeded with ``seed``: it has
    no rounds.

    Raises:
        KeyError, ValueError: see :func:`stream_seed`.
    """
    return torch.Generator().manual_seed(stream_seed(seed, round_index, stream))


def grammar_refusal(drafter: Drafter | str | None, grammar: GrammarSpec | None) -> str | None:
    """Why ``drafter`` cannot run under ``grammar``, as a code (the UI's string key is
    ``err_<code>``), or ``None`` when it can. The one rule the chain, the tree, the CLI and
    the pages share: ``grammar_ngram``, a grammar with a drafter whose drafts do not come
    from processed rows (:attr:`Drafter.follows_grammar` false: prompt lookup copies text
    from the context and would propose outside the grammar). ``drafter``: an object, a
    name of :data:`specdec_core.drafters.registry.DRAFTER_NAMES`, or ``None`` (the pair's
    draft model)."""
    if grammar is None or drafter is None:
        return None
    if isinstance(drafter, str):
        cls = DRAFTER_CLASSES.get(drafter)
        follows = cls is None or cls.follows_grammar
    else:
        follows = drafter.follows_grammar
    return None if follows else "grammar_ngram"


def check_grammar_drafter(drafter: Drafter | str | None, grammar: GrammarSpec | None) -> None:
    """Raises ConfigError (code ``grammar_ngram``, param ``drafter``) when
    :func:`grammar_refusal` refuses the pair ``(drafter, grammar)``."""
    code = grammar_refusal(drafter, grammar)
    if code is not None:
        name = drafter if isinstance(drafter, str) else getattr(drafter, "name", "")
        raise ConfigError(
            f"a grammar cannot be used with the {name} drafter (prompt lookup copies text "
            "from the context, outside the grammar): choose a model drafter",
            code,
            drafter=name,
        )


def gamma_for_round(
    gamma: int, generated: int, max_new_tokens: int, committed: int, context_length: int
) -> int:
    """γ shortened so a round can pass neither ``max_new_tokens`` nor the context.

    A round commits at most γ + 1 tokens, so ``γ ≤ remaining − 1``; verification feeds
    positions up to ``L − 1 + γ`` and the next round feeds position ``L + γ``, so
    ``γ ≤ context_length − L − 1``. May be 0 (the round is then one plain target step).
    """
    remaining = max_new_tokens - generated
    return max(0, min(gamma, remaining - 1, context_length - committed - 1))


def stop_reason_after(
    generated: list[int],
    total_len: int,
    eos_token_id: int | None,
    max_new_tokens: int,
    context_length: int,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
) -> str | None:
    """Why generation stops after the last token of ``generated`` (``None``: go on).

    Checked in order: ``eos``, ``stop_string``, ``max_new_tokens``, ``context_limit``.
    """
    if eos_token_id is not None and generated and generated[-1] == eos_token_id:
        return "eos"
    if stop_strings and decode is not None:
        text = decode(generated)
        if any(s and s in text for s in stop_strings):
            return "stop_string"
    if len(generated) >= max_new_tokens:
        return "max_new_tokens"
    if total_len >= context_length:
        return "context_limit"
    return None


@dataclass(frozen=True)
class StopRule:
    """:func:`stop_reason_after` bound to a pair (EOS id, context, ``decode``) and settings
    (``max_new_tokens``, stop strings): ``stop(generated, total_len) -> reason | None``."""

    eos_token_id: int | None
    max_new_tokens: int
    context_length: int
    stop_strings: tuple[str, ...] = ()
    decode: Callable[[list[int]], str] | None = None

    def __call__(self, generated: list[int], total_len: int) -> str | None:
        return stop_reason_after(
            generated,
            total_len,
            self.eos_token_id,
            self.max_new_tokens,
            self.context_length,
            self.stop_strings,
            self.decode,
        )

    def cut(
        self, committed: list[int], proposal: list[int], prompt_len: int
    ) -> tuple[list[int], str | None]:
        """A round's commit cut short: append ``proposal`` (accepted drafts +
        correction/bonus) to ``committed`` token by token until the rule names a reason
        (``prompt_len``: ids before the generated ones). Returns ``(appended, reason)``."""
        appended: list[int] = []
        for token in proposal:
            appended.append(token)
            ids = committed + appended
            reason = self(ids[prompt_len:], len(ids))
            if reason:
                return appended, reason
        return appended, None


def stop_rule(pair: ModelPair, config: SessionConfig) -> StopRule:
    """The :class:`StopRule` of ``pair`` under ``config``."""
    decode = pair.tokenizer.decode
    return StopRule(
        pair.eos_token_id, config.max_new_tokens, pair.context_length, config.stop_strings, decode
    )
