"""The probability formatter: never ``0.0000`` for a value that is not 0."""

from __future__ import annotations

import pytest

from specdec_core.core.numfmt import fmt_prob


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


def test_fmt_short_bar_labels():
    from specdec_core.core.numfmt import fmt_short

    assert [fmt_short(x) for x in (0, 0.44, 0.1, 1.04e-5, 1)] == [
        "0",
        "0.44",
        "0.10",
        "1.04e-5",
        "1.00",
    ]


def test_lab_figures_print_the_numbers_on_the_bars():
    """The rule lab's wrong-rule result [0.44, 0.42, 0.14] beside p [0.6, 0.3, 0.1] is
    readable as text on the bars, not only on hover."""
    import numpy as np

    from specdec_core.ui.figures.lab import rule_finals_figure

    labels = {"p": "p", "probability": "probability", "token": "token", "resample_p": "wrong"}
    fig = rule_finals_figure(
        ["a", "b", "c"],
        np.array([0.6, 0.3, 0.1]),
        {"resample_p": np.array([0.44, 0.42, 0.14])},
        labels,
        "t",
    )
    assert list(fig.data[0].text) == ["0.60", "0.30", "0.10"]
    assert list(fig.data[1].text) == ["0.44", "0.42", "0.14"]
    assert fig.layout.yaxis.title.text is None  # written horizontally above the axis


def test_fmt_sig_shows_enough_digits_to_reproduce_a():
    """Once p = 0.0017, q = 0.0022 was shown beside a = 0.8060 (dividing the
    shown numbers gives 0.77). With 4 significant digits the division agrees with the
    shown a to 0.1 %."""
    from specdec_core.core.numfmt import fmt_sig

    p, q = 0.0017354, 0.0021531
    a = min(1.0, p / q)
    shown = [fmt_sig(x) for x in (p, q, a)]
    assert shown == ["0.001735", "0.002153", "0.8060"]
    assert float(shown[0]) / float(shown[1]) == pytest.approx(float(shown[2]), rel=1e-3)
    old = [fmt_prob(x) for x in (p, q, a)]  # what the step page showed before
    assert float(old[0]) / float(old[1]) != pytest.approx(float(old[2]), rel=1e-2)
    assert [fmt_sig(x) for x in (0, 1, 0.5, 1.04e-5, 0.099996, None)] == [
        "0",
        "1.000",
        "0.5000",
        "1.040e-5",
        "0.1000",
        "—",
    ]
