"""Streamlit-side rendering helpers shared by pages: the token strip, the KV table and
plain HTML tables.

The step-through page's tables and history are HTML strings shown with one ``st.html``
each: ``st.table`` renders every cell as a markdown element and the history was three
elements per round, and a step click re-renders all of them in the browser (measured in
headless Chromium on 2 cores: ≈ 60 ms for the two tables, ≈ 50 ms for a 7-round history,
of a ≈ 300 ms click). Every string that reaches the HTML is escaped here."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from unicodedata import east_asian_width

import pandas as pd

from specdec_core.core.records import strip_order
from specdec_core.core.trace import KVState, TokenInfo, byte_groups
from specdec_core.core.words import StripState
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.trace import VerifyTrace
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.words import KV_ROW_STATE, STRIP_STATE, say

STYLES = {
    "prompt": "background:#f1f5f9;color:#475569;",
    "committed": "background:#dbeafe;color:#1e3a8a;",
    "tentative": "background:#fef3c7;border:1px dashed #d97706;color:#78350f;",
    "accepted": "background:#bbf7d0;border:1px solid #16a34a;color:#14532d;",
    "rejected": "background:#fecaca;border:1px solid #dc2626;color:#7f1d1d;"
    "text-decoration:line-through;",
    # discarded/cut: dark text (contrast ≥ 4.5:1, readable from the back of a room) that
    # still reads as "gone": strike-through, a hatched background, a dashed/dotted border
    "discarded": "background:repeating-linear-gradient(135deg,#f3f4f6 0 6px,#e5e7eb 6px 8px);"
    "color:#374151;text-decoration:line-through 2px;border:1px dashed #6b7280;",
    "cut": "background:#f3f4f6;color:#4b5563;border:1px dotted #6b7280;"
    "text-decoration:line-through;",
    "correction": "background:#fed7aa;border:2px solid #ea580c;color:#7c2d12;font-weight:700;",
    "bonus": "background:#e9d5ff;border:2px solid #9333ea;color:#581c87;font-weight:700;",
}
KV_ROW_COLORS = {
    "rejected": "background-color:#fee2e2",
    "discarded": "background-color:#fee2e2",
    "cut": "background-color:#f3f4f6",
    "accepted": "background-color:#dcfce7",
    "tentative": "background-color:#fef9c3",
    "committed-no-KV-yet": "background-color:#ffedd5",
}


@dataclass(frozen=True)
class StripItem:
    token: TokenInfo
    state: StripState  # a key of STYLES
    edited: bool = False


def hover_title(token: TokenInfo) -> str:
    """A token's tooltip: id and BPE piece, and for a byte token its bytes in hex."""
    title = t("hover_token", id=token.id, piece=token.piece)
    if token.partial and token.raw is not None:
        title += " · " + t("hover_bytes", hex=" ".join(f"{b:02X}" for b in token.raw))
    return title


def _span(item: StripItem) -> str:
    title = hover_title(item.token)
    if item.state == "discarded":
        title += " — " + t("why_discarded")
    elif item.state == "cut":
        title += " — " + t("why_cut")
    elif item.state == "rejected":
        title += " — " + t("why_rejected")
    text = html.escape(visible_token(item.token))
    mark = "✎" if item.edited else ""
    return (
        f'<span class="tok tok-{item.state}" title="{html.escape(title)}" '
        f'style="{STYLES[item.state]}padding:1px 3px;margin:1px;border-radius:4px;'
        f'display:inline-block;font-family:monospace;font-size:15px;white-space:pre">'
        f"{mark}{text}</span>"
    )


def round_strip(verify: VerifyTrace, record: RoundRecord) -> list[StripItem]:
    """A verified round's tokens in the house order (``core.records.strip_order``): committed
    drafts, the rejected draft, the target's token, then discarded and cut drafts."""
    items = []
    for i in strip_order(record.statuses, record.kind != "stopped"):
        if i is None:
            state = verify.kind if verify.checks else "committed"
            items.append(StripItem(verify.next_token, state))
        else:
            c = verify.checks[i]
            items.append(StripItem(c.token, c.status, c.edited))
    return items


# states whose tokens are text in this order (the other family: the rejected draft and
# the drafts after it or after a stop, read as the drafted text that was not kept)
KEPT = frozenset(
    {"prompt", "committed", "committed-no-KV-yet", "accepted", "correction", "bonus", "tentative"}
)


def item_groups(tokens: list[TokenInfo], states: list[str]) -> dict[int, tuple[int, str]]:
    """:func:`~specdec_core.core.trace.byte_groups` of ``tokens`` within runs of one family of
    ``states`` (kept text, or drafts that were not kept): a character is only shown as
    completed by bytes that are read in sequence."""
    groups: dict[int, tuple[int, str]] = {}
    start = 0
    for i in range(1, len(tokens) + 1):
        if i == len(tokens) or (states[i] in KEPT) != (states[start] in KEPT):
            found = byte_groups(tokens[start:i])
            groups.update({start + a: (start + b, text) for a, (b, text) in found.items()})
            start = i
    return groups


