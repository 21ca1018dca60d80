"""The device helpers: cuBLAS's deterministic workspace setting (``core/device.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specdec_core.core.device import cublas_workspace


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ":4096:8"),
        ({"SPECDEC_CUBLAS_WORKSPACE": "off"}, None),
        ({"SPECDEC_CUBLAS_WORKSPACE": " OFF "}, None),
        ({"SPECDEC_CUBLAS_WORKSPACE": ":16:8"}, ":16:8"),
        ({"CUBLAS_WORKSPACE_CONFIG": ":16:8", "SPECDEC_CUBLAS_WORKSPACE": ":4096:8"}, None),
    ],
)
def test_cublas_workspace_is_set_unless_switched_off_or_already_set(env, expected):
    assert cublas_workspace(env) == expected


def test_cublas_switch_reaches_the_environment_at_import():
    code = "import os, specdec_core.core.device; print(os.environ.get('CUBLAS_WORKSPACE_CONFIG'))"
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    off = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "SPECDEC_CUBLAS_WORKSPACE": "off"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    on = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (off, on) == ("None", ":4096:8")
