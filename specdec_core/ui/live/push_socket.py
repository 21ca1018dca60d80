"""The browser half both push components share (``push_view``: a follower's screen,
``push_votes``: the teacher's answers chart): one WebSocket to the push route per mounted
component, reopened with back-off (0.5 … 16 s) when it closes, never once the class ended
(the ``ended`` message, close code 4410).

``hold(live, data, extra, onMessage, onClose)`` (JavaScript, prepended to each component's
module): ``live`` is the component's own record (kept on its element across renders),
``data`` its ``path``, ``room`` and ``lang``, ``extra`` more query text; a render with the
same URL keeps the open socket (returns ``false``), a new URL closes the old one and opens
(returns ``true``). ``onMessage(m)`` gets each message parsed as JSON (others are dropped);
``onClose()`` returning ``false`` stops the reconnects. ``release(live, element)`` is the
component's cleanup: it closes the socket once the component's element has left the page
(a render that keeps the element keeps the socket)."""

from __future__ import annotations

JS = r"""
function hold(live, data, extra, onMessage, onClose) {
  const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
  const url = scheme + location.host + data.path + '?room=' + encodeURIComponent(data.room) +
    '&lang=' + encodeURIComponent(data.lang) + extra;
  if (live.url === url && live.ws && live.ws.readyState <= 1) return false;
  if (live.ws) { live.closing = true; live.ws.close(); }
  live.url = url; live.closing = false; live.ended = false; live.delay = 500;
  const open = () => {
    const ws = new WebSocket(url);
    live.ws = ws;
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m && m.ended) live.ended = true;  // the class ended: never reopened
      onMessage(m);
    };
    ws.onclose = (ev) => {
      if (ev.code === 4410) live.ended = true;  // live_push.CLOSE_ENDED
      if (live.ws !== ws || live.closing || live.ended || onClose() === false) return;
      setTimeout(open, live.delay);
      live.delay = Math.min(live.delay * 2, 16000);
    };
  };
  open();
  return true;
}
function release(live, element) {
  // the component's cleanup: a render of the same element keeps the socket, an element
  // gone from the page (unmounted) closes it
  return () => setTimeout(() => {
    if (!element.isConnected && live.ws) { live.closing = true; live.ws.close(); live.url = null; }
  }, 0);
}
"""
