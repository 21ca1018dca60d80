"""The Chinese corpus and tokenizer recipe: ``data/build_zh.py``'s filters and the
character tokenizer of ``training/corpus.py`` (no model needed)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import REPO

from specdec_core.core.trace import TokenInfo, byte_groups, piece_bytes
from specdec_core.training.corpus import CORPORA, EOS, make_tokenizer, train_char_tokenizer


def _build_zh():
    spec = importlib.util.spec_from_file_location("build_zh", REPO / "data" / "build_zh.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_clean_simplifies_full_width_and_drops_notes_and_odd_characters():
    build = _build_zh()
    convert = {"牀前明月光,疑是地上霜.": "床前明月光,疑是地上霜."}.get  # a stand-in for OpenCC
    assert build.clean(["牀前明月光,疑是地上霜."], convert) == ["床前明月光，疑是地上霜。"]
    same = lambda s: s  # noqa: E731
    assert build.clean(["白日依山尽（一作白日），黄河入海流。"], same) == [
        "白日依山尽，黄河入海流。"
    ]
    assert build.clean(["ABC，黄河入海流。"], same) is None  # Latin: the poem is left out
    assert build.clean([{"not": "a line"}], same) is None
    assert build.REGULAR.match("床前明月光，疑是地上霜。")
    assert build.REGULAR.match("月落乌啼霜满天，江枫渔火对愁眠。")
    assert not build.REGULAR.match("床前明月光，疑是地上霜")  # no closing 。
    assert not build.REGULAR.match("关关雎鸠，在河之洲。")  # four characters: not Tang verse


def test_char_tokenizer_one_token_per_character_with_byte_fallback():
    tok = train_char_tokenizer(["床前明月光，\n明月", "光光"], vocab_size=262)
    # ids: EOS 0, bytes 1..256, newline 257, then by count, ties by first occurrence:
    # 光 (3), 明 月 (2), 床 (1); 前 and ， did not fit
    assert tok.token_to_id(EOS) == 0 and tok.token_to_id("<0x00>") == 1
    assert tok.token_to_id("\n") == 257 and tok.token_to_id("光") == 258
    assert tok.encode("明月\n光").ids == [259, 260, 257, 258]
    assert tok.token_to_id("床") == 261 and tok.token_to_id("前") is None
    rare = tok.encode("霜")  # not in the vocabulary: its three UTF-8 bytes
    assert rare.tokens == ["<0xE9>", "<0x9C>", "<0x9C>"] and tok.decode(rare.ids) == "霜"
    assert tok.encode(EOS).ids == [0]
    with pytest.raises(ValueError):
        train_char_tokenizer(["a"], vocab_size=258)


def test_the_switch_picks_each_pairs_corpus_and_tokenizer():
    assert CORPORA["embedded"].kind == "bytes" and CORPORA["embedded"].vocab_size == 4096
    assert CORPORA["embedded-zh"].path == REPO / "data" / "poetry_zh.txt"
    chars = make_tokenizer("chars", ["春眠不觉晓"], 300)
    assert len(chars.encode("春眠不觉晓").ids) == 5
    english = make_tokenizer("bytes", ["To be, or not to be"] * 3, 300)
    assert english.token_to_id(EOS) == 0 and english.get_vocab_size() <= 300


def test_byte_fallback_pieces_are_bytes_and_the_strip_joins_them():
    assert piece_bytes("<0xE9>") == b"\xe9" and piece_bytes("<0x41>") == b"A"
    assert piece_bytes("æĺ") == b"\xe6\x98"  # GPT-2's byte-level pieces as before
    tokens = [TokenInfo(300, "月", "月")]
    tokens += [TokenInfo(i, "\ufffd", f"<0x{b:02X}>") for i, b in enumerate(b"\xe9\x9c\x9c", 1)]
    assert [t.partial for t in tokens] == [False, True, True, True]
    assert byte_groups(tokens) == {1: (4, "霜")}
