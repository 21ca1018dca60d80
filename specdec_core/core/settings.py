"""The settings of a session (:class:`SessionConfig`) and their validation: γ, sampling,
draft method, budget, the history-dependent processors, the verification rule and the γ
schedule. Errors carry a ``code`` and ``params`` so the UI can say them in zh or en."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GrammarSpec
from specdec_core.core.inputs import SHORT_CHARS
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.sampling import SamplingConfig

MAX_GAMMA = 16

#: How a model drafter picks each draft token: ``probabilistic`` draws ``y_i ~ q_i`` (the
#: rule needs this at temperature > 0), ``greedy`` takes the argmax (one-hot ``q_i``).
DraftMethod = Literal["probabilistic", "greedy"]

#: The verification rule: ``exact`` (Leviathan et al. 2023, lossless, the default
#: everywhere) or one of the lossy shortcuts of ``rules/lossy.py``, reachable only
#: through an explicit setting (the CLI's ``--acceptance``).
AcceptanceName = Literal["exact", "typical", "threshold"]
ACCEPTANCE_RULES: tuple[str, ...] = ("exact", "typical", "threshold")

#: How the exact rule verifies a chain's drafts: ``token`` (Leviathan et al. 2023: each
#: draft on its own ratio, stop at the first rejection; the default) or ``block`` (Sun et
#: al. 2025, ``rules/block.py``: the block jointly; as exact, never fewer tokens kept in
#: expectation; the same decisions at temperature 0). Trees verify token-wise (SpecInfer).
VerificationName = Literal["token", "block"]
VERIFICATIONS: tuple[str, ...] = ("token", "block")

#: How γ changes from round to round (``engine/schedule.py``): ``constant`` (the
#: default: every round asks for ``gamma``), ``heuristic`` (transformers'
#: ``num_assistant_tokens_schedule="heuristic"``: +2 after a fully accepted round, else −1)
#: or ``confidence`` (transformers' ``ConfidenceCriteria``: drafting stops at a position whose
#: top draft probability is under ``confidence``).
GammaSchedule = Literal["constant", "heuristic", "confidence"]
GAMMA_SCHEDULES: tuple[str, ...] = ("constant", "heuristic", "confidence")


@dataclass(frozen=True)
class SessionConfig:
    """Settings of a session (validated by :meth:`validate`).

    ``gamma``: draft length γ, 1..``MAX_GAMMA``. ``temperature`` 0 = greedy.
    ``draft_method``: ``probabilistic`` (sample from ``q``) or ``greedy`` (argmax,
    one-hot ``q``). ``max_new_tokens`` ≥ 1. ``stop_strings``: generation stops right after
    the token that completes one. ``top_n``: tokens kept per distribution in traces.
    ``repetition_penalty`` / ``frequency_penalty`` / ``presence_penalty`` /
    ``no_repeat_ngram_size`` and ``grammar``: the history-dependent processors
    (``core/processors.py``), applied to ``p`` and ``q`` on each row's own prefix.
    ``acceptance``: the verification rule, ``exact`` (default, lossless) or the lossy
    ``typical`` / ``threshold`` (``rules/lossy.py``), with ``acceptance_delta`` (δ in
    [0, 1], both), ``acceptance_epsilon`` (ε in (0, 1], typical) and ``acceptance_top_k``
    (0..V, threshold); they change sampled rounds only (at temperature 0 both lossy rules
    accept exactly the target's argmax).
    ``verification``: how the exact rule verifies a chain's drafts (:data:`VERIFICATIONS`;
    ``token`` by default, ``block`` with the exact rule only).
    ``gamma_schedule``: how γ changes from round to round (:data:`GAMMA_SCHEDULES`,
    ``engine/schedule.py``; ``constant`` by default) and ``confidence``, the confidence
    stop's threshold in (0, 1) (used by ``confidence`` only; 0.4 is transformers'
    ``assistant_confidence_threshold`` default).
    """

    gamma: int = 4
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    draft_method: DraftMethod = "probabilistic"
    seed: int = 0
    max_new_tokens: int = 40
    stop_strings: tuple[str, ...] = ()
    repropose_after_edit: bool = True
    top_n: int = 8
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    grammar: GrammarSpec | None = None
    acceptance: AcceptanceName = "exact"
    acceptance_delta: float = 0.3
    acceptance_epsilon: float = 0.09
    acceptance_top_k: int = 1
    gamma_schedule: GammaSchedule = "constant"
    confidence: float = 0.4
    verification: VerificationName = "token"

    @property
    def lossy(self) -> bool:
        """Whether the verification rule is a lossy one (``typical`` / ``threshold``,
        ``rules/lossy.py``): never the default; the output then no longer follows ``p``."""
        return self.acceptance != "exact"

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_k, self.top_p)

    @property
    def penalties(self) -> PenaltyConfig:
        return PenaltyConfig(
            self.repetition_penalty,
            self.frequency_penalty,
            self.presence_penalty,
            self.no_repeat_ngram_size,
        )

    def validate(self, vocab_size: int | None = None) -> SessionConfig:
        if not isinstance(self.gamma, int) or not 1 <= self.gamma <= MAX_GAMMA:
            raise ConfigError(
                f"γ (gamma) must be a whole number from 1 to {MAX_GAMMA}, got {self.gamma!r}"
            )
        self.sampling.validate(vocab_size)
        if self.draft_method not in ("probabilistic", "greedy"):
            raise ConfigError(
                f"draft method must be probabilistic or greedy, got {self.draft_method!r}"
            )
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError(f"seed must be a whole number from 0 to 2**63 − 1, got {self.seed!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(f"max new tokens must be ≥ 1, got {self.max_new_tokens!r}")
        self.penalties.validate()
        self._validate_acceptance(vocab_size)
        self._validate_schedule()
        if self.grammar is not None:
            if not isinstance(self.grammar, GrammarSpec):
                raise ConfigError(f"grammar must be a GrammarSpec, got {self.grammar!r}")
            self.grammar.validate()
        return self

    def _validate_schedule(self) -> None:
        """The γ schedule and the confidence threshold (``engine/schedule.py``).

        Raises:
            ConfigError: codes ``bad_gamma_schedule`` (``schedule``: not one of
                :data:`GAMMA_SCHEDULES`), ``bad_confidence`` (``value``: not a number in
                the open interval (0, 1); checked whatever the schedule).
        """
        schedule = self.gamma_schedule
        if not isinstance(schedule, str) or schedule not in GAMMA_SCHEDULES:
            shown = str(schedule)[:SHORT_CHARS]
            raise ConfigError(
                f"γ schedule must be one of {', '.join(GAMMA_SCHEDULES)}, got {shown!r}",
                "bad_gamma_schedule",
                schedule=shown,
            )
        value = self.confidence
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not (ok and math.isfinite(value) and 0.0 < value < 1.0):
            raise ConfigError(
                f"confidence must be a number strictly between 0 and 1, got {value!r}",
                "bad_confidence",
                value=str(value)[:SHORT_CHARS],
            )

    def _validate_acceptance(self, vocab_size: int | None) -> None:
        """The verification rule and its knobs (``rules/lossy.py``, ``rules/block.py``).

        Raises:
            ConfigError: codes ``bad_verification`` (``rule``: not token/block),
                ``verification_lossy`` (``rule``: block with a lossy rule),
                ``acceptance_rule`` (``rule``: not exact/typical/threshold),
                ``acceptance_delta`` / ``acceptance_epsilon`` (``value``: δ not a number in
                [0, 1], ε not in (0, 1]), ``acceptance_top_k`` (``value``, ``vocab``: not a
                whole number 0..V).
        """
        how = self.verification
        if not isinstance(how, str) or how not in VERIFICATIONS:
            shown = str(how)[:SHORT_CHARS]
            raise ConfigError(
                f"verification must be one of {', '.join(VERIFICATIONS)}, got {shown!r}",
                "bad_verification",
                rule=shown,
            )
        rule = self.acceptance
        if how != "token" and rule != "exact":  # block verification is exact
            raise ConfigError(
                f"block verification is an exact rule; it cannot be combined with {rule!r}",
                "verification_lossy",
                rule=str(rule)[:SHORT_CHARS],
            )
        if not isinstance(rule, str) or rule not in ACCEPTANCE_RULES:
            shown = str(rule)[:SHORT_CHARS]
            raise ConfigError(
                f"acceptance rule must be one of {', '.join(ACCEPTANCE_RULES)}, got {shown!r}",
                "acceptance_rule",
                rule=shown,
            )
        for name, value, low_open in (
            ("delta", self.acceptance_delta, False),
            ("epsilon", self.acceptance_epsilon, True),
        ):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and math.isfinite(value) and (0.0 < value if low_open else 0.0 <= value)
            if not (ok and value <= 1.0):
                span = "(0, 1]" if low_open else "[0, 1]"
                raise ConfigError(
                    f"acceptance {name} must be a number in {span}, got {value!r}",
                    f"acceptance_{name}",
                    value=str(value)[:SHORT_CHARS],
                )
        k, vocab = self.acceptance_top_k, vocab_size if vocab_size is not None else 2**31
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= vocab:
            raise ConfigError(
                f"acceptance top-k must be a whole number from 0 to {vocab}, got {k!r}",
                "acceptance_top_k",
                value=str(k)[:SHORT_CHARS],
                vocab=vocab,
            )


#: Longest prompt text accepted, in characters: checked before tokenizing, so a
