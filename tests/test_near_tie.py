"""Near-ties: a decision closer to its threshold than float error (the sampling rule's
``u < a``, or a greedy argmax between two close logits) is flagged on its check, and the
checks table says so in both languages, so a device or thread count that decides it the
other way is explained on screen instead of differing silently."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.sampling import near_tie_argmax, near_tie_draw
from specdec_core.core.trace import TokenInfo
from specdec_core.engine.chain.edits import build_checks
from specdec_core.engine.chain.records import make_record
from specdec_core.engine.chain.round import Checked
from specdec_core.rules.acceptance import Verdict


@pytest.mark.parametrize(
    ("u", "a", "tie"),
    [
        (0.30000, 0.30001, True),  # 3e-5 of 0.3 apart: float error could swap them
        (0.30001, 0.30000, True),
        (0.2999, 0.3000, False),  # 3e-4 apart: decided
        (0.5, 1.0, False),  # p ≥ q: always accepted
        (None, 0.4, False),  # never drawn (greedy, or after the rejection)
    ],
)
def test_a_draw_close_to_its_threshold_is_a_near_tie(u, a, tie):
    assert near_tie_draw(u, a) is tie


@pytest.mark.parametrize(
    ("logits", "tie"),
    [
        ([2.0, 2.00005, -1.0], True),  # top two 5e-5 nats apart
        ([2.0, 2.001, -1.0], False),
        ([0.0, float("-inf"), float("-inf")], False),  # a grammar left one token
        ([5.0], False),
    ],
)
def test_a_greedy_choice_between_two_close_logits_is_a_near_tie(logits, tie):
    assert near_tie_argmax(torch.tensor(logits)) is tie


def _checks(u: tuple[float, ...], accept: float, raw: torch.Tensor | None = None):
    """``build_checks`` of a one-draft round (token 1) rejected with ``a_1 = accept``."""
    rows = torch.full((2, 4), 0.25)
    verdict = Verdict(0, 2, "correction", (accept,), u)
    record = make_record(1, [1], 0, [0.5], [2], "correction")
    token = lambda i: TokenInfo(i, str(i), str(i))  # noqa: E731
    checked = Checked(verdict, (0.5,), 2, rows, raw)
    return build_checks([1], rows[:1], checked, record, set(), token, lambda *_: None)


def test_the_checks_flag_a_near_tie_and_only_there():
    assert _checks((0.50001,), 0.5)[0].near_tie  # sampling: u just above a (rejected)
    assert not _checks((0.6,), 0.5)[0].near_tie
    raw = torch.tensor([[0.4, 0.39999, 0.2, 0.00001], [0.25] * 4])  # greedy: T = 1 rows
    assert _checks((), 0.0, raw)[0].near_tie
    assert not _checks((), 0.0, torch.tensor([[0.5, 0.3, 0.1, 0.1], [0.25] * 4]))[0].near_tie


CHECKS_TABLE = """
import streamlit as st
from specdec_core.core.trace import TokenInfo
from specdec_core.engine.chain.trace import PositionCheck
from specdec_core.ui.step.strip_checks import checks_html
tok = TokenInfo(41, "t", "t")
checks = tuple(
    PositionCheck(i, tok, 0.3, 0.6, 0.5, u, s, tok, False, 0.5, None, tie)
    for i, u, s, tie in [(1, 0.2, "accepted", False), (2, 0.50002, "rejected", True)]
)
st.html(checks_html(checks, False, None, lambda i: tok))
"""


@pytest.mark.parametrize(
    ("lang", "note"), [("en", "Near-tie at position 2"), ("zh", "位置 2 是近似平局")]
)
def test_the_checks_table_says_where_a_check_is_a_near_tie(lang, note):
    from conftest import html_tables
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(CHECKS_TABLE)
    at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    [table] = html_tables(at, "checks-table")
    verdicts = table.iloc[:, -1].tolist()
    assert [v.endswith(" ≈") for v in verdicts] == [False, True]
    [element] = [h.value for h in at.get("html")]  # the table and its notes: one element
    assert note in element
