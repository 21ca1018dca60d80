"""Student input and settings: the session config and its validation, prompt encoding,
one-token edit text. Errors carry a ``code`` and ``params`` so the UI can say them in zh
or en."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specdec_core.core.errors import InputError, PromptError, TokenTextError
from specdec_core.core.grammar import GrammarSpec
from specdec_core.core.models import ModelPair
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.sampling import ConfigError, SamplingConfig

MAX_GAMMA = 16

#: How a model drafter picks each draft token: ``probabilistic`` draws ``y_i ~ q_i`` (the
#: rule needs this at temperature > 0), ``greedy`` takes the argmax (one-hot ``q_i``).
DraftMethod = Literal["probabilistic", "greedy"]

#: The verification rule: ``exact`` (Leviathan et al. 2023, lossless, the default
#: everywhere) or one of the lossy shortcuts of ``rules/lossy.py``, reachable only
#: through an explicit setting (the CLI's ``--acceptance``).
AcceptanceName = Literal["exact", "typical", "threshold"]
ACCEPTANCE_RULES: tuple[str, ...] = ("exact", "typical", "threshold")

#: How γ changes from round to round (``engine/schedule.py``): ``constant`` (the
#: default: every round asks for ``gamma``), ``heuristic`` (transformers'
#: ``num_assistant_tokens_schedule="heuristic"``: +2 after a fully accepted round, else −1)
#: or ``confidence`` (transformers' ``ConfidenceCriteria``: drafting stops at a position whose
#: top draft probability is under ``confidence``).
GammaSchedule = Literal["constant", "heuristic", "confidence"]
GAMMA_SCHEDULES: tuple[str, ...] = ("constant", "heuristic", "confidence")


def is_valid_text(text: object) -> bool:
    """Whether ``text`` is a ``str`` of valid Unicode: encodable as UTF-8, i.e. no lone
    surrogate (``"\\ud800"`` decodes from JSON but breaks the tokenizer, protobuf and
    every later encode). Cheap: one C-level encode, ≈ 1 ms per MB."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def single_token_id(pair: ModelPair, text: str) -> int:
    """The id of ``text`` if it encodes to exactly one token (e.g. ``" night"``).

    Raises:
        TokenTextError: zero or several tokens (the message lists the pieces), or text that
            is not valid Unicode (code ``bad_text``).
    """
    if not is_valid_text(text):
        raise TokenTextError("the text is not valid Unicode (a lone surrogate)", "bad_text")
    ids = pair.tokenizer.encode(text, add_special_tokens=False) if text else []
    if len(ids) != 1:
        shown = [pair.tokenizer.decode([i]).replace(" ", "␣").replace("\n", "↵") for i in ids]
        pieces = " | ".join(shown[:12]) + (" | …" if len(shown) > 12 else "") or "∅"
        short = text if len(text) <= 40 else text[:40] + "…"
        raise TokenTextError(
            f"{short!r} is {len(ids)} tokens, not exactly one: {pieces}",
            "not_one_token",
            text=short.replace(" ", "␣"),
            n=len(ids),
            pieces=pieces,
        )
    return ids[0]


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
        """The verification rule and its knobs (``rules/lossy.py``).

        Raises:
            ConfigError: codes ``acceptance_rule`` (``rule``: not exact/typical/threshold),
                ``acceptance_delta`` / ``acceptance_epsilon`` (``value``: δ not a number in
                [0, 1], ε not in (0, 1]), ``acceptance_top_k`` (``value``, ``vocab``: not a
                whole number 0..V).
        """
        rule = self.acceptance
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
#: multi-megabyte paste costs nothing (a 1024-token GPT-2 context is ≈ 4–5 k characters).
MAX_PROMPT_CHARS = 20_000


#: Longest one-token edit text or rule-lab token name, in characters; also how much of a bad
#: value an error message quotes.
SHORT_CHARS = 40


