"""The shared sidebar: which pair is loaded and why, and the offline fallback."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_default_pair_is_embedded_with_reason(embedded_pair):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert at.session_state["pair_name"] == "embedded"
    caption = " ".join(c.value for c in at.sidebar.caption)
    assert "Loaded: **embedded** on CPU (4096 tokens, context 256)" in caption
    assert "not in the local Hugging Face cache" in caption


def test_unreachable_hub_preset_falls_back_to_embedded(embedded_pair):
    """gpt2 is not cached here and the hub is unreachable: notice + embedded pair, and the
    selection itself goes back to embedded (no retry on every rerun)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["pair_name"] = "gpt2"
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    assert at.session_state["pair"].name == "embedded"
    assert at.session_state["pair_name"] == "embedded"
    [warning] = at.sidebar.warning
    assert "无法加载 **gpt2**" in warning.value and "embedded" in warning.value
