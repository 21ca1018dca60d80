"""A live class's **frame**: one compact view of the teacher's step state, computed once
per room version by the teacher's own session and drawn by every follower as is, so a
follower shows the teacher's own numbers (identical by construction, on any device or
thread count) without replaying the lesson in its own session.

What a frame holds (plain JSON, language-neutral: the follower's screen translates the
labels): the token strip with each token's state (the chain's strip as
``chain_view._strip`` builds it, the tree's as ``tree_view._strip``), the checks of the
verified round (``p``, ``q``, ``a``, ``u``, the verdict, near ties; greedy: the target's
argmax), the chart rows of the position the teacher's chart shows (its
:class:`~specdec_core.core.trace.DistSlice`: token ids, ``p``, ``q``, ``min(p, q)``,
``[p − q]+`` and the "other" sums, float32 values written exactly; at block verification's
resampled position the block residual in place of ``[p − q]+``, with its weight ``p′``),
the KV-state table of both models (the rows the teacher's table shows), and for a tree the
drafted nodes with their states; ``html``: all that drawn once per language by the
teacher's screen, for the followers whose screens take it over the push channel
(``server/live_push``). The open question travels in the room's own view, not here.

Flow: :func:`publish_frame` (the teacher's ``room.publish``, before the state itself, so a
follower that reads the new state finds its frame) builds the frame under the engine lock,
checks it is of the very state being published (else publishes none: the followers then
replay that state as before), and stores it with the state's :func:`state_digest`.
:func:`frame_for` (a follower) reads it once per process and digest (:data:`_CACHE`,
bounded); :mod:`~specdec_core.ui.live.frame_view` draws it.

Bounds: a frame is at most :data:`~specdec_core.server.room_frames.MAX_FRAME_BYTES`
(else none is stored); everything read back is validated by :func:`decode` (types, sizes)
and escaped when drawn.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import streamlit as st

from specdec_core.core.trace import DistSlice, KVState, TokenInfo
from specdec_core.engine.tree.records import tree_strip_states
from specdec_core.lessons.link import encode
from specdec_core.server.room_frames import MAX_FRAME_BYTES, state_digest
from specdec_core.server.rooms import RoomStore
from specdec_core.ui.figures.step_slices import block_residual_slice
from specdec_core.ui.i18n import LANGUAGES, in_language
from specdec_core.ui.live.frame_cache import FRAME_VERSION, remember
from specdec_core.ui.live.frame_view import frame_html
from specdec_core.ui.render import StripItem, round_strip
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links
from specdec_core.ui.step import tree_lesson as TL
from specdec_core.ui.step.block_checks import residual_weight


# ------------------------------------------------------------------ values ↔ JSON
def _tok(token: TokenInfo) -> list:
    return [int(token.id), str(token.text), str(token.piece)]


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _floats(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [float(v) for v in np.asarray(values, dtype=np.float32)]


def dist_json(dist: DistSlice) -> dict:
    """A :class:`DistSlice` as JSON (float32 values written exactly as floats)."""
    return {
        "ids": [int(i) for i in dist.token_ids],
        "tokens": [_tok(x) for x in dist.tokens],
        "p": _floats(dist.p),
        "q": _floats(dist.q),
        "min": _floats(dist.min_pq),
        "excess": _floats(dist.excess),
        "other": [dist.p_other, dist.q_other, dist.min_other, dist.excess_other],
    }


def _kv_json(state: KVState, keep: int | None, own_state: bool) -> dict:
    rows = [
        [r.position, r.token_id, r.piece, r.text, r.committed, r.target_kv, r.draft_kv, r.state]
        for r in state.rows
    ]
    counts = [state.committed_len, state.target_kv_len, state.draft_kv_len]
    return {"counts": counts, "rows": rows, "keep": keep, "own": own_state}


# ------------------------------------------------------------------ the teacher's frame
def _strip_json(items) -> list:
    return [[*_tok(i.token), i.state, bool(i.edited)] for i in items]


def chain_frame(session, selected: int | None = None) -> dict:
    """The frame of a chain session (the strip, checks, chart and KV table the step page
    draws for it). ``selected``: the position the teacher's chart shows (``None``: the
    page's default, the first position not accepted)."""

    phase = session.phase
    verify = session.steps.current_verify
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    if last is not None:
        n_new = len(last.commit.appended)
        items += [
            StripItem(session.token(i), "committed") for i in generated[: len(generated) - n_new]
        ]
        items += round_strip(last.verify, last.record)
    else:
        items += [StripItem(session.token(i), "committed") for i in generated]
        if verify is None:
            edited = session.steps.edited_positions
            items += [
                StripItem(session.token(y), "tentative", i + 1 in edited)
                for i, y in enumerate(session.steps.drafts)
            ]
        else:
            items += round_strip(verify, session.current_record)
    frame: dict[str, Any] = {
        "v": FRAME_VERSION,
        "shape": "chain",
        "round": session.round_index,
        "carried": session.start_len - session.prompt_len,  # kept across a chain/tree switch
        "phase": phase,
        "strip": _strip_json(items),
        "checks": None,
        "chart": None,
    }
    shown = verify if verify is not None else (last.verify if last is not None else None)
    if shown is not None:
        frame["greedy"] = bool(shown.greedy)
        frame["checks"] = [
            {
                "pos": c.position,
                "tok": _tok(c.token),
                "argmax": _tok(c.target_argmax),
                "p": float(c.p),
                "q": float(c.q),
                "a": float(c.accept_prob),
                "u": _float(c.u),
                "status": c.status,
                "tie": bool(c.near_tie),
            }
            for c in shown.checks
        ]
        frame["chart"] = _verified_chart(session, shown, last, selected)
        if shown.block is not None:  # block verification: the table's p′, h, token-wise
            frame["block"] = shown.block.to_json()
    elif session.steps.drafts:
        dists = session.steps.current_draft_dists
        pos = max(1, min(selected or 1, len(dists)))
        tok = session.token(session.steps.drafts[pos - 1])
        frame["chart"] = {
            "kind": "draft",
            "pos": pos,
            "tok": _tok(tok),
            "marked": tok.id,
            "correction": None,
            "dist": dist_json(dists[pos - 1]),
        }
    statuses = session.steps.current_statuses()
    keep = 2 + (len(last.commit.appended) if last is not None else 0)
    own = session.drafter.cached_ids() is not None
    frame["kv"] = _kv_json(session.kv_state(statuses), keep, own)
    frame["kv"]["recurrent"] = session.drafter.state_view() is not None  # a state, not KV
    return frame


