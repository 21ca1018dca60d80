"""Adaptive γ: how many drafts each round asks the drafter for, and the settings refused.

The schedules of Hugging Face transformers' assisted generation
(``generation/candidate_generator.py``), ``SessionConfig.gamma_schedule``:

* ``constant`` (default): every round asks for ``config.gamma``.
* ``heuristic``: ``num_assistant_tokens_schedule="heuristic"``
  (``AssistedCandidateGenerator.update_candidate_strategy``): start at ``config.gamma``;
  after a round whose drafts were **all accepted** γ + 2, else max(1, γ − 1); at most
  :func:`gamma_cap`. "All accepted" is transformers' ``num_matches ==
  num_assistant_tokens``: the round committed as many drafts as scheduled. A round cut
  short (by the budget of :func:`~specdec_core.engine.rounds.gamma_for_round`, by
  end-of-text, or by a drafter that proposed fewer: prompt lookup, a confidence stop) is
  not, even if every draft it made was accepted (transformers 5.x compares with the
  drafts made; both agree on rounds not cut short). The next γ is a pure function of the
  finished rounds' accepted counts (:func:`scheduled_gamma`): replay and step back give
  the same γ.
* ``confidence``: ``ConfidenceCriteria``: ask for ``config.gamma``; the drafter stops after
  a draft whose top probability is under ``config.confidence`` (the draft is kept;
  :meth:`specdec_core.drafters.base.Drafter._keep_drafting`).
Then the budget cut; each round records its γ (``RoundRecord.gamma``) and drafts.
"""

from __future__ import annotations

from collections.abc import Iterable

from specdec_core.core.errors import ConfigError
from specdec_core.core.settings import MAX_GAMMA, SessionConfig
from specdec_core.drafters.base import Drafter
from specdec_core.drafters.registry import spec_of
from specdec_core.engine.rounds import gamma_for_round


def gamma_cap(max_gamma: int | None) -> int:
    """The largest γ a round may ask for: ``min(MAX_GAMMA, the drafter's max_gamma)``."""
    return MAX_GAMMA if max_gamma is None else max(1, min(MAX_GAMMA, max_gamma))


def heuristic_step(gamma: int, accepted: int, cap: int) -> int:
    """transformers' heuristic update: ``γ + 2`` (at most ``cap``) when ``accepted ==
    gamma`` (the round committed every draft it was scheduled for), else ``max(1, γ − 1)``."""
    return min(cap, gamma + 2) if accepted == gamma else max(1, gamma - 1)


def scheduled_gamma(schedule: str, start: int, cap: int, accepted: Iterable[int]) -> int:
    """The γ the schedule gives the next round, before the budget cut: ``min(start, cap)``,
    then under ``heuristic`` one :func:`heuristic_step` per finished round's number of
    committed drafts ``accepted`` (in round order)."""
    gamma = min(start, cap)
    if schedule == "heuristic":
        for n in accepted:
            gamma = heuristic_step(gamma, n, cap)
    return gamma


def round_gamma(
    config: SessionConfig, drafter: Drafter, accepted: Iterable[int], *, now: tuple[int, int, int]
) -> int:
    """γ for the next round: :func:`scheduled_gamma` of the finished rounds' ``accepted``
    counts, cut by :func:`~specdec_core.engine.rounds.gamma_for_round`; ``now``: tokens
    ``(generated, committed, context_length)``."""
    cap = gamma_cap(drafter.max_gamma)
    gamma = scheduled_gamma(config.gamma_schedule, config.gamma, cap, accepted)
    generated, committed, context = now
    return gamma_for_round(gamma, generated, config.max_new_tokens, committed, context)


def confidence_for(config: SessionConfig) -> float | None:
    """The confidence stop's threshold for ``Drafter.propose`` (``None``: not this schedule)."""
    return config.confidence if config.gamma_schedule == "confidence" else None


def check_gamma_settings(config: SessionConfig, drafter: Drafter | str | None, tree: bool) -> None:
    """Raises ConfigError (params ``drafter`` = ``reason``, ``schedule``, ``gamma``,
    ``limit``; the English message is the CLI's) for, in order: ``gamma_schedule_tree``
    (a non-constant schedule in a tree: it keeps its fixed shape), ``confidence_ngram`` (the
    confidence stop with prompt lookup, whose one-hot rows never fall under a threshold),
    ``gamma_drafter`` (a chain's γ above the drafter's ``max_gamma``). ``drafter``: an
    object, a registry name or ``None`` (the pair's draft model)."""
    name = drafter if isinstance(drafter, str) else getattr(drafter, "name", "") or "model"
    spec = spec_of(name)  # the table's row: None for a drafter outside it (a test's own)
    if isinstance(drafter, str):
        limit = spec.cls.max_gamma if spec is not None else None
    else:
        limit = getattr(drafter, "max_gamma", None)
    schedule = config.gamma_schedule
    if tree and schedule != "constant":
        code = "gamma_schedule_tree"
        message = f"the {schedule} γ schedule adapts a chain; a tree keeps its fixed shape"
    elif schedule == "confidence" and spec is not None and not spec.confidence:
        code = "confidence_ngram"
        message = "the confidence stop needs draft probabilities; prompt lookup has none"
    elif not tree and limit is not None and config.gamma > limit:
        code = "gamma_drafter"
        message = f"the {name} drafter can propose at most {limit} tokens, γ = {config.gamma}"
    else:
        return
    params = {"drafter": name, "reason": name, "gamma": config.gamma, "limit": limit}
    raise ConfigError(message, code, schedule=schedule, **params)  # reason: err_<code>_mtp
