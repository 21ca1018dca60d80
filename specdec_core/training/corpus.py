"""The embedded pair's data: Tiny Shakespeare split into speeches, a byte-level BPE
tokenizer trained on them (the GPT-2 algorithm, ``tokenizers`` library, ``<|endoftext|>``
as id 0), its ``transformers`` wrapper, and the corpus as one token stream. Used by
``training/embedded.py`` (``python -m specdec_core.training.embedded``) and
``training/eagle.py`` (``python -m specdec_core.training.eagle``)."""

from __future__ import annotations

import re

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

EOS = "<|endoftext|>"


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