def _verified_chart(session, shown, last, selected: int | None) -> dict:
    """The chart the step page draws for a verified round at the teacher's position."""
    record = last.record if last is not None else session.current_record
    stopped = record is not None and record.kind == "stopped"
    bonus = shown.kind == "bonus" and not stopped
    gamma = len(shown.checks)
    default = max(1, record.accepted if stopped else shown.accepted + 1)
    n_options = gamma + (1 if bonus else 0)
    pos = selected if selected and 1 <= selected <= n_options else min(default, max(1, n_options))
    if gamma and pos <= gamma:
        c = shown.checks[pos - 1]
        correction = shown.next_token.id if pos == shown.accepted + 1 and not stopped else None
        # block verification's resampled position: the residual the token came from
        weight = residual_weight(shown.block, pos, correction)
        dist = c.dist
        if weight is not None:
            dist = block_residual_slice(c.dist, weight, shown.block.residual_mass)
        return {
            "kind": "check",
            "pos": pos,
            "tok": _tok(c.token),
            "marked": c.token.id,
            "correction": correction,
            "dist": dist_json(dist),
            "residual_weight": weight,
        }
    return {
        "kind": "bonus",
        "pos": pos,
        "tok": _tok(shown.next_token),
        "marked": None,
        "correction": shown.next_token.id,
        "dist": dist_json(shown.next_dist),
    }


def tree_frame(session) -> dict:
    """The frame of a tree session: the committed text (after a commit, the accepted path
    and ★ as the step page's strip shows them) and the round's drafted nodes."""

    phase = session.phase
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    n_new = len(last.record.appended) if last is not None else 0
    items += [StripItem(session.token(i), "committed") for i in generated[: len(generated) - n_new]]
    if last is not None:
        items += [StripItem(session.token(tok), s) for tok, s in tree_strip_states(last.record)]
    tree = session.steps.tree_view()
    if last is not None and tree is None:
        tree = last.verify.tree
    nodes = [
        [
            *_tok(n.token),
            n.parent,
            n.depth,
            n.state,
            float(n.q),
            None if n.p is None else float(n.p),
        ]
        for n in (tree.nodes if tree is not None else ())
    ]
    return {
        "v": FRAME_VERSION,
        "shape": "tree",
        "round": session.round_index,
        "carried": session.start_len - session.prompt_len,  # kept across a chain/tree switch
        "phase": phase,
        "strip": _strip_json(items),
        "nodes": nodes,
    }


def teacher_frame(page: str, params: dict[str, str]) -> dict | None:
    """The frame of the step state the teacher publishes as ``params``, read under the
    engine lock; ``None`` off the step page, while another thread of the tab holds the
    engine, or when the session on screen is not the published state any more."""
    if page != "step_through":
        return None
    S = st.session_state
    with L.engine() as held:
        if not held:
            return None
        try:
            now = encode(links.current_state(page))
        except links.Busy:
            return None
        if any(params.get(k) != v for k, v in now.items()):
            return None  # the session moved on since the URL was written
        if TL.mode() == "tree":
            lesson = L.current("tree")
            return None if lesson is None else tree_frame(lesson.session)
        lesson = L.current()
        if lesson is None:
            return None
        session = lesson.session
        n = (
            len(session.steps.current_verify.checks)
            if session.steps.current_verify
            else len(session.steps.drafts)
        )
        chosen = S.get(f"st_pos_{session.round_index}_{session.phase}_{n}")
        return chain_frame(session, chosen if isinstance(chosen, int) else None)


def publish_frame(store: RoomStore, room: tuple[str, str], page: str, published: tuple) -> None:
    """Store the teacher's frame before the state itself is published. ``room``: ``(code,
    teacher key)``; ``page``: the app page on screen; ``published``: ``(store page, state)``
    as the store is about to get them. A frame that cannot be made or is too big is not
    stored (followers then replay the state); a store fault passes to the caller like the
    publish's own."""
    frame = teacher_frame(page, published[1])
    if frame is None:
        return
    html = {}
    for code in LANGUAGES:  # drawn here once per language: a pushed screen shows it as is
        with in_language(code):
            html[code] = frame_html(frame)
    frame["html"] = html
    text = json.dumps(frame, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_FRAME_BYTES:
        return
    digest = state_digest(*published)
    store.put_frame(room[0], room[1], digest, text)
    remember((room[0].upper(), digest), frame)
