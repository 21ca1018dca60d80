"""The step-through lesson's state, kept outside widget keys, and its restart decisions:
one store for both verification shapes (a chain's :class:`SpeculativeSession`, a tree's
:class:`TreeSession`).

Streamlit drops a page's widget state when another page is shown, so the prompt box alone
cannot hold the lesson: a :class:`Lesson` per shape (``st.session_state["lesson"]`` and
``["tree_lesson"]``, :func:`key`, not widget keys) keeps the prompt, the session and its
original prompt boundary, and :func:`seed_prompt` re-seeds the prompt box from it when the
page is shown again. :func:`start` makes either shape's lesson, :func:`store_replayed`
keeps a replayed session of either shape.

:func:`sync` decides what the inputs on screen mean for the session of a shape (its row of
``ui/step/shapes.SHAPES``: its mode and the tree shape a new lesson gets):

* same pair, same prompt, same settings: nothing to do;
* no lesson of that shape yet: a chain starts from the prompt, a tree continues from the
  chain lesson's committed text (:func:`enter`);
* only the settings changed (for a tree, γ plays no part): the session continues from its
  committed text with the new settings (the round in flight is dropped), keeping the
  *original* prompt boundary, so any number of settings changes keep the committed text;
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
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from specdec_core.core.errors import SpecDecError
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import DRAFTER_NAMES, make_named_drafter
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.session import Session
from specdec_core.engine.tree.generate import check_tree_settings
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.replay import TREE_BUDGET
from specdec_core.ui.guards import prompt_ids
from specdec_core.ui.i18n import t
from specdec_core.ui.words import Mode

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

    session: Session
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


def prefix(mode: Mode) -> str:
    """The prefix of a shape's keys: none for the chain (the first shape), the shape's
    name and ``_`` for another (``tree_lesson``, ``btn_tree_propose``)."""
    return "" if mode == "chain" else f"{mode}_"


def key(mode: Mode) -> str:
    """The session-state key of the lesson of ``mode`` (the chain's also kept as
    ``step_session``)."""
    return f"{prefix(mode)}lesson"


def current(mode: Mode = "chain") -> Lesson | None:
    """The lesson of the shape ``mode`` (``None`` before its first start)."""
    return st.session_state.get(key(mode))


def current_session() -> Session | None:
    """The chain lesson's session (also kept as ``step_session`` for other pages and tests)."""
    return st.session_state.get("step_session")


def store(lesson: Lesson) -> Lesson:
    """Make ``lesson`` its shape's lesson (a chain's also ``step_session``, its edit
    preview dropped)."""
    S = st.session_state
    S[key("tree" if lesson.shape else "chain")] = lesson
    if not lesson.shape:
        S["step_session"] = lesson.session
        S.pop("step_preview", None)
    return lesson


def store_replayed(session: Session, prompt: str, pair_name: str, drafter: str) -> None:
    """Make a replayed session of either shape (a lesson link, a scenario, step back) the
    lesson of its shape."""
    shape = tuple(session.steps.shape) if session.unit == "tree" else ()
    store(Lesson(session, prompt, pair_name, session.config, session.prompt_len, drafter, shape))


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
    shape: tuple[int, ...] = (),
) -> Lesson:
    """A new lesson from ``prompt``, or continuing from committed ``ids`` (the other
    shape's, or after a settings change) with the original prompt boundary
    ``prompt_len``: a chain for ``shape == ()``, else a tree of that shape (children per
    depth, :data:`~specdec_core.lessons.replay.TREE_BUDGET` nodes, so a link replays it).
    Raises ``SpecDecError`` (settings that cannot draft a tree, a bad prompt; the old
    lesson is kept)."""
    drafter = drafter_name()
    if shape:
        check_tree_settings(config, drafter)
    if ids is None or prompt_len is None:
        ids = prompt_ids(pair, prompt, PROMPT_KEY)
        prompt_len = len(ids)
    draft = make_named_drafter(pair, drafter)
    if shape:
        session: Session = TreeSession(
            pair, list(ids), config, draft, shape, TREE_BUDGET, prompt_len=prompt_len
        )
    else:
        session = SpeculativeSession(pair, list(ids), config, draft, prompt_len=prompt_len)
    return store(Lesson(session, prompt, pair.name, config, prompt_len, drafter, tuple(shape)))


def in_flight(session: Session) -> int | None:
    """The 1-based number of the round in flight (proposed, not committed), else ``None``."""
    return session.round_index + 1 if session.phase in ("verify", "commit") else None


def enter(pair: ModelPair, config: SessionConfig, prompt: str, shape: tuple[int, ...]) -> Sync:
    """A tree lesson of ``shape`` from the chain: continue from the chain lesson's committed
    text when it is the prompt on screen (and not finished), else start from the prompt.
    Raises ``SpecDecError``."""
    chain = current()
    if (
        chain is not None
        and chain.pair_name == pair.name
        and chain.prompt == prompt
        and chain.session.stop_reason is None
    ):
        ids = list(chain.session.ids)
        flight = in_flight(chain.session)
        new = start(pair, config, prompt, ids, chain.prompt_len, shape)
        n = len(ids) - chain.prompt_len
        if flight:
            return Sync(new, notice="tree_from_chain_dropped", notice_args={"n": n, "r": flight})
        return Sync(new, notice="tree_from_chain" if n else None, notice_args={"n": n})
    return Sync(start(pair, config, prompt, shape=shape))


def unchanged(lesson: Lesson, config: SessionConfig, shape: tuple[int, ...]) -> bool:
    """Whether ``lesson`` was made with the settings, drafter and tree ``shape`` on screen.
    γ plays no part in a tree round (the shape sets the depth): for a tree a γ change
    alone keeps the round in flight."""
    if shape:
        config = replace(config, gamma=lesson.config.gamma)
    return (lesson.config, lesson.drafter, lesson.shape) == (config, drafter_name(), shape)


def sync(
    pair: ModelPair,
    config: SessionConfig,
    prompt: str,
    mode: Mode = "chain",
    tree: tuple[int, ...] = (),
) -> Sync:
    """Bring the lesson of ``mode`` (the chain's with ``tree == ()``, else a tree of that
    shape: children per depth) in line with the pair, settings and prompt on screen; the
    notices are the same for both shapes."""
    lesson = current(mode)
    try:
        if lesson is None:
            return enter(pair, config, prompt, tree) if tree else Sync(start(pair, config, prompt))
        old = lesson.session
        flight = in_flight(old)
        busy = bool(old.history) or flight is not None
        if lesson.pair_name == pair.name and lesson.prompt == prompt:
            if unchanged(lesson, config, tree):
                return Sync(lesson)
            if old.stop_reason is None and len(old.ids) > lesson.prompt_len:
                # the committed text stays "generated": the original prompt boundary is kept
                new = start(pair, config, prompt, list(old.ids), lesson.prompt_len, tree)
                said = "st_settings_dropped" if flight else "st_settings_continue"
                return Sync(new, notice=said, notice_args={"r": flight})
            new = start(pair, config, prompt, shape=tree)
            if not busy:
                return Sync(new)
            said = "st_settings_dropped_restart" if flight else "st_settings_changed"
            return Sync(new, notice=said, notice_args={"r": flight})
        new = start(pair, config, prompt, shape=tree)
        if not busy:
            return Sync(new)
        said = "st_settings_changed" if lesson.pair_name != pair.name else "st_prompt_changed"
        return Sync(new, notice=said, notice_args={"r": flight, "n": len(old.history)})
    except SpecDecError as exc:
        return Sync(lesson, blocked=lesson is not None, error=exc)
