"""Who a live-class session is: its client (address) and its browser's seat credential.

The seat credential. A student's seat id is ``sha256(code | browser secret)``: the secret
is this browser's, never in a URL a student copies or a page shows, so a copied link opens
a seat of its own and a seat's answer cannot be read or changed from another browser, and
every tab and reload of one browser is one seat (one vote). The browser secret is the token
inside Streamlit's own ``_streamlit_xsrf`` cookie (set by every Streamlit server on the page
load, the same on every replica; ``streamlit run app.py`` alone has it), else nginx's
``specdec_route`` cookie (``deploy/nginx-specdec.conf``), else a random secret kept in this
session (no cookies: a reload is a new seat; the old one stops counting after the seat
TTL). A ``sid`` in an old link is ignored.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import secrets
from collections.abc import Mapping

import streamlit as st

from specdec_core.server.jobs import client_key

XSRF_COOKIE = "_streamlit_xsrf"
ROUTE_COOKIE = "specdec_route"
SECRET = "live_secret"  # this session's own secret when the browser sends no cookie
TAB = "live_tab"  # this tab's (session's) random id
_ROUTE = re.compile(r"[0-9a-f]{16,64}")


def cookies() -> dict[str, str]:
    """The cookies the browser sent with its websocket (``{}`` in a test)."""
    try:
        return dict(st.context.cookies or {})
    except Exception:  # noqa: BLE001 - no browser connection
        return {}


def xsrf_token(raw: str) -> str | None:
    """The token inside a Streamlit XSRF cookie (``2|mask|masked token|time``, hex; the
    mask changes on every page load, the token does not), as hex; ``None`` if malformed."""
    parts = raw.split("|")
    if len(parts) != 4 or parts[0] != "2" or len(parts[1]) != 8 or len(parts[2]) > 256:
        return None
    try:
        mask, masked = binascii.unhexlify(parts[1]), binascii.unhexlify(parts[2])
    except (binascii.Error, ValueError):
        return None
    token = bytes(b ^ mask[i % 4] for i, b in enumerate(masked))
    return token.hex() if len(token) >= 16 else None


def jar_secret(jar: Mapping[str, str]) -> str | None:
    """The browser secret a cookie jar holds: the XSRF cookie's token, else nginx's route
    cookie; ``None`` without either."""
    token = xsrf_token(jar.get(XSRF_COOKIE, "")[:600])
    if token:
        return "xsrf:" + token
    route = jar.get(ROUTE_COOKIE, "")
    return "route:" + route if _ROUTE.fullmatch(route) else None


def browser_secret() -> str:
    """This browser's secret (see the module docstring): :func:`jar_secret`, else this
    session's own random secret."""
    secret = jar_secret(cookies())
    return secret or st.session_state.setdefault(SECRET, "session:" + secrets.token_hex(16))


def seat_id(code: str, secret: str) -> str:
    """A student's seat id in room ``code``: 16 hex digits of ``sha256(code | secret)``
    (another room never sees the same id; the id does not give the secret away)."""
    return hashlib.sha256(f"{code}|{secret}".encode()).hexdigest()[:16]


def tab_id() -> str:
    """This tab's id: a random one kept in its session (one browser tab, one session)."""
    return st.session_state.setdefault(TAB, secrets.token_hex(8))


def client() -> str:
    """This session's client (its address, or the proxy's ``X-Real-IP`` from a trusted
    proxy: :func:`specdec_core.server.jobs.client_key`); a session with no browser
    connection (a test) is a client of its own."""
    own = f"session:{tab_id()}"
    try:
        peer, headers = st.context.ip_address, dict(st.context.headers or {})
    except Exception:  # noqa: BLE001 - no browser connection
        return own
    if peer is not None and not isinstance(peer, str):  # AppTest's stand-in
        return own
    return client_key(peer, headers, tab_id())
