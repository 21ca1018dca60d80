"""Which *run* of the step lesson a room's state is in, so a question stays with the run
it was asked in. A run: the prompt, the pair, the settings, the drafter, the chain or tree
shape and the tokens carried over (``LessonState.cont``); the round, the phase, the edits,
the language and presenter mode move *within* a run. A chain ↔ tree switch or a settings
change starts a new one (``lessons/link``: the new state carries the committed tokens in
``cont``).

:func:`with_run` stamps a question asked on the step page with its run's key (a param
``run``); :func:`in_run` drops a stamped question from a view whose step state is in
another run: the followers' screens no longer show it (the teacher's own reads keep it,
so a late reveal still records its outcome; its result stays in the room's results). The
Lessons page, a new room or an unreadable state keeps what it has.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace

from specdec_core.lessons.link import LINK_PAIR, unpack_state
from specdec_core.server.room_types import Question, RoomView

RUN_PARAM = "run"
#: LessonState fields that move within one run
WITHIN_RUN = frozenset({"page", "lang", "round", "phase", "edits", "presenter"})
MAX_PARAMS = 8  # Question's bound


def run_key(page: str, state: Mapping[str, str]) -> str | None:
    """A 16-hex key of the run ``state`` (a lesson link's query parameters) on ``page`` is
    in; ``None`` off the step page, for a new room's empty state or an unreadable one.
    The pair a link leaves out (its language's default) is put in, so a language switch is
    no new run."""
    packed = state.get("s")
    data = unpack_state(packed) if isinstance(packed, str) and page == "step" else None
    if data is None:
        return None
    kept = {k: v for k, v in data.items() if k not in WITHIN_RUN}
    kept.setdefault("pair", LINK_PAIR.get(str(state.get("lang")), "embedded"))
    text = json.dumps(kept, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def with_run(question: Question, view: RoomView) -> Question:
    """``question`` stamped with the run of ``view``'s state (the room when it is asked);
    unchanged without a run, or when its params are full or name a run already."""
    key, params = run_key(view.page, view.state), tuple(question.params)
    if key is None or len(params) >= MAX_PARAMS or any(n == RUN_PARAM for n, _ in params):
        return question
    return replace(question, params=(*params, (RUN_PARAM, key)))


def _asked_in(question: Question | None, key: str) -> bool:
    if question is None:
        return True
    asked = dict(question.params).get(RUN_PARAM)
    return asked is None or asked == key


def in_run(view: RoomView) -> RoomView:
    """``view`` less its question (and the paused one) when it was asked in another run
    than the view's step state: after a switch it is gone from the followers' screens."""
    key = run_key(view.page, view.state)
    if key is None or (_asked_in(view.question, key) and _asked_in(view.held, key)):
        return view
    held = view.held if _asked_in(view.held, key) else None
    if _asked_in(view.question, key):
        return replace(view, held=held)
    return replace(view, question=None, held=held, counts=(), answered=0, first=())
