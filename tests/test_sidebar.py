"""The shared sidebar: which pair is loaded and why, and the offline fallback."""

from __future__ import annotations

from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_default_pair_is_embedded_with_reason(embedded_pair):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert at.session_state["pair_name"] == "embedded"
    caption = " ".join(c.value for c in at.sidebar.caption)
    pair = at.session_state["pair"]  # the device the app reports, whichever it is
    device = f"GPU: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "CPU"
    assert pair.device_label() == device
    assert f"Loaded: **embedded** on {device} (4096 tokens, context 256)" in caption
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


def test_gamma_slider_follows_the_drafters_limit(embedded_pair):
    """γ 8 with the draft model, then the MTP heads chosen in the sidebar: γ drops to their
    K = 4 (the slider's max, with a one-line note), the step page proposes 4 drafts
    instead of refusing; back to the draft model the slider reaches 8 again."""
    import json

    from conftest import open_app

    links = json.loads((Path(APP).parent / "assets/strings/links.json").read_text("utf-8"))
    note = links["sb_gamma_capped"]["en"].format(cap=4)
    at = open_app(lang="en", state={"cfg_gamma": 8})
    [slider] = [s for s in at.sidebar.slider if s.key == "cfg_gamma"]
    assert (slider.value, slider.max) == (8, 8)
    at.sidebar.selectbox(key="cfg_drafter").set_value("mtp").run()
    assert not at.exception
    [slider] = [s for s in at.sidebar.slider if s.key == "cfg_gamma"]
    assert (slider.value, slider.max) == (4, 4) and at.session_state["cfg_gamma"] == 4
    assert note in [c.value for c in at.sidebar.caption]
    assert not at.error  # no "Nothing was changed" page
    for _ in range(2):  # round 1 has no hidden state yet; round 2 drafts K = 4
        next(b for b in at.button if b.label == "① Propose").click().run()
        if at.session_state["step_session"].steps.drafts:
            break
        next(b for b in at.button if b.label == "② Verify").click().run()
        next(b for b in at.button if b.label == "③ Commit / reject").click().run()
    assert len(at.session_state["step_session"].steps.drafts) == 4 and not at.error
    at.sidebar.selectbox(key="cfg_drafter").set_value("model").run()
    [slider] = [s for s in at.sidebar.slider if s.key == "cfg_gamma"]
    assert slider.max == 8 and note not in [c.value for c in at.sidebar.caption]


def test_a_link_seeding_every_setting_leaves_no_widget_default_warning(embedded_pair, monkeypatch):
    """A link that sets every sidebar number away from its first value: the widgets take
    their values from session state only, so Streamlit does not log "created with a
    default value but also had its value set via the Session State API" (it did for the
    temperature slider)."""
    from conftest import open_app

    from specdec_core.lessons.link import LessonState, encode

    state = LessonState(
        temperature=0.7, top_k=50, top_p=0.9, seed=5, max_new_tokens=40,
        gamma_schedule="confidence", confidence=0.5,
    )  # fmt: skip
    from streamlit.elements.lib import policies

    # the check runs only under a real server and warns once a process: make it run here
    warned: list[str] = []
    monkeypatch.setattr(policies.runtime, "exists", lambda: True)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *a, **k: warned.append(msg % a))
    at = open_app(encode(state), lang="en")
    assert not at.exception, at.exception
    config = at.session_state["config"]
    assert (config.temperature, config.top_k, config.top_p) == (0.7, 50, 0.9)
    assert (config.seed, config.max_new_tokens) == (5, 40)
    assert warned == []
