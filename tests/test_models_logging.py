"""Importing the engine leaves transformers' global logging alone; loading is quiet."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

SCRIPT = """
from transformers.utils import logging as hf
before = (hf.get_verbosity(), hf.is_progress_bar_enabled())
import specdec_core.core.models as m
after_import = (hf.get_verbosity(), hf.is_progress_bar_enabled())
with m.quiet_transformers():
    inside = (hf.get_verbosity(), hf.is_progress_bar_enabled())
after = (hf.get_verbosity(), hf.is_progress_bar_enabled())
print(before == after_import, inside == (hf.ERROR, False), before == after)
"""


def test_import_keeps_transformers_logging_and_quiet_block_restores_it():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "True", "True"]
