"""The step panel's strip and checks, drawn as one element: the heading, the round's
message (a stop, a rejection), the token strip with its legend and, below it, the round's
checks -- the chain's checks table, the tree's outcome -- with their notes (†, near-ties,
block verification, timing). One ``st.html`` instead of five to eight Streamlit elements:
a step click re-renders every element of the panel in the browser (React, emotion styles
and a markdown renderer per element), so fewer elements is a faster click.

The translation strings are markdown (``**bold**``); :func:`line_html` escapes them and
turns their bold into ``<b>``; tokens and other HTML fragments enter as parameters that
are escaped on their own (never read as markdown), so a token such as ``**`` or a
backtick shows as itself. Alert boxes use Streamlit 1.67's light-theme alert colours.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from specdec_core.core.numfmt import fmt_sig
from specdec_core.core.trace import TokenInfo, byte_groups
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.rules.acceptance import BlockDecision
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.render import grouped_cells, html_table
from specdec_core.ui.step.block_checks import block_columns
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import BLOCK_STATUS, CHECK_STATUS, say

UNCHECKED = ("discarded", "cut")  # never checked: after the rejection, or after a stop
#: (background, text) of Streamlit's st.info / st.success / st.warning boxes
ALERT = {
    "info": ("rgb(237,245,255)", "rgb(36,79,180)"),
    "success": ("rgb(241,251,246)", "rgb(12,90,68)"),
    "warning": ("rgb(255,250,229)", "rgb(149,107,15)"),
}
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def shown_u(c: PositionCheck) -> float | None:
    """The ``u`` a student may compare with ``a``: only at a checked position (a
    discarded or cut position was never checked, whatever the engine drew there)."""
    return c.u if c.status not in UNCHECKED else None


def check_columns(
    checks: tuple[PositionCheck, ...], greedy: bool, block: BlockDecision | None = None
) -> dict[str, list]:
    """The checks table's columns (header → cells). Values at unchecked positions
    (discarded, cut) carry ``†`` in both modes (their forward's context held the rejected
    token, or text after the stop: never compared); ``u`` there is "—". Probabilities have
    4 significant digits (``numfmt.fmt_sig``), so the shown ``p`` and ``q`` reproduce the
    shown ``a``."""

    def mark(c: PositionCheck, text: str) -> str:
        return text + " †" if c.status in UNCHECKED else text

    tokens = [c.token for c in checks]  # the drafted text y_1..y_γ, in order
    rows: dict[str, list] = {
        t("col_pos"): [c.position for c in checks],
        t("col_token"): grouped_cells(tokens, byte_groups(tokens)),
    }
    if greedy:
        rows[t("col_argmax")] = [mark(c, visible_token(c.target_argmax)) for c in checks]
    else:
        rows["p(y)"] = [mark(c, fmt_sig(c.p)) for c in checks]
        rows["q(y)"] = [mark(c, fmt_sig(c.q)) for c in checks]
        rows["a = min(1, p/q)"] = [mark(c, fmt_sig(c.accept_prob)) for c in checks]
        rows["u"] = [fmt_sig(shown_u(c)) for c in checks]  # "—": never checked
    if block is not None:  # block verification tests every u, backwards
        rows["u"] = [fmt_sig(u) for u in block.u]
        rows.update(block_columns(checks, block))
    words = BLOCK_STATUS if block is not None else CHECK_STATUS  # ≈ below: a near-tie
    rows[t("col_verdict")] = [say(words, c.status) + " ≈" * c.near_tie for c in checks]
    return rows


def line_html(key: str, fragments: dict[str, str] | None = None, **params: object) -> str:
    """The string ``key`` in the page's language as HTML: escaped, ``**bold**`` as
    ``<b>``; ``fragments`` (name → trusted HTML, e.g. ``token_in_sentence(tok, "html")``) fill their
    ``{name}`` after the escaping, so their text is never read as markdown."""
    marks = {name: f"\x00{i}\x00" for i, name in enumerate(fragments or {})}
    text = _BOLD.sub(r"<b>\1</b>", html.escape(t(key, **params, **marks)))
    for name, mark in marks.items():
        text = text.replace(mark, (fragments or {})[name])
    return text


def note(body: str, presenter: bool = False) -> str:
    """A caption-sized line (``body``: HTML)."""
    size = "1.2rem" if presenter else "0.875rem"  # presenter: as app.py's captions
    return (
        f'<div class="sd-note" style="font-size:{size};color:rgba(49,51,63,0.6);'
        f'margin-top:0.75rem">{body}</div>'
    )


def alert(kind: str, body: str, presenter: bool = False) -> str:
    """A box coloured as Streamlit's ``st.<kind>`` (``body``: HTML)."""
    background, color = ALERT[kind]
    size = "1.2rem" if presenter else "1rem"
    return (
        f'<div class="sd-alert sd-{kind}" style="background:{background};color:{color};'
        f'padding:16px;border-radius:8px;font-size:{size};line-height:1.5;margin:0.75rem 0">'
        f"{body}</div>"
    )


