"""Byte tokens (part of a multi-byte UTF-8 character) are shown as their bytes, never "�",
in the views beyond the step page's strip and tables: the drawn tree, the tree attention
mask and the Lessons chapters."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.engine.tree.session import TreeSession
from specdec_core.ui.figures.tree import tree_figure

PROMPT = "ROMEO: 春眠不觉晓"  # the prompt ends on the last byte token of 晓 (E6 99 93)


@pytest.fixture(scope="module")
def verified(embedded_pair):
    session = TreeSession(embedded_pair, PROMPT, SessionConfig(seed=0), "model", (2, 2, 1), 12)
    session.propose()
    session.verify()
    return session


def test_the_tree_figure_shows_the_root_bytes(verified):
    root = verified.token(verified.ids[-1])
    assert root.partial and root.raw == "晓".encode()[-1:]
    labels = {
        name: name
        for name in (
            "root",
            "root_tick",
            "position",
            "node",
            "accept",
            "not_checked",
            "depth",
            "committed",
            "tentative",
            "accepted",
            "rejected",
            "discarded",
            "cut",
            "correction",
            "bonus",
            "next_correction",
            "next_bonus",
            "correction_cut",
            "bonus_cut",
        )
    }
    labels["root_tick"] = "root {pos}"
    labels["depth"] = "d{d} {pos}"
    fig = tree_figure(verified.steps.tree_view(), root, _AllKeys(labels))
    texts = " ".join(str(t) for trace in fig.data for t in (trace.text or ()) if t)
    texts += " ".join(str(t) for trace in fig.data for t in (trace.hovertext or ()) if t)
    texts += " ".join(a.text or "" for a in fig.layout.annotations)
    assert "‹93›" in texts
    assert "�" not in texts


def test_the_mask_grid_shows_bytes_not_replacement_characters(verified):
    from specdec_core.ui.step.tree_tables import mask_html

    byte = verified.token(verified.ids[-1])  # ‹93›: the last byte of 晓
    tree = verified.steps.tree_view()
    tree = replace(tree, nodes=tuple(replace(n, token=byte) for n in tree.nodes))
    grid = mask_html(verified.steps.attention_mask(), tree)
    assert grid.count("‹93›") == 2 * len(tree.nodes)  # each node's row label and column title
    assert "�" not in grid


class _AllKeys(dict):
    """Labels for the figure: any state name the figure asks for is its own label."""

    def __missing__(self, key: str) -> str:
        return key
