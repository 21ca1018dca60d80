"""Prompt lookup (n-gram) drafting: copy what followed the latest earlier occurrence of
the context's suffix. No model, no distribution: one-hot ``q``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from specdec_core.drafters.base import Drafter


class NgramDrafter(Drafter):
    """Prompt lookup: find the most recent earlier occurrence of the longest suffix n-gram
    (``max_n`` down to 1) of the context and propose the tokens that followed it.

    No model and no distribution: each ``q_i`` is one-hot, so the sampling rule accepts a
    proposal with ``p(y)`` and stays lossless. Proposes nothing when no suffix n-gram
    occurred before; the round then verifies zero drafts and still commits one token from
    ``p_1`` (Saxena 2023, "prompt lookup decoding"; transformers'
    ``PromptLookupCandidateGenerator``, which takes the *first* match where this takes the
    most recent one).

    Beyond those: the copy may run into the tokens it is proposing (as an LZ77 back
    reference does), so a repetition whose period is shorter than γ ("ha ha ha", a
    repeated line near the end of the context) still yields γ drafts instead of stopping at
    the end of the context.
    """

    name = "ngram"
    draft_cost = "none"  # copies from the context: no forward
    follows_grammar = False  # copies text: a grammar is refused with it

    def __init__(self, vocab_size: int, max_n: int = 3) -> None:
        if not isinstance(max_n, int) or max_n < 1:
            raise ValueError(f"n-gram size must be a whole number ≥ 1, got {max_n!r}")
        self.vocab_size = vocab_size
        self.max_n = max_n

    @property
    def knob(self) -> int:
        """The largest n-gram size tried (``n``)."""
        return self.max_n

    def _serial(
        self, context: list[int], gamma: int, pick: Callable[[torch.Tensor], int], last: bool
    ) -> list[int]:
        """The lookup's ids (they do not depend on temperature; ``pick`` is never called,
        so :meth:`Drafter.propose` gives one-hot rows); no forwards."""
        return self.lookup(context, gamma)

    def match(self, context: list[int]) -> tuple[int, int] | None:
        """``(n, start)`` of the longest suffix n-gram (``n ≤ max_n``, ``n ≤ L − 1``) of
        ``context`` that occurred earlier, at its most recent earlier ``start`` (the
        occurrence ends before the last token, so at least one token follows it);
        ``None`` when even the last token never occurred before."""
        for n in range(min(self.max_n, len(context) - 1), 0, -1):
            suffix = context[-n:]
            for start in range(len(context) - n - 1, -1, -1):
                if context[start : start + n] == suffix:
                    return n, start
        return None

    def lookup(self, context: list[int], gamma: int) -> list[int]:
        """``gamma`` ids that followed the :meth:`match` (none when there is no match)."""
        found = self.match(context) if gamma > 0 else None
        if found is None:
            return []
        n, start = found
        source = start + n  # ≤ L − 1: the first copied token is in the context
        out: list[int] = []
        for i in range(gamma):  # a copy that reaches the end continues into its own output
            j = source + i
            out.append(context[j] if j < len(context) else out[j - len(context)])
        return out
