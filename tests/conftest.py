"""Shared fixtures: tiny random GPT-2 pairs saved with ``save_pretrained`` to a temp folder
and loaded through the same ``from_pretrained`` path as the real presets (offline)."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported

import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from specdec_core.core.models import EMBEDDED_DIR, ModelPair, load_pair

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

REPO = Path(__file__).resolve().parents[1]
TEXTBOOK_PATH = REPO / "tests" / "data" / "textbook.json"
CORPUS = REPO / "data" / "tinyshakespeare.txt"
TEXTBOOK = json.loads(TEXTBOOK_PATH.read_text(encoding="utf-8"))
EOS = "<|endoftext|>"


def _tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS.read_text()[:20000]], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS
    )


def save_tiny(
    folder: Path, tokenizer, layers: int, seed: int, n_positions: int = 64, vocab: int | None = None
) -> Path:
    torch.manual_seed(seed)
    config = GPT2Config(
        n_layer=layers,
        n_embd=32,
        n_head=2,
        vocab_size=vocab or len(tokenizer),
        n_positions=n_positions,
        bos_token_id=0,
        eos_token_id=0,
        initializer_range=0.3,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    """Folders: ``target`` (2 layers), ``draft`` (1 layer), ``short`` (target with a
    24-position context), ``odd_vocab`` (draft with a different vocabulary size)."""
    root = tmp_path_factory.mktemp("tiny")
    tok = _tokenizer(300)
    return {
        "target": save_tiny(root / "target", tok, 2, seed=1),
        "draft": save_tiny(root / "draft", tok, 1, seed=2),
        "short": save_tiny(root / "short", tok, 2, seed=1, n_positions=24),
        "odd_vocab": save_tiny(root / "odd", tok, 1, seed=3, vocab=len(tok) + 7),
    }


@pytest.fixture(scope="session")
def tiny_pair(tiny_dirs) -> ModelPair:
    return load_pair((tiny_dirs["target"], tiny_dirs["draft"]), device="cpu", allow_custom=True)


@pytest.fixture(scope="session")
def self_pair(tiny_dirs) -> ModelPair:
    """Draft == target: every greedy draft is accepted."""
    return load_pair((tiny_dirs["target"], tiny_dirs["target"]), device="cpu", allow_custom=True)


@pytest.fixture(scope="session")
def embedded_pair() -> ModelPair:
    assert (EMBEDDED_DIR / "target" / "config.json").is_file(), "embedded pair not built"
    return load_pair("embedded", device="cpu")


@pytest.fixture
def pair_arg(tiny_dirs, monkeypatch) -> str:
    """``--pair`` value for the tiny pair (custom folders allowed for this test)."""
    monkeypatch.setenv("SPECDEC_ALLOW_CUSTOM_MODELS", "1")
    return f"{tiny_dirs['target']},{tiny_dirs['draft']}"


def run_json(capsys, *args: str) -> dict:
    """Run the CLI in-process with ``--json`` output and parse it (exit status 0)."""
    from specdec_core.__main__ import main

    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


APP = str(REPO / "app.py")


def start_app(lang: str = "en"):
    """An ``AppTest`` of the app after its first run in ``lang`` (no exception)."""
    return open_app(lang=lang)


def click_button(at, label: str) -> None:
    """Click the enabled button labelled ``label`` and rerun (no exception)."""
    [button] = [b for b in at.button if b.label == label]
    assert not button.disabled, f"{label} is disabled"
    button.click().run()
    assert not at.exception, at.exception


class _TableParser(HTMLParser):
    """Cell texts of every ``<table>`` in an HTML string, with each table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(at, name: str) -> list[pd.DataFrame]:
    """The HTML tables of class ``name`` (e.g. ``kv-table``, ``checks-table``) that the
    last run drew with ``st.html``, in page order, as DataFrames of cell texts."""
    found = []
    for element in at.get("html"):
        parser = _TableParser()
        parser.feed(element.value)
        for classes, rows in parser.tables:
            if name in classes.split():
                found.append(pd.DataFrame(rows[1:], columns=rows[0]))
    return found


def open_app(
    params: dict[str, str] | None = None,
    *,
    lang: str | None = None,
    prompt: str | None = None,
    state: dict | None = None,
    timeout: float = 120,
):
    """The app in Streamlit's ``AppTest``, run once without an exception: ``params`` as
    URL query parameters, ``lang``, the step page's ``prompt`` and other session
    ``state`` set before the first run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if lang is not None:
        at.session_state["lang"] = lang
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if prompt is not None:
        at.session_state["st_prompt"] = prompt
    at.run()
    assert not at.exception, at.exception
    return at


click = click_button  # the name the page tests use


def shown_error(exc: Exception, lang: str | None = None) -> str:
    """The one error box the app's ``show_error`` draws for ``exc`` (in ``lang``)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(
        "import streamlit as st\n"
        "from specdec_core.ui.errors import show_error\n"
        "show_error(st.session_state['exc'])\n",
        default_timeout=30,
    )
    at.session_state["exc"] = exc
    if lang is not None:
        at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    [box] = at.error
    return box.value
