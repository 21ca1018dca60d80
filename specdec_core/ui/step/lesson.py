"""The step-through lesson's state, kept outside widget keys, and its restart decisions.

Streamlit drops a page's widget state when another page is shown, so the prompt box alone
cannot hold the lesson: :class:`Lesson` (in ``st.session_state["lesson"]``, not a widget
key) keeps the prompt, the session and its original prompt boundary, and
:func:`seed_prompt` re-seeds the prompt box from it when the page is shown again.

:func:`sync` decides what the inputs on screen mean for the session:

* same pair, same prompt, same settings: nothing to do;
* only the settings changed: the session continues from its committed text with the new
  settings (the round in flight is dropped), keeping the *original* prompt boundary, so
  any number of settings changes keep the committed text;
* the prompt or the pair changed (or the session had finished): a new session from the
  prompt;
* the prompt on screen is not usable: the old session is kept but ``blocked``.

Every restart that loses something visible comes with a notice (a string key and its
arguments, e.g. which round in flight was dropped): nothing is reset silently. Button
callbacks call :func:`sync` before acting, so a click that also carries an edit of the
prompt box (typed without Ctrl+Enter) acts on the edited prompt at once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import streamlit as st

from specdec_core.core.errors import SpecDecError
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import DRAFTER_NAMES, make_named_drafter
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.session import TreeSession
from specdec_core.ui.guards import prompt_ids
from specdec_core.ui.i18n import t

KEY = "lesson"
PROMPT_KEY = "st_prompt"
LOCK_KEY = "_engine_lock"
#: Set by the step page's own callbacks (a step, an edit, step back): the next run follows
#: an action of the user's own, not a replayed lesson (``ui/live/follow.own_actions``).
OWN_ACTION = "step_own_action"
#: How long a script run waits for its own session's previous action (seconds). Past it a
#: click is dropped with a message and the panel says it is still busy: never two threads
#: in one session's engine at once.
LOCK_WAIT_S = 5.0
_lock_creation = threading.Lock()  # two first runs of one session must get one lock


# ------------------------------------------------------------------ one action at a time
# A client can send full-page reruns faster than a step runs (≥ 5 a second). With
# Streamlit's fastReruns each one stops the running script only at its next Streamlit call
# and starts a *new* script thread at once, so a second thread entered the step action
# while the first was inside a forward: an IndexError in verify, mismatched cache sizes,
# the tab stuck until Reset. Every engine action of a session and every drawing of its
# session therefore runs under that session's lock.
def engine_lock(state: MutableMapping[str, Any] | None = None) -> threading.RLock:
    """The session's engine lock (kept in its session state, created once, race-free).
    Reentrant: a callback that syncs and then steps takes it twice in one thread."""
    S = st.session_state if state is None else state
    lock = S.get(LOCK_KEY)
    if lock is None:
        with _lock_creation:
            lock = S.get(LOCK_KEY)
            if lock is None:
                lock = S[LOCK_KEY] = threading.RLock()
    return lock


@contextmanager
def engine(state: MutableMapping[str, Any] | None = None) -> Iterator[bool]:
    """Hold the session's engine lock: yields ``True`` once held, ``False`` when another
    thread of this session still held it after :data:`LOCK_WAIT_S` (then do nothing)."""
    lock = engine_lock(state)
    held = lock.acquire(timeout=LOCK_WAIT_S)
    try:
        yield held
    finally:
        if held:
            lock.release()


def one_at_a_time(action: Callable[..., Any]) -> Callable[..., Any]:
    """A button callback that runs under :func:`engine`; a click that cannot get the lock
    is dropped with the message ``busy_click_dropped`` (as ``step_notice``)."""

    @functools.wraps(action)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with engine() as held:
            if not held:
                st.session_state["step_notice"] = t("busy_click_dropped")
                return None
            return action(*args, **kwargs)

    return locked


def own_action() -> None:
    """From a step-page callback: say "this is the user's own action" (:data:`OWN_ACTION`)."""
    st.session_state[OWN_ACTION] = True


@dataclass
class Lesson:
    """A lesson of the step page: the chain's (``shape == ()``) or the tree's."""

    session: SpeculativeSession | TreeSession
    prompt: str  # the text the session's prompt came from
    pair_name: str
    config: SessionConfig
    prompt_len: int  # original prompt boundary (kept across settings changes)
    drafter: str = "model"  # the draft source (sidebar ``cfg_drafter``)
    shape: tuple[int, ...] = ()  # the tree's branching per depth; () for the chain


@dataclass
class Sync:
    lesson: Lesson | None
    blocked: bool = False  # the prompt on screen could not start a session
    error: SpecDecError | None = None
    notice: str | None = None  # a string key (``st_settings_continue`` …)
    notice_args: dict | None = None  # its format arguments


def drafter_name() -> str:
    """The draft source chosen in the sidebar (``model`` unless set)."""
    name = st.session_state.get("cfg_drafter", "model")
    return name if name in DRAFTER_NAMES else "model"


def store_replayed(session: SpeculativeSession, prompt: str, pair_name: str, drafter: str) -> None:
    """Make a replayed session (a lesson link, a scenario, step back) the lesson."""
    _store(Lesson(session, prompt, pair_name, session.config, session.prompt_len, drafter))


def current() -> Lesson | None:
    return st.session_state.get(KEY)


def current_session() -> SpeculativeSession | None:
    """The lesson's session (also kept as ``step_session`` for other pages and tests)."""
    return st.session_state.get("step_session")


