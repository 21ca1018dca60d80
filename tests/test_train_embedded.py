"""End-to-end check of the embedded-pair training recipe on a tiny budget (~5 s)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specdec_core.training.corpus import EOS
from specdec_core.training.embedded import main
from specdec_core.training.loop import DEFAULT_CORPUS

LINE = "ROMEO:\nBut, soft! what light through yonder window breaks?  It is the east, 'tis…"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    if not DEFAULT_CORPUS.exists():
        pytest.skip(f"corpus not found: {DEFAULT_CORPUS}")
    tmp = tmp_path_factory.mktemp("embedded")
    corpus = tmp / "corpus.txt"
    corpus.write_bytes(DEFAULT_CORPUS.read_bytes()[:20_000])
    out = tmp / "out"
    report = main(
        [
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            "--vocab-size",
            "300",
            "--context",
            "32",
            "--target-layers",
            "1",
            "--target-width",
            "32",
            "--target-heads",
            "2",
            "--draft-layers",
            "1",
            "--draft-width",
            "32",
            "--draft-heads",
            "2",
            "--batch",
            "4",
            "--max-steps",
            "3",
        ]
    )
    return out, report


def test_files_written(trained: tuple[Path, dict]) -> None:
    out, report = trained
    for role in ("target", "draft"):
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            assert (out / role / name).is_file(), f"{role}/{name} missing"
    assert json.loads((out / "training_report.json").read_text()) == json.loads(
        json.dumps(report, default=str)
    )


def test_tokenizer_round_trip(trained: tuple[Path, dict]) -> None:
    out, _ = trained
    for role in ("target", "draft"):
        tok = AutoTokenizer.from_pretrained(out / role)
        ids = tok.encode(LINE)
        assert ids, "empty encoding: the tokenizer was built without its model"
        assert tok.decode(ids) == LINE
        assert tok.eos_token == EOS
        assert tok.eos_token_id == tok.convert_tokens_to_ids(EOS) == 0


def test_models_load_and_match(trained: tuple[Path, dict]) -> None:
    out, report = trained
    target = AutoModelForCausalLM.from_pretrained(out / "target", dtype=torch.float32)
    draft = AutoModelForCausalLM.from_pretrained(out / "draft", dtype=torch.float32)
    assert target.dtype == draft.dtype == torch.float32
    assert target.config.vocab_size == draft.config.vocab_size == report["vocab_size"]
    assert target.config.eos_token_id == draft.config.eos_token_id == report["eos_token_id"] == 0
    assert target.config.n_positions == draft.config.n_positions == 32
    logits = target(input_ids=torch.tensor([[0, 1, 2]])).logits  # (1, 3, V)
    assert logits.shape == (1, 3, report["vocab_size"])
    assert torch.isfinite(logits).all()


def test_report(trained: tuple[Path, dict]) -> None:
    _, report = trained
    assert report["target"]["steps"] == report["draft"]["steps"] == 3
    assert report["train_tokens"] > 0 and report["val_tokens"] > 0
    assert len(report["corpus_sha256"]) == 64 and report["corpus_bytes"] == 20_000
    for key in ("target_val_ppl", "draft_val_ppl"):
        assert math.isfinite(report[key]) and 1.0 < report[key]
    assert 0.0 <= report["draft_target_top1_agreement"] <= 1.0
