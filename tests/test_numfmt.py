"""The probability formatter: never ``0.0000`` for a value that is not 0."""

from __future__ import annotations

import pytest

from specdec_core.numfmt import fmt_prob


@pytest.mark.parametrize(
    ("x", "text"),
    [(0, "0"), (1e-12, "1e-12"), (1.04e-5, "1.04e-5"), (0.5, "0.5000"), (1, "1.0000")],
)
def test_fmt_prob(x, text):
    assert fmt_prob(x) == text


def test_fmt_prob_small_values_are_never_zero_and_missing_is_a_dash():
    for x in (9.99e-4, 2e-7, 3.3e-30):
        assert float(fmt_prob(x)) == pytest.approx(x, rel=1e-2) and fmt_prob(x) != "0"
    assert fmt_prob(None) == "—" and fmt_prob(float("nan")) == "—"
    assert fmt_prob(None, missing="not drawn") == "not drawn"