def _store(lesson: Lesson) -> Lesson:
    st.session_state[KEY] = lesson
    st.session_state["step_session"] = lesson.session
    st.session_state.pop("step_preview", None)
    return lesson


def seed_prompt(default: str) -> None:
    """Put the lesson's prompt (or ``default``) back into the prompt box if Streamlit
    dropped the widget's state (another page was shown)."""
    if PROMPT_KEY not in st.session_state:
        lesson = current()
        st.session_state[PROMPT_KEY] = lesson.prompt if lesson is not None else default


def start(
    pair: ModelPair,
    config: SessionConfig,
    prompt: str,
    ids: list[int] | None = None,
    prompt_len: int | None = None,
) -> Lesson:
    """A new chain lesson from ``prompt``, or continuing from committed ``ids`` (e.g. the
    tree mode's) with the original prompt boundary ``prompt_len``. Raises
    ``SpecDecError`` (the old lesson is kept)."""
    if ids is None or prompt_len is None:
        ids = prompt_ids(pair, prompt, PROMPT_KEY)
        prompt_len = len(ids)
    drafter = drafter_name()
    session = SpeculativeSession(
        pair, list(ids), config, make_named_drafter(pair, drafter), prompt_len=prompt_len
    )
    return _store(Lesson(session, prompt, pair.name, config, prompt_len, drafter))


def in_flight(session: SpeculativeSession | TreeSession) -> int | None:
    """The 1-based number of the round in flight (proposed, not committed), else ``None``."""
    return session.round_index + 1 if session.phase in ("verify", "commit") else None


@dataclass(frozen=True)
class Shape:
    """A verification shape's part in :func:`sync` (the chain's :data:`CHAIN`, the tree's
    ``tree_lesson.TREE``).

    ``current()``: the shape's lesson (or ``None``). ``unchanged(lesson, config)``:
    whether the lesson was made with the settings on screen (the tree ignores γ and reads
    its shape box). ``start(pair, config, prompt, ids, prompt_len)``: a new lesson from
    the prompt (``ids is None``) or from committed ``ids`` with the original prompt
    boundary; raises ``SpecDecError``. ``first(pair, config, prompt)``: the sync when there
    is no lesson yet."""

    name: Literal["chain", "tree"]
    current: Callable[[], Lesson | None]
    unchanged: Callable[[Lesson, SessionConfig], bool]
    start: Callable[[ModelPair, SessionConfig, str, list[int] | None, int | None], Lesson]
    first: Callable[[ModelPair, SessionConfig, str], Sync]


def sync(pair: ModelPair, config: SessionConfig, prompt: str, shape: Shape | None = None) -> Sync:
    """Bring the lesson of ``shape`` (the chain's by default) in line with the pair,
    settings and prompt on screen; the notices are the same for both shapes."""
    shape = CHAIN if shape is None else shape
    lesson = shape.current()
    try:
        if lesson is None:
            return shape.first(pair, config, prompt)
        old = lesson.session
        flight = in_flight(old)
        busy = bool(old.history) or flight is not None
        if lesson.pair_name == pair.name and lesson.prompt == prompt:
            if shape.unchanged(lesson, config):
                return Sync(lesson)
            if old.stop_reason is None and len(old.ids) > lesson.prompt_len:
                # the committed text stays "generated": the original prompt boundary is kept
                new = shape.start(pair, config, prompt, list(old.ids), lesson.prompt_len)
                key = "st_settings_dropped" if flight else "st_settings_continue"
                return Sync(new, notice=key, notice_args={"r": flight})
            new = shape.start(pair, config, prompt, None, None)
            if not busy:
                return Sync(new)
            key = "st_settings_dropped_restart" if flight else "st_settings_changed"
            return Sync(new, notice=key, notice_args={"r": flight})
        new = shape.start(pair, config, prompt, None, None)
        if not busy:
            return Sync(new)
        key = "st_settings_changed" if lesson.pair_name != pair.name else "st_prompt_changed"
        return Sync(new, notice=key, notice_args={"r": flight, "n": len(old.history)})
    except SpecDecError as exc:
        return Sync(lesson, blocked=lesson is not None, error=exc)


CHAIN = Shape(
    name="chain",
    current=current,
    unchanged=lambda lesson, config: lesson.config == config and lesson.drafter == drafter_name(),
    start=start,
    first=lambda pair, config, prompt: Sync(start(pair, config, prompt)),
)
