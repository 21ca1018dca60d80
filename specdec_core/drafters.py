"""Draft sources behind one interface: ``propose(context, gamma, ...) -> Draft``.

Modelled on transformers' ``CandidateGenerator``: a drafter proposes up to γ candidate
tokens after the committed context, with the distributions ``q_1..q_γ`` they were drawn
from. A drafter without a distribution returns one-hot rows.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import torch
from transformers import PreTrainedModel

from .kvcache import ModelCache
from .sampling import SamplingConfig, logits_to_probs, one_hot

if TYPE_CHECKING:
    from .models import ModelPair

DraftMethod = Literal["probabilistic", "greedy"]


@dataclass(frozen=True)
class Draft:
    """Candidates from one proposal.

    Attributes:
        ids: ``[γ']`` int64 on CPU, ``γ' ≤ γ`` (a drafter may propose fewer).
        probs: ``[γ', V]`` float32 on CPU, the rows ``q_i`` each ``ids[i]`` was drawn from
            (one-hot for deterministic proposals).
        forwards: draft-model forwards run.
        ms: wall time in milliseconds.
    """

    ids: torch.Tensor
    probs: torch.Tensor
    forwards: int
    ms: float


class Drafter(Protocol):
    """What every draft source provides (all methods required; no hidden capabilities).

    ``propose`` is the general proposal with the rows ``q_i`` (the step machine and the
    sampled fast path); ``propose_argmax`` is the same proposal at temperature 0 without
    building one-hot rows (the greedy fast path; it must return exactly the ids
    ``propose`` returns at temperature 0). ``forward_ms`` is the time spent inside draft
    model forwards so far (0.0 for a drafter without a model).
    """

    name: str

    def propose(
        self,
        context: list[int],
        gamma: int,
        sampling: SamplingConfig,
        method: DraftMethod,
        generator: torch.Generator,
    ) -> Draft: ...

    def propose_argmax(self, context: list[int], gamma: int) -> tuple[list[int], int]:
        """``([γ'] drafted ids, forwards run)`` at temperature 0, ``γ' ≤ gamma``."""
        ...

    def cached_ids(self) -> list[int] | None:
        """Ids covered by the drafter's KV cache (``None`` if it keeps none)."""
        ...

    def rollback(self, length: int) -> int:
        """Crop the drafter's cache to ``length`` positions; returns positions removed."""
        ...

    @property
    def forward_ms(self) -> float:
        """Milliseconds spent in draft-model forwards since the drafter was made."""
        ...


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def draw_proposal(
    logits: torch.Tensor,
    sampling: SamplingConfig,
    method: DraftMethod,
    generator: torch.Generator,
) -> tuple[int, torch.Tensor]:
    """One drafted token from one row of draft logits.

    Args:
        logits: ``[V]`` draft logits (any device).

    Returns:
        ``(token_id, q)`` with ``q`` the ``[V]`` float32 CPU row the token was drawn from:
        the processed distribution (``probabilistic``) or one-hot on its argmax
        (``greedy``, and always at temperature 0).
    """
    probs = logits_to_probs(logits, sampling).cpu()
    if method == "greedy" or sampling.greedy:
        token = int(probs.argmax().item())
        return token, one_hot(torch.tensor(token), probs.shape[-1])
    token = int(torch.multinomial(probs, 1, generator=generator).item())
    return token, probs


class ModelDrafter:
    """A smaller causal LM proposes tokens one at a time (serially) from its own cache."""

    name = "model"

    def __init__(self, model: PreTrainedModel) -> None:
        self.kv = ModelCache(model)

    def cached_ids(self) -> list[int] | None:
        return self.kv.ids

    def rollback(self, length: int) -> int:
        return self.kv.crop(length)

    def propose(
        self,
        context: list[int],
        gamma: int,
        sampling: SamplingConfig,
        method: DraftMethod,
        generator: torch.Generator,
    ) -> Draft:
        """Draft ``gamma`` tokens after ``context`` (``L ≥ 1`` ids).

        The first forward catches the cache up on every context token it lacks (after a
        rollback, usually the last committed tokens); each later forward feeds one drafted
        token. ``gamma`` forwards in all; the last draft is not fed (its KV is not needed
        unless it is accepted, and then the next round's catch-up computes it).
        """
        started = time.perf_counter()
        ids: list[int] = []
        rows: list[torch.Tensor] = []
        pending = self.kv.sync_to(context)
        for _ in range(gamma):
            logits = self.kv.extend(pending)[-1]  # [V]
            token, q = draw_proposal(logits, sampling, method, generator)
            ids.append(token)
            rows.append(q)
            pending = [token]
        _sync()
        vocab = self.kv.model.config.vocab_size
        probs = torch.stack(rows) if rows else torch.zeros(0, vocab)
        return Draft(
            torch.tensor(ids, dtype=torch.long), probs, gamma, (time.perf_counter() - started) * 1e3
        )

    def propose_argmax(self, context: list[int], gamma: int) -> tuple[list[int], int]:
        """The greedy fast path's proposal: the same tokens as :meth:`propose` at
        temperature 0 (argmax of each draft row) without building one-hot ``q`` rows or a
        :class:`Draft`; the LM head runs on the last position only.

        Returns:
            ``([γ] drafted ids, γ forwards)``.
        """
        ids: list[int] = []
        pending = self.kv.sync_to(context)
        for _ in range(gamma):
            token = int(self.kv.extend_last(pending).argmax())
            ids.append(token)
            pending = [token]
        return ids, gamma

    @property
    def forward_ms(self) -> float:
        """Milliseconds inside this drafter's model forwards (:class:`ModelCache`)."""
        return self.kv.forward_ms


class NgramDrafter:
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

    def __init__(self, vocab_size: int, max_n: int = 3) -> None:
        if not isinstance(max_n, int) or max_n < 1:
            raise ValueError(f"n-gram size must be a whole number ≥ 1, got {max_n!r}")
        self.vocab_size = vocab_size
        self.max_n = max_n

    @property
    def knob(self) -> int:
        """The largest n-gram size tried (``n``)."""
        return self.max_n

    forward_ms = 0.0  # no model

    def cached_ids(self) -> list[int] | None:
        return None

    def rollback(self, length: int) -> int:
        return 0

    def propose_argmax(self, context: list[int], gamma: int) -> tuple[list[int], int]:
        """The lookup's ids (they do not depend on temperature); no forwards."""
        return self.lookup(context, gamma), 0

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

    def propose(
        self,
        context: list[int],
        gamma: int,
        sampling: SamplingConfig,
        method: DraftMethod,
        generator: torch.Generator,
    ) -> Draft:
        started = time.perf_counter()
        ids = self.lookup(context, gamma)
        tensor = torch.tensor(ids, dtype=torch.long)
        return Draft(
            tensor, one_hot(tensor, self.vocab_size), 0, (time.perf_counter() - started) * 1e3
        )


def early_exit_model(target: PreTrainedModel, layers: int) -> PreTrainedModel:
    """A GPT-2 made of the target's first ``layers`` blocks + its final layer norm + LM
    head, *sharing* those modules (no copy, the shared model's config and weights are not
    changed). Self-speculative decoding (Elhoushi et al. 2024, "LayerSkip").

    Raises:
        ValueError: ``layers`` outside ``1..n_layer`` or a model that is not GPT-2.
    """
    config = copy.deepcopy(target.config)
    total = getattr(config, "n_layer", None)
    if total is None or not hasattr(target, "transformer"):
        raise ValueError("early exit is implemented for GPT-2 models only")
    if not 1 <= layers <= total:
        raise ValueError(f"early-exit layers must be between 1 and {total}, got {layers}")
    config.n_layer = layers
    with torch.device("meta"):
        shallow = type(target)(config)
    body = shallow.transformer
    body.wte, body.wpe, body.ln_f = (
        target.transformer.wte,
        target.transformer.wpe,
        target.transformer.ln_f,
    )
    body.h = torch.nn.ModuleList(list(target.transformer.h[:layers]))
    shallow.lm_head = target.lm_head
    # Only the new wrappers get flags set: ``.eval()`` / ``.requires_grad_()`` on the whole
    # model would write to the shared modules, which other sessions are using.
    for module in (shallow, body, body.drop, body.h):
        module.training = False
    return shallow


class EarlyExitDrafter(ModelDrafter):
    """The target's first ``layers`` layers + final layer norm + LM head propose, one
    token at a time, from their own KV cache (a ``DynamicCache`` of ``layers`` layers, not
    the target's)."""

    name = "early-exit"

    def __init__(self, target: PreTrainedModel, layers: int) -> None:
        super().__init__(early_exit_model(target, layers))
        self.layers = layers

    @property
    def knob(self) -> int:
        """Layers kept (``k``)."""
        return self.layers


DRAFTER_NAMES = ("model", "ngram", "early-exit")


def default_knob(pair: ModelPair, name: str) -> int | None:
    """The knob a drafter gets when none is given: ``ngram`` n = 3, ``early-exit`` half
    the target's layers (at least 1), ``model`` none."""
    if name == "ngram":
        return 3
    if name == "early-exit":
        return max(1, pair.target.config.n_layer // 2)
    return None


def make_named_drafter(pair: ModelPair, name: str, knob: int | None = None) -> Drafter:
    """A fresh drafter (its own cache; the pair's models are shared, not copied):
    ``model`` (the pair's draft model; no knob), ``ngram`` (knob = max n, default 3) or
    ``early-exit`` (knob = layers, default half the target's).

    Raises:
        ValueError: unknown name or knob out of range (``0`` is out of range, not "default").
    """
    if knob is None:
        knob = default_knob(pair, name)
    if name == "model":
        return ModelDrafter(pair.draft)
    if name == "ngram":
        return NgramDrafter(pair.vocab_size, knob)
    if name == "early-exit":
        return EarlyExitDrafter(pair.target, knob)
    raise ValueError(f"unknown drafter {name!r}; choose model, ngram or early-exit")
