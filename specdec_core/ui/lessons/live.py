"""The live parts of the lessons: the scenarios of the step-through page (found on the
loaded pair, never hard-coded token ids), replayed to the moment a checkpoint asks about,
drawn with the house token strip and KV table, plus small fast-path runs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import GenerationResult, generate
from specdec_core.engine.session import Session
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import replay
from specdec_core.ui.i18n import t
from specdec_core.ui.render import StripItem, round_strip, token_strip_html
from specdec_core.ui.step.links import link_for, scenarios

LEGEND = ["accepted", "rejected", "discarded", "correction", "bonus"]


def scenario(pair: ModelPair, key: str) -> LessonState | None:
    """The scenario ``key`` on ``pair`` (stopped after Verify of its round), or ``None``
    when the bounded search did not find it on this pair (then the caller says so)."""
    return next((f.state for f in scenarios(pair) if f.key == key and f.state), None)


_replayed: OrderedDict[tuple, Session] = OrderedDict()
_replay_lock = threading.Lock()
MAX_REPLAYED = 24


def session_at(pair: ModelPair, state: LessonState, phase: str) -> Session:
    """A session replayed to ``state``'s round at ``phase`` (``verify``: drafts proposed,
    not yet checked; ``commit``: verified; ``committed``: the round committed). Kept per
    process (a few, least recently used dropped): the lessons only read it, never step it."""
    key = (pair.name, id(pair), state, phase)
    with _replay_lock:
        if key in _replayed:
            _replayed.move_to_end(key)
            return _replayed[key]
        out = replay(pair, replace(state, phase="commit" if phase == "committed" else phase))
        assert out.session is not None
        if phase == "committed":
            out.session.commit()
        _replayed[key] = out.session
        while len(_replayed) > MAX_REPLAYED:
            _replayed.popitem(last=False)
        return out.session


def context_html(session: Session, tail: int = 12) -> str:
    """The last ``tail`` committed tokens (prompt grey, generated blue) as a strip."""
    ids = session.ids
    start = max(0, len(ids) - tail)
    items = [
        StripItem(session.token(i), "prompt" if k < session.prompt_len else "committed")
        for k, i in enumerate(ids[start:], start)
    ]
    return ("…" if start else "") + token_strip_html(items, [])


def drafts_html(session: Session) -> str:
    """The round's drafted tokens, tentative (before Verify)."""
    return token_strip_html(
        [StripItem(session.token(y), "tentative") for y in session.steps.drafts], []
    )


def verified_html(session: Session) -> str:
    """The verified round in the house order with the legend."""
    v, record = session.steps.current_verify, session.current_record
    assert v is not None and record is not None
    return token_strip_html(round_strip(v, record), LEGEND)


def step_through_state(state: LessonState) -> LessonState:
    """``state`` as the step-through page opens it from a lesson: in the page's current
    language (a scenario's state is found once per process, in English)."""
    lang = st.session_state.get("lang", "en")
    return replace(state, page="step_through", lang=lang if lang in ("en", "zh") else "en")


def as_linked(pair: ModelPair, state: LessonState) -> LessonState:
    """``state`` exactly as its step-through link carries it (encoded, then decoded as the
    step page decodes it), so a chapter's numbers come from the moment its link opens."""
    linked, problems = decode(encode(step_through_state(state)), [pair.name])
    return state if problems else replace(linked, page=state.page, lang=state.lang)


def open_in_step_through(state: LessonState) -> None:
    """A link that opens ``state`` on the step-through page, in the page's language."""
    st.caption(t("ls_open_step", url=link_for(step_through_state(state))))


def run_pair(
    pair: ModelPair,
    prompt: str,
    tokens: int,
    temperature: float,
    seed: int,
    mode: str = "speculative",
    drafter: str = "model",
    knob: int | None = None,
) -> GenerationResult:
    """One small fast-path run (≤ 48 tokens: well under a second on the embedded pair)."""
    config = SessionConfig(temperature=temperature, seed=seed, max_new_tokens=min(tokens, 48))
    drafter_obj = None if mode != "speculative" else make_named_drafter(pair, drafter, knob)
    return generate(pair, prompt, config, mode=mode, drafter=drafter_obj)  # type: ignore[arg-type]
