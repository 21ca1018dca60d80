"""A drafter's reduced vocabulary: its LM head restricted to the ``N`` token ids most
frequent in the pair's training text (FR-Spec, Zhao et al. 2025, "FR-Spec: Accelerating
Large-Vocabulary Language Models via Frequency-Ranked Speculative Sampling"; EAGLE-3's
draft vocabulary does the same).

Training-free: the ranking is a file beside the pair's models, ``draft_vocab.json``
(made by ``python -m specdec_core.training.draft_vocab``), with each drafter's ``N``. The
head's rows are sliced once when a drafter is made (:meth:`DraftVocab.columns`); each
draft step computes ``N`` logits instead of ``V``. Lossless: ``q`` is what the drafter
really samples from, zero outside the subset (greedy: the argmax over the subset;
sampled: temperature, top-k and top-p, then the softmax and the draw over the subset's
``N`` ids; history processors (penalties) are per id and run on the full-width row,
``−inf`` outside the subset). The verification is unchanged: a token outside the subset
can still be committed, as the correction drawn from ``[p − q]+`` over the full
vocabulary. A grammar mask may allow only tokens outside the subset, and a no-repeat
n-gram ban may cover a subset no larger than its prefix: a proposal under either runs the
full head (``Drafter.full_head_for``).

Shapes: ``N`` subset size, ``V`` vocabulary, ``d`` width.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from specdec_core.core.models import ModelPair

KIND = "draft-vocab"
FILE_NAME = "draft_vocab.json"
#: ``SPECDEC_DRAFT_VOCAB=full`` runs every drafter on its full head (a comparison run).
ENV = "SPECDEC_DRAFT_VOCAB"


@dataclass(frozen=True)
class DraftVocab:
    """The ``N`` ids a drafter's head computes, ascending (so an argmax over the subset
    breaks ties at the lowest id, as one over the full row does).

    Attributes:
        ids: ``[N]`` int64 on the drafter's device. id_list: the same as Python ints.
        vocab_size: ``V``, the width of the ``q`` rows.
    """

    ids: torch.Tensor
    id_list: tuple[int, ...]
    vocab_size: int

    @classmethod
    def of(cls, ranked: list[int], n: int, vocab_size: int, device: str | torch.device = "cpu"):
        """The top ``n`` of a ranking (most frequent first).

        Raises:
            ValueError: ``n`` outside ``1..V`` or an id outside the vocabulary."""
        if not 1 <= n <= vocab_size or len(ranked) < n:
            raise ValueError(f"top-N must be in 1..{vocab_size}, got {n}")
        chosen = sorted(int(i) for i in ranked[:n])
        if chosen[0] < 0 or chosen[-1] >= vocab_size or len(set(chosen)) != n:
            raise ValueError("the ranking holds ids outside the vocabulary or repeats")
        ids = torch.tensor(chosen, dtype=torch.long, device=device)
        return cls(ids, tuple(chosen), vocab_size)

    @property
    def size(self) -> int:
        return len(self.id_list)

    def columns(self, weight: torch.Tensor) -> torch.Tensor:
        """``[V, d]`` LM head → ``[d, N]``: its subset's rows, transposed (a contiguous
        copy; ``hidden @ columns`` as :func:`~specdec_core.core.lean_gpt2.logits`), made
        once per weight tensor, subset and process (dropped with the weight), so the
        drafters' int8 copy of it (``core/int8_linear.py``) is made once too."""
        key = (id(weight), self.id_list)
        entry = _COLUMNS.get(key)
        if entry is not None and entry[0]() is weight:
            return entry[1]
        with _LOCK, torch.inference_mode(False), torch.no_grad():
            rows = weight.detach().index_select(0, self.ids.to(weight.device))
            columns = rows.t().contiguous()
            _COLUMNS[key] = (weakref.ref(weight, lambda _: _COLUMNS.pop(key, None)), columns)
        return columns

    def expand(self, rows: torch.Tensor, fill: float = float("-inf")) -> torch.Tensor:
        """``[..., N]`` subset rows → ``[..., V]`` float32, ``fill`` outside the subset
        (``−inf`` for logits, 0 for probabilities)."""
        out = torch.full((*rows.shape[:-1], self.vocab_size), fill, device=rows.device)
        return out.index_copy_(-1, self.ids.to(rows.device), rows.float())


