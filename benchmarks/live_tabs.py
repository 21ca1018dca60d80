"""What a live-class tab's two push components do in the browser, for the Locust bots of
``benchmarks/locust_live.py`` (gevent, ``websocket-client``).

* :class:`PushTab` — a follower's screen (``ui/live/push_view``'s JS): after the page's
  first run it opens the push socket exactly as the component does
  (``ws://HOST`` + the component's ``path`` + ``?room=…&lang=…``, the page's route cookie),
  keeps every message, and sends the component's ``moved`` trigger (a rerun of the
  fragment the component sits in) when a message's ``page|q`` key (``|s`` added for a
  state without a frame) differs from the last, ``ended`` when the room is gone.
* :class:`VotesTab` — the teacher's answers chart (``ui/live/push_votes``'s JS): the
  votes socket (``lang=votes``); a ``changed`` trigger on mount, then when a version
  newer than the one the dashboard drew arrives, never while the last one's run has not
  drawn (3 s guard) and at most once every ``gap_ms``.

A trigger goes as the browser sends it: a ``rerun_script`` with every widget value the tab
holds plus the component's trigger aggregator (``$$STREAMLIT_INTERNAL_KEY_<id>__events``,
a JSON list of ``{"event", "value"}``), scoped to the component's fragment.
"""

from __future__ import annotations

import json
import re
import time
from urllib.parse import quote

import gevent
import websocket

PUSH, VOTES = "specdec_live_push", "specdec_live_votes"
STRIP = re.compile(r'<div class="strip" style="line-height:2.0">(.*?)</div>', re.S)


def strip_body(html: str) -> str:
    """The token strip's body in a page element or a pushed frame ('' when none): the
    tokens only (the legend is in the screen's language, the tokens are not)."""
    m = STRIP.search(html)
    return m.group(1) if m else ""


def trigger(client, comp: dict, event: str, value) -> float:
    """Send the component's trigger ``event`` as the browser does; returns the send time."""
    msg = client.rerun_msg()
    w = msg.rerun_script.widget_states.widgets.add()
    w.id = f"$$STREAMLIT_INTERNAL_KEY_{comp['id']}__events"
    w.json_trigger_value = json.dumps([{"event": event, "value": value}])
    msg.rerun_script.fragment_id = comp["fragment"]
    client.ws.send_binary(msg.SerializeToString())
    return time.time()


def _open(client, host: str, comp: dict) -> websocket.WebSocket:
    data = comp["data"]
    query = f"?room={quote(str(data['room']))}&lang={quote(str(data['lang']))}"
    if data.get("seat"):  # a follower's signed seat (the hub keeps it alive)
        query += f"&seat={quote(str(data['seat']))}"
    url = host.replace("http", "ws", 1) + data["path"] + query
    ws = websocket.create_connection(url, timeout=30, cookie=client.cookie or None)
    ws.settimeout(None)  # as the browser's: a quiet socket (an idle class) stays open
    return ws


class PushTab:
    """A follower's push component. ``on_message(time, message)`` gets every message."""

    def __init__(self, client, host: str, on_message) -> None:
        self.client, self.host, self.on_message = client, host, on_message
        self.comp = client.components[PUSH]
        self.key = self.comp["data"].get("key")
        self.triggers = 0
        self.ws = _open(client, host, self.comp)
        self.task = gevent.spawn(self._read)

    def _read(self) -> None:
        try:
            while True:
                raw = self.ws.recv()
                if not raw:
                    return
                now = time.time()
                try:
                    m = json.loads(raw)
                except ValueError:
                    continue
                self.on_message(now, m)
                if m.get("fault"):
                    continue
                comp = self.client.components.get(PUSH, self.comp)
                if m.get("ended"):
                    trigger(self.client, comp, "moved", "ended")
                    return
                html = isinstance(m.get("html"), str)
                key = f"{m.get('page')}|{m.get('q')}" + ("" if html else f"|{m.get('s')}")
                if key != self.key:
                    self.key = key
                    self.triggers += 1
                    trigger(self.client, comp, "moved", key)
        except (websocket.WebSocketException, OSError):
            return

    def close(self) -> None:
        self.task.kill(block=False)
        self.ws.shutdown()  # no close handshake: the server may not answer one


class VotesTab:
    """The teacher dashboard's votes component; :meth:`rendered` after every run that drew
    it (its ``v``: the version that run drew)."""

    GUARD_S = 3.0

    def __init__(self, client, host: str) -> None:
        self.client, self.host = client, host
        self.comp = client.components[VOTES]
        self.newest, self.asked, self.busy_until, self.next_at = 0, 0, 0.0, 0.0
        self.drawn = int(self.comp["data"]["v"])
        self.gap = float(self.comp["data"].get("gap_ms", 250)) / 1e3
        self.messages: list[tuple[float, int]] = []
        self.triggers = 0
        trigger(client, self.comp, "changed", -1)  # as the JS on a fresh mount
        self.ws = _open(client, host, self.comp)
        self.task = gevent.spawn(self._read)
        self.ticker = gevent.spawn(self._tick)

    def rendered(self) -> None:
        comp = self.client.components[VOTES]
        self.comp, self.drawn, self.busy_until = comp, int(comp["data"]["v"]), 0.0
        self.fire()

    def fire(self) -> None:
        now = time.time()
        if now < self.busy_until or now < self.next_at or not self.newest > self.drawn:
            return
        if self.asked >= self.newest or VOTES not in self.client.drawn_components:
            return
        self.asked = self.newest
        self.busy_until, self.next_at = now + self.GUARD_S, now + self.gap
        self.triggers += 1
        trigger(self.client, self.comp, "changed", self.newest)

    def _tick(self) -> None:
        while True:
            gevent.sleep(0.05)
            self.fire()

    def _read(self) -> None:
        try:
            while True:
                raw = self.ws.recv()
                if not raw:
                    return
                try:
                    v = json.loads(raw).get("v")
                except ValueError:
                    continue
                if isinstance(v, int):
                    self.messages.append((time.time(), v))
                    self.newest = max(self.newest, v)
                    self.fire()
        except (websocket.WebSocketException, OSError):
            return

    def close(self) -> None:
        self.task.kill(block=False)
        self.ticker.kill(block=False)
        self.ws.shutdown()  # no close handshake: the server may not answer one
