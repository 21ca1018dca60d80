"""The words of the step page's history: the statistics line and one label per round.

Each count adds up on screen: a round's label reads "accepted drafts + the target's own
token = tokens added", and a history with no checked draft says so instead of printing
α = 0 over 0 positions (prompt lookup without a match, the first MTP round). Every number
comes from :func:`~specdec_core.engine.chain.records.summarize` or the round's record.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec_core.engine.chain.records import RoundRecord, summarize
from specdec_core.engine.chain.trace import RoundTrace
from specdec_core.ui.i18n import t
from specdec_core.ui.words import ROUND_KIND, say


def stats_line(records: Sequence[RoundRecord]) -> str:
    """Rounds, committed tokens split into accepted drafts and the target's own tokens,
    mean accepted length and α (``—`` with "no drafts checked" when nothing was checked)."""
    s = summarize(records)
    total = sum(len(r.appended) for r in records)
    counts = t(
        "history_stats",
        rounds=s.rounds,
        acc=s.accepted,
        drafted=s.drafted,
        target=total - s.accepted,
        total=total,
        mean=s.mean_accepted,
    )
    if s.checked == 0:
        return f"{counts} · {t('history_alpha_none')}"
    return f"{counts} · {t('history_alpha', checked=s.checked, alpha=s.acceptance_rate)}"


def round_label(r: RoundTrace, scheduled: bool) -> str:
    """One round's summary line: ``{n} of {g} drafts accepted + 1 correction = +{k}``,
    "no drafts" for a round that drafted nothing, and no ``+ 1`` when a stop left no
    target token. ``scheduled``: the round's γ is shown (an adaptive γ schedule)."""
    r_no = r.round_index + 1
    head = (
        t("history_round_gamma", r=r_no, gamma=r.record.gamma)
        if scheduled
        else t("history_round", r=r_no)
    )
    n, g, k = r.record.accepted, len(r.verify.checks), len(r.commit.appended)
    if g == 0:
        return t("history_round_none", head=head, k=k)
    if r.commit.kind == "stopped":
        return t("history_round_stopped", head=head, n=n, g=g, k=k, x=k - n)
    return t(
        "history_round_body",
        head=head,
        n=n,
        g=g,
        k=k,
        kind=say(ROUND_KIND, ("chain", r.commit.kind)),
    )