def _group_html(spans: list[str], text: str, tokens: list[TokenInfo]) -> str:
    """Byte tokens that complete ``text``: their chips in a row and ``text`` under them."""
    title = t(
        "bytes_group", char=text, n=len(tokens), bytes=" | ".join(visible_token(x) for x in tokens)
    )
    return (
        f'<span class="tok-group" title="{html.escape(title)}" style="display:inline-flex;'
        "flex-direction:column;align-items:stretch;vertical-align:top;line-height:1.35;"
        'margin:0 2px">'
        f'<span style="white-space:nowrap">{"".join(spans)}</span>'
        '<span class="tok-char" style="text-align:center;border-top:1px solid #64748b;'
        f'font-size:14px;color:#334155">{html.escape(_visible(text))}</span></span>'
    )


def _visible(text: str) -> str:
    return visible_token(text)


def strip_body(items: list[StripItem]) -> str:
    """The chips of ``items``; byte tokens that complete a character are grouped under
    it (``‹E6›‹98›‹A5›`` over 春)."""
    tokens, states = [i.token for i in items], [i.state for i in items]
    groups = item_groups(tokens, states)
    out, i = [], 0
    while i < len(items):
        if i in groups:
            end, text = groups[i]
            out.append(_group_html([_span(x) for x in items[i:end]], text, tokens[i:end]))
            i = end
        else:
            out.append(_span(items[i]))
            i += 1
    return "".join(out)


def token_strip_html(items: list[StripItem], legend: list[StripState]) -> str:
    """HTML for a row of coloured tokens (hover: id and BPE piece) and a legend. All
    token text is escaped. Each legend chip is one unbreakable box (the legend wraps
    between chips, never inside one)."""
    body = strip_body(items)
    keys = "".join(
        f'<span class="legend-chip" style="{STYLES[s]}padding:1px 6px;margin-right:6px;'
        f"border-radius:4px;font-size:12px;white-space:nowrap;display:inline-block;"
        f'margin-bottom:3px">{html.escape(say(STRIP_STATE, s))}</span>'
        for s in legend
    )
    if not legend:
        return f'<div class="strip" style="line-height:2.0">{body}</div>'
    note = ""
    if any(i.token.partial for i in items):  # byte tokens on screen: say what ‹E6› is
        note = (
            f'<div class="bytes-note" style="font-size:12px;margin-top:2px">'
            f"{html.escape(t('legend_bytes'))}</div>"
        )
    return (
        f'<div class="strip" style="line-height:2.0">{body}</div>'
        f'<div class="strip-legend" style="margin-top:6px">{keys}<span class="legend-chip" '
        f'style="font-size:12px;white-space:nowrap;display:inline-block">'
        f"{html.escape(t('legend_edited'))}</span>{note}</div>"
    )


def kv_rows(state: KVState, keep: int | None = 3) -> list:
    """The rows that matter: every row of the round in flight (tentative, accepted,
    rejected, rolled back, committed without KV yet) and the ``keep`` committed or prompt
    rows just before them; ``None``: all rows."""
    rows = list(state.rows)
    if keep is None:
        return rows
    settled = ("prompt", "committed")
    live = [i for i, r in enumerate(rows) if r.state not in settled]
    first = live[0] if live else len(rows)
    return rows[max(0, first - keep) :]


def _kv_columns(state: KVState, keep: int | None) -> tuple[dict[str, list], list[str]]:
    """The KV table's columns (translated header → cells) and each row's CSS."""
    rows = kv_rows(state, keep)
    yes, no = t("yes"), t("no")
    columns = {
        t("col_pos"): [r.position for r in rows],
        t("col_token"): kv_token_cells(state, len(state.rows) - len(rows)),
        t("col_committed"): [yes if r.committed else no for r in rows],
        t("col_target_kv"): [yes if r.target_kv else no for r in rows],
        t("col_draft_kv"): [yes if r.draft_kv else no for r in rows],
        t("col_state"): [say(KV_ROW_STATE, r.state) for r in rows],
    }
    return columns, [KV_ROW_COLORS.get(r.state, "") for r in rows]


def grouped_cells(tokens: list[TokenInfo], groups: dict[int, tuple[int, str]]) -> list[str]:
    """Each token as text (:func:`visible_token`: bytes in hex); the last byte token of a
    group that completes a character gets ``→ 春``."""
    cells = [visible_token(x) for x in tokens]
    for end, text in groups.values():
        cells[end - 1] += f"\u00a0→\u00a0{_visible(text)}"  # no break inside a cell
    return cells


def kv_token_cells(state: KVState, first: int = 0) -> list[str]:
    """The KV table's token column for rows ``first..``, byte groups found over all rows."""
    tokens = [TokenInfo(r.token_id, r.text, r.piece) for r in state.rows]
    cells = grouped_cells(tokens, item_groups(tokens, [r.state for r in state.rows]))
    return cells[first:]


