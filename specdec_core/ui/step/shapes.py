"""The step panel's one table of the two verification shapes, :data:`SHAPES`: per shape,
everything the panel (:mod:`~specdec_core.ui.step.panel`), its button callbacks
(:mod:`~specdec_core.ui.step.actions`) and the Lesson panel
(:mod:`~specdec_core.ui.step.tools`) need to tell a chain from a tree. They are handed a
row and read it; none of them names a shape. The actions hand the lesson store
(:func:`specdec_core.ui.step.lesson.sync`) the row's mode and tree shape. The buttons'
labels are the words table ``ui/words.STEP_BUTTON``; the widget and lesson keys follow one rule
(:func:`specdec_core.ui.step.lesson.prefix`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.session import Session
from specdec_core.ui.step import chain_view, tree_view, view
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_lesson as TL
from specdec_core.ui.words import Mode


@dataclass(frozen=True)
class StepShape:
    """One verification shape's row.

    ``tree()``: the shape a new lesson gets (``lesson.start``'s ``shape``: the chain's
    ``()``, the tree's shape box; raises ``ConfigError`` for a box that holds none).
    ``ready(config)``: whether the settings can run this shape (else it has said why).
    ``phase_line(session, phase)``: the phase line. ``draw(pair, lesson, phase,
    presenter, heading)``: everything below the Lesson panel. ``reset_help``: the Reset
    button's help. ``title``, ``tabs``, ``note``: the Lesson panel's title, tabs and
    caption (string keys). ``run_n``: "Run N rounds" is offered. ``edits``: the shape has
    the edit box (a click computes its previews)."""

    mode: Mode
    tree: Callable[[], tuple[int, ...]]
    ready: Callable[[SessionConfig], bool]
    phase_line: Callable[[Session, str], str]
    draw: Callable[..., None]
    reset_help: str
    title: str
    tabs: tuple[str, ...]
    note: str | None
    run_n: bool
    edits: bool

    @property
    def keys(self) -> str:
        """The prefix of this shape's button keys (``btn_{keys}propose``)."""
        return L.prefix(self.mode)


def _always(config: SessionConfig) -> bool:
    return True


SHAPES: dict[Mode, StepShape] = {
    "chain": StepShape(
        mode="chain",
        tree=tuple,
        ready=_always,
        phase_line=view.phase_text,
        draw=chain_view.draw,
        reset_help="st_reset_help",
        title="lt_title",
        tabs=("scenarios", "link", "files"),
        note=None,
        run_n=True,
        edits=True,
    ),
    "tree": StepShape(
        mode="tree",
        tree=TL.shape,
        ready=tree_view.ready,
        phase_line=tree_view.phase_line,
        draw=tree_view.draw,
        reset_help="tree_reset_help",
        title="lt_title_tree",
        tabs=("link", "export"),  # scenarios, the checks CSV, opening a trace: the chain's
        note="lt_tree_chain_only",
        run_n=False,
        edits=False,
    ),
}