_CACHE: dict[tuple[str, int, str], DraftVocab] = {}
# (id(weight), ids) → (weight, [d, N] columns)
_COLUMNS: dict[tuple[int, tuple[int, ...]], tuple[weakref.ref, torch.Tensor]] = {}
_FILES: dict[Path, dict] = {}  # read once per process (shipped files, never edited)
_LOCK = threading.Lock()


def vocab_file(pair: ModelPair) -> Path | None:
    """``draft_vocab.json`` beside the pair's target folder, ``None`` when there is none
    (hub presets, test pairs)."""
    source = Path(pair.target_source)
    path = source.parent / FILE_NAME
    return path if source.is_dir() and path.is_file() else None


def read_vocab_file(pair: ModelPair) -> dict | None:
    """The pair's ``draft_vocab.json`` (ranking, each drafter's ``N``; read once per
    process), ``None`` without one.

    Raises:
        ValueError: a file of another kind or vocabulary size."""
    path = vocab_file(pair)
    if path is None:
        return None
    raw = _FILES.get(path)
    if raw is None:
        raw = _FILES[path] = json.loads(path.read_text(encoding="utf-8"))
    if raw.get("kind") != KIND or raw.get("vocab_size") != pair.vocab_size:
        raise ValueError(f"{path.name} is not a draft vocabulary for this pair")
    return raw


def draft_vocab_for(
    pair: ModelPair, drafter: str, n: int | None = None, sampled: bool = False
) -> DraftVocab | None:
    """The reduced vocabulary of ``drafter`` (``model`` or ``eagle``) on ``pair``: the top
    ``n`` (default: the file's ``N`` for it; ``sampled``: its ``N`` at T > 0, the file's
    ``<drafter>_sampled`` when it has one), made once per process; ``None`` (the full
    head) when the pair has no file, ``N`` is 0 or ``≥ V``, or ``SPECDEC_DRAFT_VOCAB=full``
    (a comparison run; an explicit ``n`` overrides it).

    Raises:
        ValueError: as :func:`read_vocab_file`."""
    if n is None and os.environ.get(ENV, "") == "full":
        return None
    raw = read_vocab_file(pair)
    if raw is None:
        return None
    top_n = raw.get("top_n", {})
    if n is None:
        n = int(top_n.get(f"{drafter}_sampled" if sampled else drafter, top_n.get(drafter, 0)))
    if n <= 0 or n >= pair.vocab_size:
        return None
    key = (str(vocab_file(pair)), n, str(pair.device))
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = DraftVocab.of(raw["ranking"], n, pair.vocab_size, pair.device)
        return _CACHE[key]


def describe(pair: ModelPair, drafter: str) -> dict[str, float] | None:
    """What a page says of ``drafter``'s reduced vocabulary on ``pair``: ``{"n": N, "v": V,
    "share": the share of held-out tokens inside it}``, plus ``n_sampled`` /
    ``share_sampled`` when it samples (T > 0) on another ``N``; ``None`` when it runs the
    full head."""
    vocab = draft_vocab_for(pair, drafter)
    if vocab is None:
        return None
    coverage = (read_vocab_file(pair) or {}).get("coverage", {})
    about = {"n": vocab.size, "v": vocab.vocab_size, "share": _heldout(coverage, vocab.size)}
    sampled = draft_vocab_for(pair, drafter, sampled=True)
    if sampled is not None and sampled.size != vocab.size:
        about.update(n_sampled=sampled.size, share_sampled=_heldout(coverage, sampled.size))
    return about


def _heldout(coverage: dict, n: int) -> float:
    return coverage.get(str(n), {}).get("heldout", float("nan"))
