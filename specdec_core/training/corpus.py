"""The embedded pairs' data: a corpus split into speeches (Tiny Shakespeare) or poems
(``data/poetry_zh.txt``), a tokenizer trained on them (``<|endoftext|>`` as id 0): a
byte-level BPE (the GPT-2 algorithm, ``tokenizers`` library) for English, one token per
character for Chinese (:func:`train_char_tokenizer`), its ``transformers`` wrapper, and
the corpus as one token stream. Used by ``training/embedded.py`` (``python -m
specdec_core.training.embedded [--pair embedded-zh]``) and the drafter recipes.

:data:`CORPORA` is the switch: pair name → its corpus file and tokenizer kind."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

EOS = "<|endoftext|>"
NEWLINE = "\n"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Corpus:
    """A pair's training text: ``path`` (UTF-8, blocks separated by blank lines), the
    tokenizer ``kind`` trained on it (``bytes``: byte-level BPE; ``chars``: one token per
    character with byte fallback) and its vocabulary size."""

    path: Path
    kind: Literal["bytes", "chars"]
    vocab_size: int


CORPORA = {
    "embedded": Corpus(REPO_ROOT / "data/tinyshakespeare.txt", "bytes", 4096),
    "embedded-zh": Corpus(REPO_ROOT / "data/poetry_zh.txt", "chars", 5120),
}


def split_speeches(text: str) -> list[str]:
    """Speeches: the blocks between blank lines, outer newlines stripped, empties dropped."""
    return [s.strip("\n") for s in re.split(r"\n\s*\n", text) if s.strip()]


def train_tokenizer(speeches: list[str], vocab_size: int) -> Tokenizer:
    """Byte-level BPE as in GPT-2: every byte is in the alphabet (any text encodes, and
    decoding is exact), no prefix space, ``<|endoftext|>`` is id 0."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(speeches, trainer=trainer)
    assert tok.token_to_id(EOS) == 0, "the end-of-text token must be id 0"
    return tok


def train_char_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    """One token per character, the commonest ``vocab_size − 258`` characters of ``texts``
    (ties broken by first occurrence), after ``<|endoftext|>`` (id 0), the 256 byte tokens
    ``<0x00>..<0xFF>`` (ids 1–256) and newline (id 257). A BPE with no merges and byte
    fallback (as Llama's tokenizer falls back): any other character encodes as its UTF-8
    bytes, so every text encodes and decoding is exact; a common character is never split.
    Raises ``ValueError`` if ``vocab_size`` leaves no room for a character."""
    fixed = [EOS, *(f"<0x{b:02X}>" for b in range(256)), NEWLINE]
    if vocab_size <= len(fixed):
        raise ValueError(f"vocab_size {vocab_size} must exceed {len(fixed)}")
    counts = Counter(ch for text in texts for ch in text if ch != NEWLINE)
    chars = [ch for ch, _ in counts.most_common(vocab_size - len(fixed))]
    vocab = {tok: i for i, tok in enumerate(fixed + chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([EOS])
    assert tok.token_to_id(EOS) == 0, "the end-of-text token must be id 0"
    return tok


def make_tokenizer(kind: str, texts: list[str], vocab_size: int) -> Tokenizer:
    """The tokenizer of a :class:`Corpus` ``kind`` trained on ``texts``."""
    if kind == "chars":
        return train_char_tokenizer(texts, vocab_size)
    return train_tokenizer(texts, vocab_size)


def wrap_tokenizer(tok: Tokenizer, context: int) -> PreTrainedTokenizerFast:
    """The ``transformers`` tokenizer saved next to each model. (Do not build it from
    vocab/merges files: ``GPT2TokenizerFast(vocab_file, merges_file)`` is empty here.)"""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=EOS,
        model_max_length=context,
        clean_up_tokenization_spaces=False,
    )


def encode_corpus(tok: Tokenizer, speeches: list[str]) -> np.ndarray:
    """All speeches as one token stream, EOS (id 0) after each. Returns (N,) int64."""
    eos = tok.token_to_id(EOS)
    ids: list[int] = []
    for enc in tok.encode_batch(speeches):
        ids.extend(enc.ids)
        ids.append(eos)
    return np.asarray(ids, dtype=np.int64)