def whole_number(value: object, low: int, high: int, what: str) -> int:
    """``value`` as an int in ``low..high`` (a float only when it is whole).

    Raises:
        InputError: code ``bad_value`` (not a whole number, or out of range); ``params``
        ``what``, ``low``, ``high`` and ``value`` (its first :data:`SHORT_CHARS` characters).
    """
    try:
        number = int(value)  # type: ignore[call-overload]
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not low <= number <= high:
        shown = str(value)[:SHORT_CHARS]
        raise InputError(
            f"{what} must be a whole number from {low} to {high}, got {shown!r}",
            "bad_value",
            what=what,
            low=low,
            high=high,
            value=shown,
        )
    return number


def encode_prompt(pair: ModelPair, prompt: str) -> list[int]:
    """Tokenize a prompt and check it fits (:func:`check_prompt_ids`).

    Any text that encodes to at least one token is a prompt, whitespace included (``"\n"``
    is one token).

    Raises:
        PromptError: empty, over :data:`MAX_PROMPT_CHARS` characters (checked before
            tokenizing), not valid Unicode (``prompt_bad_text``: a lone surrogate, which the
            tokenizer would refuse with a ``TypeError``), no tokens, or too long for the
            context.
    """
    if not isinstance(prompt, str) or not prompt:
        raise PromptError("the prompt is empty: type some text to continue", "prompt_empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(
            f"the prompt has {len(prompt)} characters; at most {MAX_PROMPT_CHARS} are accepted",
            "prompt_too_many_chars",
            chars=len(prompt),
            limit=MAX_PROMPT_CHARS,
        )
    if not is_valid_text(prompt):
        raise PromptError("the prompt is not valid Unicode (a lone surrogate)", "prompt_bad_text")
    return check_prompt_ids(pair, pair.tokenizer.encode(prompt, add_special_tokens=False))


def check_prompt_ids(pair: ModelPair, ids: Sequence[int]) -> list[int]:
    """``ids`` as a list if they are a usable prompt: 1..``context_length − 1`` whole
    numbers, each a token id in ``[0, V)``.

    Raises:
        PromptError: empty, too long for the context, or an id out of range.
    """
    ids = list(ids)
    if not ids:
        raise PromptError("the prompt encodes to no tokens", "prompt_empty")
    limit = pair.context_length - 1
    if len(ids) > limit:
        raise PromptError(
            f"the prompt has {len(ids)} tokens; this pair's context holds "
            f"{pair.context_length}, so a prompt may have at most {limit} tokens",
            "prompt_too_long",
            tokens=len(ids),
            context=pair.context_length,
            limit=limit,
        )
    bad = [t for t in ids if isinstance(t, bool) or not isinstance(t, int | np.integer)]
    bad += [t for t in ids if t not in bad and not 0 <= int(t) < pair.vocab_size]
    if bad:
        raise PromptError(
            f"prompt ids must be token ids from 0 to {pair.vocab_size - 1}, got {bad[0]!r}",
            "prompt_bad_id",
            token=str(bad[0])[:20],
            vocab=pair.vocab_size,
        )
    return [int(t) for t in ids]


def prompt_ids(pair: ModelPair, prompt: str | Sequence[int]) -> list[int]:
    """Text (:func:`encode_prompt`) or ids (:func:`check_prompt_ids`) → checked ids: the
    one prompt validation of the step machine, the fast path and the comparisons."""
    if isinstance(prompt, str):
        return encode_prompt(pair, prompt)
    return check_prompt_ids(pair, prompt)


