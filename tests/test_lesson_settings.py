"""The one conversion between a lesson state and a session's settings (lessons/link.py:
``SETTINGS``, ``LessonState.config`` and ``LessonState.with_config``): which settings a link
carries, and a round trip with every one of them away from its default."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import fields

from specdec_core.core.grammar import GrammarSpec
from specdec_core.core.settings import SessionConfig
from specdec_core.lessons.link import SETTINGS, LessonState, decode, encode


def test_the_table_is_every_setting_a_state_shares_with_a_session():
    session = {f.name for f in fields(SessionConfig)}
    state = {f.name for f in fields(LessonState)}
    assert set(SETTINGS) == session & state
    # what a link does not carry (a new session setting must be added here or to SETTINGS)
    assert session - set(SETTINGS) == {
        "acceptance",  # lossy rules: the CLI only
        "acceptance_delta",
        "acceptance_epsilon",
        "acceptance_top_k",
        "repropose_after_edit",
        "stop_strings",
        "top_n",
    }


def test_every_setting_survives_state_to_config_to_state_and_the_url():
    config = SessionConfig(
        gamma=3,
        temperature=0.7,
        top_k=20,
        top_p=0.9,
        draft_method="greedy",
        seed=11,
        max_new_tokens=17,
        repetition_penalty=1.3,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        no_repeat_ngram_size=2,
        grammar=GrammarSpec("regex", "[a-z ]+"),
        gamma_schedule="confidence",
        confidence=0.25,
        verification="block",
    )
    default = SessionConfig()
    assert all(getattr(config, n) != getattr(default, n) for n in SETTINGS)
    state = LessonState(prompt="ROMEO:", round=2).with_config(config)
    assert state.grammar == ("regex", "[a-z ]+")
    assert (state.prompt, state.round) == ("ROMEO:", 2)  # the position is untouched
    assert state.config() == config
    back, problems = decode(encode(state), ["embedded"])
    assert problems == [] and back == state and back.config() == config


def test_the_sidebar_holds_every_link_setting_in_one_widget_but_the_grammar():
    """The UI side of the walk: a link seeds these widget keys and the sidebar reads them
    back (ui/sidebar.SETTING_WIDGETS); the grammar has its own two widgets."""
    from specdec_core.ui.sidebar import SETTING_WIDGETS
    from specdec_core.ui.step.links import LINK_WIDGETS

    assert set(SETTINGS) - set(SETTING_WIDGETS) == {"grammar"}
    assert set(SETTING_WIDGETS) <= set(SETTINGS)
    assert len(set(SETTING_WIDGETS.values())) == len(SETTING_WIDGETS)  # one key each
    extra = LINK_WIDGETS
    assert not set(extra) & set(SETTINGS)
    assert extra == {
        "drafter": "cfg_drafter",
        "pair": "pair_name",
        "lang": "lang",
        "presenter": "presenter",
    }
    assert not set(extra.values()) & set(SETTING_WIDGETS.values())  # no widget seeded twice


def test_the_sidebar_reports_exactly_the_settings_a_link_seeds(embedded_pair, monkeypatch):
    """config → widgets (seed_settings) → config (current_config): one table both ways,
    every setting away from its default, the grammar in its custom text box."""
    from types import SimpleNamespace

    from specdec_core.ui import sidebar, sidebar_processors

    ns = SimpleNamespace(session_state={})
    monkeypatch.setattr(sidebar, "st", ns)
    monkeypatch.setattr(sidebar_processors, "st", ns)
    config = SessionConfig(
        gamma=3,
        temperature=0.7,
        top_k=20,
        top_p=0.9,
        draft_method="greedy",
        seed=11,
        max_new_tokens=17,
        repetition_penalty=1.3,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        no_repeat_ngram_size=2,
        grammar=GrammarSpec("regex", "[a-z ]+"),
        gamma_schedule="confidence",
        confidence=0.25,
        verification="block",
    )
    sidebar.seed_settings(config)
    assert ns.session_state["cfg_grammar"] == "regex"
    assert ns.session_state["cfg_grammar_text"] == "[a-z ]+"
    assert sidebar.current_config(embedded_pair) == config


def test_an_old_link_opens_token_wise_and_a_block_link_round_trips():
    """A link made before the setting has no ``verification``: token-wise, as it was made
    (no problem reported); ``block`` survives the URL; with a tree it is dropped (a tree
    verifies token-wise) and said."""
    old, problems = decode(encode(LessonState(prompt="ROMEO:", temperature=1.0)), ["embedded"])
    assert problems == [] and old.verification == "token"
    assert old.config().verification == "token"
    block = LessonState(prompt="ROMEO:", temperature=1.0, verification="block")
    back, problems = decode(encode(block), ["embedded"])
    assert problems == [] and back.config().verification == "block"
    tree = LessonState(prompt="ROMEO:", temperature=1.0, verification="block", tree=(2, 1))
    back, problems = decode(encode(tree), ["embedded"])
    assert back.verification == "token" and back.tree == (2, 1)
    assert [(p.code, p.params) for p in problems] == [("bad_value", {"name": "verification"})]
    bad = {**encode(block)}
    raw = json.dumps({"prompt": "ROMEO:", "verification": "blocky"}).encode()
    bad["s"] = base64.urlsafe_b64encode(zlib.compress(raw)).rstrip(b"=").decode()
    back, problems = decode(bad, ["embedded"])
    assert back.verification == "token" and problems[0].params == {"name": "verification"}
