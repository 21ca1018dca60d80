"""The teacher's answers chart woken by the push route: while a question is open, the
dashboard holds one WebSocket to ``/_specdec/live?room=CODE&lang=votes``
(:mod:`specdec_core.server.live_push`), which sends the room's version on every change
(an answer included). A small bidirectional component (``st.components.v2``) compares it
with the version the dashboard last drew and asks for a rerun of the dashboard's fragment
(the trigger ``changed``) when it is newer: at once, then again only once that run has
drawn (a rerun asked during a run would restart it: on a busy server the chart would
never finish) and at most once every :data:`GAP_MS` (the last answer always drawn). So an answer
reaches the chart in about one store poll of the hub (0.1 s) plus one dashboard run,
instead of up to the dashboard's one-second poll, which stays as the fallback (a socket
that cannot connect retries with back-off, 0.5 … 16 s, and costs nothing else).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.server.live_push import PATH, VOTES
from specdec_core.ui.live.push_socket import JS as SOCKET_JS

GAP_MS = 250  # at most one dashboard rerun a quarter second while answers arrive

JS = (
    SOCKET_JS
    + r"""
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  const fresh = !parentElement.__votes;
  const live = parentElement.__votes || (parentElement.__votes = { newest: 0, asked: 0 });
  live.trigger = setTriggerValue;
  if (fresh) setTriggerValue('changed', -1);  // the first trigger's dearer rerun: now
  live.drawn = Number(data.v);
  live.gap = Number(data.gap_ms);
  live.busy = false;  // this render ends the run asked for: the next may be asked
  clearTimeout(live.guard);
  live.fire = () => {
    if (live.busy || live.timer || !(live.newest > live.drawn) || live.asked >= live.newest) {
      return;
    }
    live.asked = live.newest;
    live.busy = true;  // never a rerun on top of a running one (it would restart it)
    live.trigger('changed', live.newest);
    live.guard = setTimeout(() => { live.busy = false; live.fire(); }, 3000);
    live.timer = setTimeout(() => { live.timer = null; live.fire(); }, live.gap);
  };
  live.fire();
  hold(live, data, '', (m) => {
    if (typeof m.v !== 'number') return;
    live.delay = 500;
    live.newest = Math.max(live.newest, m.v);
    live.fire();
  }, () => true);
  return release(live, parentElement);
}
"""
)

_COMPONENT: Callable | None = None


def _component() -> Callable:
    global _COMPONENT
    if _COMPONENT is None:
        _COMPONENT = st.components.v2.component("specdec_live_votes", js=JS)
    return _COMPONENT


def _changed() -> None:
    """The trigger's callback: nothing to do, the fragment's rerun reads the store."""


def watch(code: str, version: int) -> None:
    """Mount the votes socket of room ``code`` inside the dashboard's fragment; ``version``:
    the room version this run drew (a newer one on the socket reruns the fragment)."""
    _component()(
        data={"room": code, "lang": VOTES, "path": PATH, "v": int(version), "gap_ms": GAP_MS},
        key="live_votes_push",
        on_changed_change=_changed,
    )
