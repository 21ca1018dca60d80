"""A fresh clone runs its own tests: every data file the suite, the trainer and the
benchmarks read lives inside the repository, and the corpus is the documented one."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import CORPUS, REPO, TEXTBOOK_PATH

from specdec_core.training.corpus import CORPORA
from specdec_core.training.loop import DEFAULT_CORPUS

# Paths outside the repository that used to be read (built here, so this file is no hit).
OUTSIDE = [
    re.escape("../" + "shared"),
    re.escape("/work/" + "shared"),
    r"parents?\b[^\n]*/ *[\"']" + "shared",
]
SCANNED = ["tests", "specdec_core", "benchmarks", "pages", "app.py"]


def _measure_acceptance_corpus() -> Path:
    spec = importlib.util.spec_from_file_location(
        "measure_acceptance", REPO / "benchmarks" / "measure_acceptance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CORPUS


def _documented_sha256(name: str = "tinyshakespeare.txt") -> str:
    readme = (REPO / "data" / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}`"))
    return re.search(r"`([0-9a-f]{64})`", row).group(1)


@pytest.mark.parametrize(
    "name", ["conftest CORPUS", "conftest TEXTBOOK_PATH", "train_embedded", "measure_acceptance"]
)
def test_data_paths_resolve_inside_the_repo(name):
    path = {
        "conftest CORPUS": lambda: CORPUS,
        "conftest TEXTBOOK_PATH": lambda: TEXTBOOK_PATH,
        "train_embedded": lambda: DEFAULT_CORPUS,
        "measure_acceptance": _measure_acceptance_corpus,
    }[name]().resolve()
    assert path.is_relative_to(REPO.resolve()), path
    assert path.is_file(), path


def test_corpus_sha256_is_the_documented_one():
    digest = hashlib.sha256(CORPUS.read_bytes()).hexdigest()
    assert (
        digest
        == _documented_sha256()
        == ("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed")
    )


def test_chinese_corpus_sha256_is_the_documented_one():
    path = REPO / "data" / "poetry_zh.txt"
    assert path == CORPORA["embedded-zh"].path
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (
        digest
        == _documented_sha256("poetry_zh.txt")
        == ("f0fbb5517c7fb1abb806d9963bbef24d7e064c4494b3ed4773876352e5bd4c0c")
    )


def test_no_source_refers_to_a_path_outside_the_repo():
    pattern = re.compile("|".join(OUTSIDE))
    files = []
    for entry in SCANNED:
        root = REPO / entry
        files += [root] if root.is_file() else sorted(root.rglob("*"))
    hits = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in files
        if path.is_file() and path.suffix in {".py", ".md", ".json", ".toml", ".txt"}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert len(files) > 20
    assert hits == []