def kv_table(state: KVState, keep: int | None = 3):
    """The KV-state table as a styled DataFrame (rows rolled back by a commit in red):
    :func:`kv_rows` of ``state``."""
    columns, colors = _kv_columns(state, keep)
    df = pd.DataFrame(columns)
    return df.style.apply(lambda _: [colors[_.name]] * len(_), axis=1).hide(axis="index")


def kv_table_html(state: KVState, keep: int | None = 3) -> str:
    """The KV-state table of :func:`kv_table` as one HTML table (class ``kv-table``)."""
    columns, colors = _kv_columns(state, keep)
    return html_table(columns, colors, "kv-table")


# Looks like st.table (horizontal rules, muted header, numbers right-aligned).
_TABLE_CSS = (
    "<style>.sd-wrap{overflow-x:auto;max-width:100%}.sd-table{width:100%;"
    "border-collapse:collapse;font-size:0.875rem;margin-bottom:0.5rem}.sd-table th{"
    "font-weight:400;color:rgba(49,51,63,0.6);text-align:left;padding:0.3rem 0.6rem;"
    "border-bottom:1px solid rgba(49,51,63,0.2);white-space:nowrap}"  # headers never wrap
    ".sd-table td{padding:0.25rem 0.6rem;"
    "border-bottom:1px solid rgba(49,51,63,0.1)}"
    ".sd-table .num{text-align:right}.sd-table td.nw{white-space:nowrap}"
    ".sd-table.heads-wrap th{white-space:normal;vertical-align:bottom}"  # at every width
    # a phone (390 px): every table's headers wrap ("min(p, q) — accept path" was cut at
    # the screen's edge); the KV table's cells also pad less, so its last column (each
    # row's state) is on screen, not scrolled off to the right
    "@media (max-width:640px){.sd-table th{white-space:normal;"
    "vertical-align:bottom}.sd-table.kv-table th,.sd-table.kv-table td{"
    "padding:0.25rem 0.3rem}.sd-table.kv-table td.nw{white-space:normal;"
    "overflow-wrap:anywhere}}</style>"
)


def header_width(label: str, cells: Sequence[object] = ()) -> int:
    """Pixels a ``st.dataframe`` column needs to show ``label`` whole (its headers never
    wrap: a narrower column cuts them with "…") and its ``cells`` (up to 400 px): ≈ 13 px
    a wide (CJK) character, 7 px another, plus the cell's padding."""

    def px(text: object) -> int:
        return sum(13 if east_asian_width(c) in "WF" else 7 for c in str(text))

    return 24 + max([px(label), *(min(px(c), 400) for c in cells)])


def html_table(columns: dict[str, list], row_css: list[str] | None = None, name: str = "") -> str:
    """``columns`` (header → cells, all of one length) as an HTML table of class
    ``sd-table`` and ``name``; every header and cell is escaped; integer columns are
    right-aligned; a column without spaces (numbers such as ``1.36e-4``, tokens) never
    breaks inside a cell, text columns wrap; ``row_css[i]`` (a trusted style from this
    module) styles row ``i``."""
    heads = list(columns)
    cells = list(zip(*columns.values(), strict=True)) if heads else []
    kinds = [
        ("num" if all(isinstance(v, int) for v in columns[h]) else "")
        + ("" if any(" " in str(v) for v in columns[h]) else " nw")
        for h in heads
    ]
    head = "".join(
        f'<th class="{kind}">{html.escape(str(h))}</th>'
        for h, kind in zip(heads, kinds, strict=True)
    )
    body = []
    for i, row in enumerate(cells):
        style = f' style="{html.escape(row_css[i])}"' if row_css and row_css[i] else ""
        tds = "".join(
            f'<td class="{kind}">{html.escape(str(v))}</td>'
            for v, kind in zip(row, kinds, strict=True)
        )
        body.append(f"<tr{style}>{tds}</tr>")
    return (
        f'{_TABLE_CSS}<div class="sd-wrap"><table class="sd-table {html.escape(name)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def history_html(rounds: list[tuple[str, str, str]]) -> str:
    """Finished rounds as native collapsible ``<details>`` blocks in one HTML string:
    ``(label, strip_html, caption)`` per round; ``label`` and ``caption`` are escaped
    here, ``strip_html`` comes from :func:`token_strip_html` (already escaped)."""
    box = (
        "border:1px solid rgba(49,51,63,0.2);border-radius:0.5rem;margin-bottom:0.5rem;"
        "padding:0.5rem 1rem"
    )
    return "".join(
        f'<details class="history-round" style="{box}"><summary style="cursor:pointer">'
        f"{html.escape(label)}</summary>{strip}"
        f'<div style="font-size:0.875rem;color:rgba(49,51,63,0.6)">{html.escape(caption)}'
        "</div></details>"
        for label, strip, caption in rounds
    )
