"""Loading pairs: presets, custom folders behind an opt-in, errors a student can cause."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.errors import ModelLoadError, VocabularyMismatchError
from specdec_core.core.models import PRESETS, default_pair_name, load_pair


def test_tiny_pair_loads_float32_eval(tiny_pair):
    assert tiny_pair.device == "cpu" and tiny_pair.vocab_size == 300
    assert next(tiny_pair.target.parameters()).dtype == torch.float32
    assert not tiny_pair.target.training and tiny_pair.context_length == 64
    assert tiny_pair.eos_token_id == tiny_pair.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text = "First Citizen:\nBefore we proceed any further, hear me speak."
    assert tiny_pair.tokenizer.decode(tiny_pair.tokenizer.encode(text)) == text


def test_vocabulary_mismatch_raises_naming_both_sizes(tiny_dirs):
    with pytest.raises(VocabularyMismatchError, match=r"307 tokens.*300 tokens"):
        load_pair((tiny_dirs["target"], tiny_dirs["odd_vocab"]), allow_custom=True)


def test_custom_folders_need_opt_in(tiny_dirs, monkeypatch):
    monkeypatch.delenv("SPECDEC_ALLOW_CUSTOM_MODELS", raising=False)
    with pytest.raises(ModelLoadError, match="SPECDEC_ALLOW_CUSTOM_MODELS=1"):
        load_pair((tiny_dirs["target"], tiny_dirs["draft"]))
    monkeypatch.setenv("SPECDEC_ALLOW_CUSTOM_MODELS", "1")
    assert load_pair((tiny_dirs["target"], tiny_dirs["draft"])).name == "custom"


def test_unknown_preset_and_missing_weights(tmp_path):
    with pytest.raises(ModelLoadError, match="unknown model pair 'gpt5'.*embedded"):
        load_pair("gpt5")
    with pytest.raises(ModelLoadError, match="not found"):
        load_pair((tmp_path / "nope", tmp_path / "nope2"), allow_custom=True)


def test_hub_preset_offline_gives_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    with pytest.raises(
        ModelLoadError,
        match="'gpt2' are not in the local Hugging Face cache and the Hub is unreachable",
    ) as info:
        load_pair("gpt2")
    assert info.value.code == "hub_unreachable"


def test_presets_and_default():
    assert set(PRESETS) == {
        "embedded",
        "embedded-zh",
        "gpt2",
        "gpt2-medium",
        "gpt2-large",
        "gpt2-xl",
    }
    assert PRESETS["gpt2"].target == "gpt2" and PRESETS["gpt2"].draft == "distilgpt2"
    name, reason = default_pair_name()
    assert (name, reason) in {("embedded", "gpt2_not_cached"), ("gpt2", "gpt2_cached")}