# ---------------------------------------------------------------- JSON from outside
#: Deepest nesting of arrays and objects accepted in JSON from a link or a file (a trace
#: file needs 7). Checked on the raw text before parsing: ``json.loads`` recurses once per
#: level, so 30,000 nested ``[`` raise ``RecursionError``, which no caller expects.
MAX_JSON_DEPTH = 16
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _scan(raw: bytes) -> tuple[int, bool]:
    """The deepest nesting of ``[`` / ``{`` outside strings in JSON bytes, and whether a
    number may not fit a float (an exponent that is not negative, or a run of ≥ 300
    digits). Vectorised over the sparse positions of quotes, brackets and exponents:
    ≈ 30 ms for a 5 MB trace file on an idle core (a regex took ≈ 140 ms)."""
    b = np.frombuffer(raw, dtype=np.uint8)
    quotes = np.flatnonzero(b == ord('"'))
    escaped = quotes[(quotes > 0) & (b[quotes - 1] == ord("\\"))]
    if escaped.size:  # a quote is escaped when an odd number of backslashes runs before it
        idx = np.arange(len(b))
        last_other = np.maximum.accumulate(np.where(b != ord("\\"), idx, -1))
        odd = (escaped - 1 - last_other[escaped - 1]) % 2 == 1
        quotes = np.setdiff1d(quotes, escaped[odd], assume_unique=True)

    def outside(positions: np.ndarray) -> np.ndarray:  # an even number of quotes before
        return positions[np.searchsorted(quotes, positions) % 2 == 0]

    opening = outside(np.flatnonzero((b == ord("[")) | (b == ord("{"))))
    closing = outside(np.flatnonzero((b == ord("]")) | (b == ord("}"))))
    depth = 0
    if opening.size:
        order = np.argsort(np.concatenate([opening, closing]), kind="stable")
        steps = np.concatenate([np.ones(opening.size), -np.ones(closing.size)])[order]
        depth = int(np.cumsum(steps).max())
    e = outside(np.flatnonzero((b[:-1] == ord("e")) | (b[:-1] == ord("E"))))
    after = b[e + 1]  # "1e+300", "1e300": may overflow; "1e-05" cannot; "true," is no number
    big_exp = bool(np.any((after == ord("+")) | ((after >= ord("0")) & (after <= ord("9")))))
    digit = np.concatenate([[0], ((b >= ord("0")) & (b <= ord("9"))).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(digit))  # run starts and ends, alternating
    long_run = bool(edges.size) and int((edges[1::2] - edges[::2]).max()) >= 300
    return depth, big_exp or long_run


def _all_text_valid(value: object) -> bool:
    if isinstance(value, str):
        return is_valid_text(value)
    if isinstance(value, list):
        return all(_all_text_valid(v) for v in value)
    if isinstance(value, dict):
        return all(is_valid_text(k) and _all_text_valid(v) for k, v in value.items())
    return True


def load_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH, strict: bool = True) -> object:
    """``json.loads`` for JSON from outside (a link, an uploaded file): nesting bounded
    *before* parsing; with ``strict`` also every string valid Unicode (no lone surrogate
    from a ``\\ud800`` escape) and every number finite (``1e400`` would parse as
    ``inf``; ``NaN`` is refused). ``strict=False`` leaves both to a field-by-field check
    (a link drops the one bad field and keeps the rest).

    Raises:
        ValueError: (only) for bytes that are not such JSON: not UTF-8, nested deeper than
            ``max_depth``, not JSON, a lone surrogate, a non-finite number, an integer
            over Python's 4,300-digit limit.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8")  # raises UnicodeEncodeError (a ValueError) on surrogates
    depth, odd_numbers = _scan(raw)
    if depth > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    text = raw.decode("utf-8")
    hooks = {"parse_constant": _refuse_constant} if strict else {}
    if odd_numbers and strict:  # slow path (a call per float) only for text that may hold one
        hooks["parse_float"] = _finite_float
    try:
        data = json.loads(text, **hooks)
    except RecursionError as exc:  # cannot happen below max_depth; never escapes anyway
        raise ValueError("JSON nested too deeply") from exc
    if strict and _SURROGATE_ESCAPE.search(raw) and not _all_text_valid(data):
        raise ValueError("JSON text that is not valid Unicode (a lone surrogate)")
    return data


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value
