"""A follower's screen fed by the push route (:mod:`specdec_core.server.live_push`): a small
bidirectional component (``st.components.v2``) holds one WebSocket to
``/_specdec/live?room=CODE&lang=…`` and draws each message's HTML (the teacher's frame,
drawn once by the teacher's screen in this language) itself, so a teacher's click costs
this session no script run. It asks Streamlit for a rerun of the follower's fragment only
when the screen must change otherwise (another page, a question opened or revealed, a
state without a frame, the room gone): the trigger ``moved``.

The HTML is sanitised in the browser before it is shown: only plain text elements (div,
span, table parts, headings, b, code, p, details, style) with ``class``, ``style`` (no
``url(``) and ``title`` attributes; everything else is dropped. The socket reconnects with
back-off (0.5 … 16 s); one socket per mounted component. A browser that cannot reach the
route at all (three closes before any message: a proxy without WebSockets) says
``nopush``: the tab then follows by its fragment's polls (:data:`NO_PUSH`).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.server.live_push import PATH
from specdec_core.ui.live.push_socket import JS as SOCKET_JS

JS = (
    SOCKET_JS
    + r"""
const TAGS = new Set(['DIV','SPAN','TABLE','THEAD','TBODY','TR','TH','TD','H4','B','CODE','P',
  'DETAILS','SUMMARY','STYLE','BR','SMALL']);
const ATTRS = new Set(['class', 'style', 'title']);
function clean(html) {
  const doc = new DOMParser().parseFromString('<body>' + html + '</body>', 'text/html');
  const walk = (node) => {
    for (const el of [...node.children]) {
      if (!TAGS.has(el.tagName)) { el.remove(); continue; }
      for (const a of [...el.attributes]) {
        if (!ATTRS.has(a.name) || (a.name === 'style' && /url\s*\(/i.test(a.value))) {
          el.removeAttribute(a.name);
        }
      }
      walk(el);
    }
  };
  walk(doc.body);
  const frag = document.createDocumentFragment();
  frag.append(...doc.body.childNodes);
  return frag;
}
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let box = parentElement.querySelector('.live-push');
  if (!box) {
    box = document.createElement('div');
    box.className = 'live-push';
    parentElement.appendChild(box);
  }
  const live = parentElement.__live || (parentElement.__live = {});
  live.trigger = setTriggerValue;
  live.box = box;
  const seat = data.seat ? '&seat=' + encodeURIComponent(data.seat) : '';
  const onMessage = (m) => {
    live.ok = true;
    if (m.fault) return;
    if (m.tab || m.seat) {  // the hub about this tab: its fragment runs once to see
      live.notes += 1;
      live.trigger('moved', (m.tab ? 'tab:' + m.tab : 'seat:' + m.seat) + ':' + live.notes);
      return;
    }
    if (m.ended) { live.trigger('moved', 'ended'); return; }
    live.delay = 500;
    if (typeof m.html === 'string') {
      live.box.replaceChildren(clean(m.html));
      live.box.dataset.state = String(m.s);
    } else {
      live.box.replaceChildren();  // a state without a frame: the page replays it
    }
    const key = m.page + '|' + m.q + (typeof m.html === 'string' ? '' : '|' + m.s);
    if (live.key !== key) { live.key = key; live.trigger('moved', key); }
  };
  const onClose = () => {
    live.failed = live.ok ? 0 : (live.failed || 0) + 1;
    if (live.failed < 3) return true;
    live.trigger('moved', 'nopush');  // never reached: this tab polls instead
    return false;
  };
  if (hold(live, data, seat, onMessage, onClose)) { live.key = data.key; live.notes = 0; }
  return release(live, parentElement);
}
"""
)

CSS = """
.live-push { font-family: "Source Sans Pro", "Noto Sans CJK SC", sans-serif; }
.live-push h4 { margin: 0.8rem 0 0.3rem 0; font-size: 1.1rem; }
.live-push .live-where { margin: 0.2rem 0 0.6rem 0; }
"""

NO_PUSH = "live_no_push"  # session key: this tab could not hold the push socket
_COMPONENT: Callable | None = None


def _component() -> Callable:
    global _COMPONENT
    if _COMPONENT is None:
        _COMPONENT = st.components.v2.component(
            "specdec_live_push", js=JS, css=CSS, isolate_styles=False
        )
    return _COMPONENT


def pushed(
    code: str, lang: str, key: str, on_moved: Callable[[], None], seat: str | None = None
) -> object:
    """Mount the push screen of room ``code`` in ``lang``. ``key``: what this run already
    shows (``page|question`` as the messages spell it): the component triggers ``moved``
    (``on_moved``, then a rerun of the fragment it sits in) only when a message differs,
    or the hub says something of this tab (``tab:…``, ``seat:refused``, ``seat:unsigned``).
    ``seat``: the signed seat (``server/live_push_seats.token``) the hub keeps alive.
    Returns the trigger of this run (``None`` when none; ``"nopush"``: the browser cannot
    hold the socket)."""
    data = {"room": code, "lang": lang, "path": PATH, "key": key, "seat": seat or ""}
    result = _component()(data=data, key="live_push", on_moved_change=on_moved)
    return getattr(result, "moved", None)
