"""Sentences that read a figure of the lossless page: each is built from the same result
objects the figure draws (never fixed prose), so a caption cannot contradict its chart.

* :func:`price_reading`: section ④'s price over δ (the lossy rules on the lab's rows), read
  at the chart's right end (the largest δ) and against the exact rule's acceptance.
* :func:`chi_agreement`: section ③'s χ² rows against each other and section ①'s, and why
  equal rows are expected (the same seeds draw the same tokens), not copied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from specdec_core.bench.same_seed import DistributionTest
from specdec_core.rules.lab.lossy import LossyRules, LossySweep, typical_threshold
from specdec_core.ui.i18n import t

TOL = 1e-9  # an acceptance of 1 or 0 and a TV of 0, up to rounding


def _num(x: float) -> str:
    return f"{x:.2f}"


def _at_end(rule: str, sweep: LossySweep) -> str:
    """One rule at the sweep's largest δ: what it accepts and what that costs."""
    acc, tv = float(sweep.acceptance[-1]), float(sweep.tv_to_p[-1])
    name = t(f"ll_rule_{rule}")
    if acc <= TOL:
        return t("ll_price_end_none", rule=name)
    if tv <= TOL:
        return t("ll_price_end_free", rule=name, acc=_num(acc))
    if acc >= 1.0 - TOL:
        return t("ll_price_end_all", rule=name, tv=_num(tv))
    return t("ll_price_end_some", rule=name, acc=_num(acc), tv=_num(tv))


def _pays(rule: str, sweep: LossySweep, exact: float) -> str:
    """Where the rule's acceptance is above the exact rule's (a prefix of the δ grid:
    both rules accept less as δ grows)."""
    above = sweep.deltas[sweep.acceptance > exact + TOL]
    name = t(f"ll_rule_{rule}")
    if not len(above):
        return t("ll_price_pays_never", rule=name)
    last = int(np.flatnonzero(sweep.deltas == above.max())[0])
    return t(
        "ll_price_pays_upto",
        rule=name,
        delta=f"{above.max():g}",
        tv=_num(float(sweep.tv_to_p[last])),
    )


def price_reading(
    p: np.ndarray, sweeps: Mapping[str, LossySweep], exact_acceptance: float, knobs: LossyRules
) -> str:
    """The caption of the price chart, read from ``sweeps`` (rule → its sweep over δ, the
    chart's curves) and ``exact_acceptance`` (its dotted line): each rule at the largest δ,
    why a rule still accepts there (typical: its bar is capped at ε; threshold: its top-k
    always passes), and the range of δ where a rule beats the exact rule's acceptance."""
    end = float(next(iter(sweeps.values())).deltas[-1])
    parts = [
        t(
            "ll_price_end",
            delta=f"{end:g}",
            rules=t("ll_price_rule_sep").join(_at_end(r, s) for r, s in sweeps.items()),
        )
    ]
    typical = sweeps.get("typical")
    if typical is not None and typical.acceptance[-1] > TOL:
        bar = typical_threshold(p, end, knobs.epsilon)
        parts.append(
            t("ll_price_why_typical", bar=f"{bar:.4f}", delta=f"{end:g}", eps=f"{knobs.epsilon:g}")
        )
    threshold = sweeps.get("threshold")
    if threshold is not None and threshold.acceptance[-1] > TOL and knobs.top_k > 0:
        parts.append(t("ll_price_why_threshold", k=knobs.top_k))
    pays = t("ll_price_rule_sep").join(_pays(r, s, exact_acceptance) for r, s in sweeps.items())
    parts.append(t("ll_price_pays", exact=_num(exact_acceptance), rules=pays))
    return t("ll_sentence_sep").join(parts)


def _same_draws(a: DistributionTest, b: DistributionTest) -> bool:
    """Both sides of two tests drew the same outcomes the same number of times."""
    if a.n != b.n or a.k != b.k:
        return False
    counts = lambda test: {x: c[:2] for x, c in test.counts.items()}  # noqa: E731
    return counts(a) == counts(b)


def chi_agreement(
    rows: Sequence[tuple[str, DistributionTest]], tv_to_float32: Mapping[str, float]
) -> str | None:
    """Why χ² rows agree, when they do: ``rows`` are (label, test) in the order shown (the
    first may be section ①'s float32 run); ``tv_to_float32`` the measured TV of each
    quantized target's first token to float32's. ``None`` when no two rows drew the same
    tokens (nothing to explain)."""
    groups: list[tuple[DistributionTest, list[str]]] = []
    for label, test in rows:
        group = next((g for first, g in groups if _same_draws(test, first)), None)
        if group is None:
            groups.append((test, [label]))
        else:
            group.append(label)
    same = [" = ".join(g) for _, g in groups if len(g) > 1]
    if not same:
        return None
    sep = t("ll_chi_list_sep")
    tvs = sep.join(f"{k} {v:.4f}" for k, v in tv_to_float32.items())
    return t("ll_chi_same", rows=sep.join(same), n=rows[0][1].n, tvs=tvs or "—")