def checks_html(
    checks: tuple[PositionCheck, ...],
    greedy: bool,
    block: BlockDecision | None,
    token: Callable[[int], TokenInfo],
    presenter: bool = False,
) -> str:
    """The chain's checks table with its notes: † (an unchecked row), the near-ties, block
    verification's prefix and residual, and what ``p`` and ``q`` are."""
    parts = [html_table(check_columns(checks, greedy, block), name="checks-table")]
    parts += check_notes(checks, presenter)
    parts += [note(line, presenter) for line in block_lines(block, token)]
    parts.append(note(line_html("st_dists_help"), presenter))
    return '<div class="sd-checks" style="margin-top:1rem">' + "".join(parts) + "</div>"


def check_notes(checks: tuple[PositionCheck, ...], presenter: bool = False) -> list[str]:
    """The notes the checks table needs (HTML): † (a row never checked), the near-ties; a
    follower's frame carries them too (``ui/live/frame_view``)."""
    parts = []
    if any(c.status in UNCHECKED for c in checks):
        parts.append(note(line_html("unchecked_mark"), presenter))
    ties = [str(c.position) for c in checks if c.near_tie]
    if ties:
        parts.append(note(line_html("near_tie_note", pos=", ".join(ties)), presenter))
    return parts


def block_lines(block: BlockDecision | None, token: Callable[[int], TokenInfo]) -> list[str]:
    """Block verification's notes as HTML: the prefix kept against token-wise's, the
    position resampled at and the top of the distribution the token came from (``r_τ``),
    and whether block kept more or fewer; none under token-wise."""
    if block is None:
        return []
    top = ", ".join(
        f"{token_in_sentence(token(i), 'html')} {fmt_sig(p)}"
        for i, p in zip(block.residual_ids, block.residual_probs, strict=True)
    )
    key = "st_bv_note_bonus" if block.kept == len(block.weights) else "st_bv_note"
    lines = [
        line_html(
            key,
            {"top": top},
            kept=block.kept,
            tw=block.token_wise,
            pos=block.resample_position,
            mass=fmt_sig(block.residual_mass),
        )
    ]
    if block.kept > block.token_wise:
        lines.append(line_html("st_bv_more", n=block.kept - block.token_wise))
    elif block.kept < block.token_wise:
        lines.append(line_html("st_bv_fewer", n=block.token_wise - block.kept))
    return lines


def section_html(
    heading: str, strip: str, above: str = "", below: str = "", *, presenter: bool
) -> str:
    """The one element: ``heading`` (a subheader; bold text in presenter mode, as
    ``header.heading_for``), ``above`` (a message box), the ``strip`` (its HTML), then
    ``below`` (the checks)."""
    if presenter:
        head = (
            '<p style="font-weight:700;font-size:1.2rem;margin:0 0 0.5rem">'
            f"{html.escape(heading)}</p>"
        )
    else:  # st.subheader's look (Streamlit 1.67)
        head = (
            '<h3 style="font-size:1.75rem;font-weight:600;line-height:1.2;margin:0;'
            f'padding:0.75rem 0 1rem">{html.escape(heading)}</h3>'
        )
    return f'<div class="sd-strip-checks">{head}{above}{strip}{below}</div>'
