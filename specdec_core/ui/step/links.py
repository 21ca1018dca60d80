"""Lesson links in the app: the URL keeps the lesson state, a fresh browser replays it,
and the step-through page gets scenarios, a copyable link with its QR code, export /
import of the trace, and step back.

Flow: :func:`load_from_url` runs first in ``app.py`` (once per browser session): it
decodes the query parameters (``lessons.link.decode``: untrusted input, validated), seeds
the sidebar's widget keys, and leaves the state for the step-through page to replay
(:func:`apply_pending`). :func:`write_url` runs last in ``app.py``: it writes the state
now on screen back into ``st.query_params`` (so a reload keeps everything, the language
too). Scenarios and step back go through :func:`request`, which sets the same keys from a
button callback and replays on the next run.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from urllib.parse import urlencode, urlsplit

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import advance, replay, state_of
from specdec_core.lessons.replay_steps import Replay
from specdec_core.lessons.scenarios import SCENARIOS, Found, find_scenarios
from specdec_core.server.pairs import offered_pairs
from specdec_core.ui.context import APP_RUNS
from specdec_core.ui.i18n import t
from specdec_core.ui.problems import keep, kept
from specdec_core.ui.sidebar import seed_settings
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_lesson as TL

log = logging.getLogger("specdec.links")
PENDING = "link_pending"  # a LessonState the step page replays on its next run
LOADED = "link_loaded"  # the URL of this browser session was read
PAGE = "link_page"  # the page the app is showing (set by each page)
FIRST_VISIT = "first_visit"  # opened on a bare URL (no lesson state) and not dismissed
EXTRA_PARAMS = "link_extra"  # (page, {name: value}): more query parameters that page keeps
ALWAYS_PARAMS = "link_always"  # {name: value}: kept on every page (a live class's ?room=)
#: What :func:`write_url` calls after writing: ``after(page, params)`` (a live class's
#: teacher publishes the lesson state on screen: ``ui/live/room.publisher()``).
AfterWrite = Callable[[str, dict[str, str]], None]

#: The other LessonState fields the sidebar shows: field → the widget key it seeds.
LINK_WIDGETS = {
    "drafter": "cfg_drafter",
    "pair": "pair_name",
    "lang": "lang",
    "presenter": "presenter",
}


def _seed_widgets(state: LessonState) -> None:
    """Put ``state`` into the widget keys (before the widgets are drawn). Its settings
    take one conversion, ``state.config()``; the page then replays with the settings the
    sidebar reports (:func:`apply_pending`), never converting them again."""
    S = st.session_state
    seed_settings(state.config())
    if S.get("pair_name") != state.pair or "pair_reason" not in S:
        S["pair_reason"] = "link"  # the sidebar's note: the link chose this pair
    for name, key in LINK_WIDGETS.items():
        S[key] = getattr(state, name)
    if state.prompt:
        S[L.PROMPT_KEY] = state.prompt
    TL.seed_link(state.tree)  # the step page's mode (chain | tree) and shape


def load_from_url() -> None:
    """Read the lesson state from the URL once per browser session (``app.py``, before the
    sidebar). Problems are kept for the page to show."""
    S = st.session_state
    if S.get(LOADED):
        return
    S[LOADED] = True
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    if not params:  # a bare URL: a first visit (app.py points it to the Lessons)
        S[FIRST_VISIT] = True
        return
    state, problems = decode(params, offered_pairs())
    if "s" not in params:  # a bare link (?lang=zh, ?presenter=1): nothing to replay
        if "lang" in params and state.lang in ("en", "zh"):
            S["lang"] = state.lang
        keep(problems)
        return
    _seed_widgets(state)  # values the linked pair cannot show: the sidebar resets them
    if state.prompt and (state.pair != "embedded" or state.page == "step_through"):
        S[PENDING] = state  # a state without a prompt has nothing to replay
    keep(problems)


def request(state: LessonState) -> None:
    """From a button callback: show ``state`` (seeds the widgets; the step page replays)."""
    _seed_widgets(state)
    st.session_state[PENDING] = state


class Busy(Exception):
    """Another thread of this tab held the engine for :data:`lesson.LOCK_WAIT_S`."""


def current_state(page: str) -> LessonState:
    """The state on screen now (settings from the sidebar, the lesson's position).

    Raises:
        Busy: another thread of this tab is still inside a step (callers holding the
            engine lock never see it: the lock is reentrant).
    """
    S = st.session_state
    config, pair = S.get("config"), S.get("pair")
    base = LessonState(
        page=page,
        lang=S.get("lang", "en"),
        pair=pair.name if pair else "embedded",
        drafter=S.get("cfg_drafter", "model"),
        presenter=bool(S.get("presenter", False)),
    )
    # under the engine lock: another script thread of this tab may be half-way through
    # a step (a commit moves the ids, the pending round and the history in turn, a reset
    # swaps the lesson), and a read in between is a state that never was
    with L.engine() as held:
        if not held:
            raise Busy
        lesson = L.current(TL.mode())
        if lesson is not None and lesson.pair_name == base.pair:
            return state_of(lesson.session, base, lesson.prompt)
    if config is not None:
        base = replace(base.with_config(config), prompt=S.get(L.PROMPT_KEY, ""))
    return base


def write_url(after: AfterWrite | None = None) -> None:
    """Write the state on screen into ``st.query_params`` (``app.py``, after the page),
    then call ``after(page, params)`` if given. A prompt too long for a link is left out
    (the link then opens the default prompt)."""
    try:
        state = current_state(st.session_state.get(PAGE, "step_through"))
    except Busy:
        return  # the step's own run writes the URL once it is done
    if len(state.prompt) > 1_000 or len(state.cont) > 1_024:
        state = replace(state, prompt="", cont=(), round=0, phase="propose", edits=())
    params = encode(state)
    page, extra = st.session_state.get(EXTRA_PARAMS, ("", {}))
    if page == state.page:  # e.g. the lessons page's ?chapter=N
        params = {**params, **extra}
    params = {**params, **st.session_state.get(ALWAYS_PARAMS, {})}
    if {k: st.query_params.get(k) for k in params} != params:
        st.query_params.from_dict(params)
    if after is not None:
        after(state.page, params)


DEFAULT_PAGE = "step_through"  # app.py's default page: served at the app's root URL


def page_url(current_url: str, current_page: str, page: str) -> str:
    """The URL of app page ``page`` (a ``pages/`` file stem) given the URL of the page on
    screen (``st.context.url``: no query string) and that page's stem. The default page
    lives at the app's root (``http://host/base/``), another at ``root + stem``; a proxy's
    base path is kept. ``current_url`` empty: ``http://localhost:8501/``."""
    base = (current_url or "http://localhost:8501/").split("?")[0].split("#")[0].rstrip("/")
    head, _, last = base.rpartition("/")
    if head.endswith(("http:/", "https:/")) or not head:
        head, last = base, ""  # no path: the URL is the app's root already
    if last and last in (current_page, DEFAULT_PAGE):
        base = head
    return f"{base}/" + ("" if page == DEFAULT_PAGE else page)


LOCAL_HOSTS = ("localhost", "0.0.0.0", "::1", "::")


def is_local_url(url: str) -> bool:
    """Whether ``url`` names this machine only (``localhost``, a loopback or unspecified
    address): a phone or another computer in the class cannot open it."""
    host = (urlsplit(url).hostname or "").lower()
    return host in LOCAL_HOSTS or host.endswith(".localhost") or host.startswith("127.")


def link_for(state: LessonState) -> str:
    """The shareable URL of ``state`` on this server: the page ``state.page`` (not the page
    on screen: the Lessons page links to the step-through page)."""
    current = st.session_state.get(PAGE, DEFAULT_PAGE)
    base = page_url(st.context.url or "", current, state.page)
    return f"{base}?{urlencode(encode(state))}"


def apply_pending(pair: ModelPair, config: SessionConfig, default_prompt: str) -> None:
    """On the step page, before the lesson syncs: replay a state from a link, a scenario
    or step back with ``config``, the settings the sidebar reports (seeded from that state
    by :func:`request` / :func:`load_from_url`, reset where the pair's widgets could not
    hold a value): the session is built from ``config`` itself, the state only records
    it. Keeps what the replay dropped for ``problems.show``."""
    S = st.session_state
    state: LessonState | None = S.pop(PENDING, None)
    if state is None or state.pair != pair.name:
        return
    state = state.with_config(config)  # the record (and the replay's cost) of config
    out = _advanced(pair, state, config) or replay(pair, state, config)
    problems = kept() + out.problems
    if out.session is None:  # the link's prompt could not start: the default prompt
        S[L.PROMPT_KEY] = default_prompt
    else:
        S[L.PROMPT_KEY] = state.prompt
        L.store_replayed(out.session, state.prompt, pair.name, state.drafter)
        TL.seed_link(out.state.tree)  # a tree the settings could not draft: the chain
    keep(problems)


def _advanced(pair: ModelPair, state: LessonState, config: SessionConfig) -> Replay | None:
    """``state`` reached by running only the missing steps on the lesson on screen (a live
    class's follower one teacher click behind, a scenario later in the same lesson):
    ``lessons.replay.advance``, the same result as a fresh replay; ``None`` when it
    cannot (the caller replays afresh, which also replaces a session left part-way)."""
    lesson = L.current("tree" if state.tree else "chain")
    if lesson is None or lesson.pair_name != pair.name or lesson.drafter != state.drafter:
        return None
    try:
        reached = state_of(lesson.session, state, lesson.prompt)
        return advance(pair, lesson.session, reached, state, config)
    except Exception:  # noqa: BLE001 - never expected: the fresh replay takes over
        log.exception("advance failed")
        return None


_scenario_lock = threading.Lock()
_scenarios: dict[str, list[Found]] = {}


def scenarios_ready(pair: ModelPair) -> bool:
    """Whether the scenarios of ``pair`` were already searched in this process."""
    return pair.name in _scenarios


def scenarios(pair: ModelPair) -> list[Found]:
    """The scenarios found on ``pair`` (searched once per process and pair, under a lock;
    a cache clear from a client cannot drop them). The search takes tens of seconds on a
    busy 2-core machine (42 s measured for the embedded pair): while it runs, a status box
    says which scenario is being tried, with a progress bar."""
    if pair.name in _scenarios:
        return _scenarios[pair.name]
    if not _scenario_lock.acquire(blocking=False):  # another session is searching
        with st.spinner(t("sc_searching_wait")):
            _scenario_lock.acquire()
    try:
        if pair.name not in _scenarios:
            _scenarios[pair.name] = _search_with_progress(pair)
        return _scenarios[pair.name]
    finally:
        _scenario_lock.release()


def search_scenarios(pair: ModelPair) -> list[Found]:
    """:func:`scenarios` drawing nothing: the server's warm-up thread (``ui/warmup.py``)
    searches them before a visitor asks (same lock and store, once per process and pair)."""
    with _scenario_lock:
        if pair.name not in _scenarios:
            _scenarios[pair.name] = list(find_scenarios(pair))
        return _scenarios[pair.name]


def _search_with_progress(pair: ModelPair) -> list[Found]:
    """:func:`find_scenarios` (a generator: one scenario a step) drawn as a status box with
    the scenario being tried and a progress bar."""
    started, n, found = time.perf_counter(), len(SCENARIOS), []
    with st.status(t("sc_searching"), expanded=True) as box:
        bar = st.progress(0.0)
        search = find_scenarios(pair)
        for i in range(n):
            name = t(f"sc_{SCENARIOS[i]}_title")
            bar.progress(i / n, text=t("sc_searching_one", i=i + 1, n=n, name=name))
            item = next(search, None)
            if item is None:
                break
            found.append(item)
        found.extend(search)  # a scenario beyond SCENARIOS' count (none today)
        bar.progress(1.0)
        label = t("sc_search_done", n=len(found), s=time.perf_counter() - started)
        box.update(label=label, state="complete", expanded=False)
    return found


@contextmanager
def fragment_run(key: str, after: AfterWrite | None = None) -> Iterator[bool]:
    """Around the body of the ``st.fragment`` ``key``: yields ``True`` on a fragment-only
    rerun (no full run of ``app.py`` since this fragment last ran), ``False`` inside a full
    run. After a fragment-only rerun it writes the lesson state into the URL (``app.py``'s
    ``write_url`` runs only in a full run; ``after`` as there, and before the body too) and,
    with ``SPECDEC_PROFILE`` set, logs the fragment's server time as ``app.py`` logs a full
    run's."""
    S = st.session_state
    seen = f"{key}__app_run"
    only = S.get(seen) == S.get(APP_RUNS, 0)
    S[seen] = S.get(APP_RUNS, 0)
    started = time.perf_counter()
    if only and after is not None:
        write_url(after)  # a live class's followers get a click's state before the panel redraws
    try:
        yield only
    finally:
        if only:
            write_url(after)
            if os.environ.get("SPECDEC_PROFILE"):
                ms = (time.perf_counter() - started) * 1e3
                print(f"specdec-render-ms {ms:.1f} fragment={key}", file=sys.stderr)
