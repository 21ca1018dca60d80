"""``generate()``: the fast path — target-only autoregressive baseline and speculative
decoding, with counters and timings but no trace building.

The speculative loop is the round of ``session.py`` without the teaching extras:
propose (serial draft) → verify (one target forward) → commit + rollback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

from .drafters import Drafter, ModelDrafter
from .kvcache import ModelCache
from .models import ModelPair
from .rounds import commit_tokens, gamma_for_round, rollback, stop_reason_after, verify_drafts
from .sampling import SamplingConfig
from .session import SessionConfig, encode_prompt

Mode = Literal["speculative", "autoregressive"]


@dataclass
class GenerationStats:
    """Counters of one generation. Times in milliseconds.

    ``acceptance_rate``: mean over verified drafted positions of ``Σ min(p_i, q_i)`` (the
    per-position acceptance probability α, Leviathan et al. 2023 Def. 3.1).
    ``mean_accepted``: mean accepted drafts per round (0..γ); tokens advanced per round is
    that + 1. ``per_position_acceptance[i]``: fraction of rounds whose draft ``i + 1`` was
    accepted, among rounds that drafted it. ``accepted_histogram[n]``: rounds that accepted
    exactly ``n`` drafts.

    Times: ``draft_ms`` (propose phases), ``verify_ms`` (verify phases; the whole loop in
    autoregressive mode), ``total_ms`` (start to last token), ``ttft_ms`` (to the first
    committed token: the first forward, or the end of the first round), and the time inside
    model forwards alone, ``target_forward_ms`` / ``draft_forward_ms`` (CUDA-synchronised).
    ``overhead_ms`` = total − both forward times: everything that is not a model forward.
    """

    new_tokens: int = 0
    rounds: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    acceptance_rate: float = 0.0
    mean_accepted: float = 0.0
    per_position_acceptance: list[float] = field(default_factory=list)
    accepted_histogram: list[int] = field(default_factory=list)
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    total_ms: float = 0.0
    ttft_ms: float = 0.0
    target_forward_ms: float = 0.0
    draft_forward_ms: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return 1e3 * self.new_tokens / self.total_ms if self.total_ms > 0 else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.new_tokens if self.new_tokens else 0.0

    @property
    def overhead_ms(self) -> float:
        return max(0.0, self.total_ms - self.target_forward_ms - self.draft_forward_ms)

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "ms_per_token": self.ms_per_token,
            "overhead_ms": self.overhead_ms,
        }


@dataclass
class GenerationResult:
    output_ids: list[int]
    text: str
    stop_reason: str
    stats: GenerationStats


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class _Tally:
    """Per-round acceptance bookkeeping of the speculative loop."""

    def __init__(self) -> None:
        self.alpha_sum = 0.0
        self.alpha_n = 0
        self.drafted_at: list[int] = []
        self.accepted_at: list[int] = []
        self.histogram: list[int] = []
        self.accepted = 0

    def add(self, drafted: int, accepted: int, alpha_sum: float) -> None:
        self.alpha_sum += alpha_sum
        self.alpha_n += drafted
        if drafted > len(self.drafted_at):
            grow = drafted - len(self.drafted_at)
            self.drafted_at += [0] * grow
            self.accepted_at += [0] * grow
        for i in range(drafted):
            self.drafted_at[i] += 1
            self.accepted_at[i] += i < accepted
        if accepted >= len(self.histogram):
            self.histogram += [0] * (accepted + 1 - len(self.histogram))
        self.histogram[accepted] += 1
        self.accepted += accepted

    def into(self, stats: GenerationStats) -> None:
        stats.acceptance_rate = self.alpha_sum / self.alpha_n if self.alpha_n else 0.0
        stats.mean_accepted = self.accepted / max(stats.rounds, 1)
        stats.accepted_histogram = self.histogram
        stats.per_position_acceptance = [
            a / d for a, d in zip(self.accepted_at, self.drafted_at, strict=True)
        ]


def generate(
    pair: ModelPair,
    prompt: str | list[int],
    config: SessionConfig | None = None,
    mode: Mode = "speculative",
    drafter: Drafter | None = None,
) -> GenerationResult:
    """Generate up to ``config.max_new_tokens`` tokens after ``prompt``.

    Args:
        pair: loaded models (read-only). prompt: text or ids.
        config: γ, sampling settings, seed (all draws from one CPU ``torch.Generator``).
        mode: ``speculative`` or ``autoregressive`` (target only, one forward per token).
        drafter: draft source (default: the pair's draft model).

    Returns:
        :class:`GenerationResult` (ids exclude the prompt).

    Raises:
        PromptError, ConfigError: bad prompt or settings.

    Greedy decoding (temperature 0) takes a lean path: argmax straight from the logits
    (no one-hot probability rows), the LM head on the last position only where one row is
    needed. It decides exactly what the general path decides (the rule of
    ``verify_greedy``; no random draws), only faster. Sampling always takes the general
    path, which draws from the generator in the order of ``session.py``.
    """
    config = (config or SessionConfig()).validate(pair.vocab_size)
    ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
    prompt_len = len(ids)
    sampling = config.sampling
    generator = torch.Generator().manual_seed(config.seed)
    target = ModelCache(pair.target)
    stats = GenerationStats()
    stop_strings = config.stop_strings

    def stop(generated: list[int], total_len: int) -> str | None:
        return stop_reason_after(
            generated, total_len, pair.eos_token_id, config.max_new_tokens,
            pair.context_length, stop_strings, pair.tokenizer.decode,
        )  # fmt: skip

    with torch.inference_mode():
        started = time.perf_counter()
        if mode == "autoregressive":
            reason = _autoregressive(pair, target, ids, prompt_len, sampling, generator, stop,
                                     stats, started)  # fmt: skip
        else:
            drafter = drafter or ModelDrafter(pair.draft)
            reason = _speculative(pair, target, drafter, ids, prompt_len, config, generator,
                                  stop, stats, started)  # fmt: skip
            draft_kv = getattr(drafter, "kv", None)
            stats.draft_forward_ms = draft_kv.forward_ms if draft_kv is not None else 0.0
        _sync(pair.device)
        stats.total_ms = (time.perf_counter() - started) * 1e3
    stats.target_forward_ms = target.forward_ms
    output = ids[prompt_len:]
    stats.new_tokens = len(output)
    return GenerationResult(output, pair.tokenizer.decode(output), reason, stats)


def _autoregressive(
    pair: ModelPair,
    target: ModelCache,
    ids: list[int],
    prompt_len: int,
    sampling: SamplingConfig,
    generator: torch.Generator,
    stop: Callable[[list[int], int], str | None],
    stats: GenerationStats,
    started: float,
) -> str:
    """Target only, one forward per token (``ids`` grows in place). Returns the stop
    reason."""
    reason: str | None = None
    no_drafts = torch.zeros(0, pair.vocab_size)
    while reason is None:
        if sampling.greedy:
            token = int(target.extend_last(target.sync_to(ids)).argmax())
        else:
            _, verdict, _ = verify_drafts(target, ids, [], no_drafts, sampling, generator)
            token = verdict.next_token
        stats.target_forwards += 1
        ids.append(token)
        reason = stop(ids[prompt_len:], len(ids))
        if stats.target_forwards == 1:
            _sync(pair.device)
            stats.ttft_ms = (time.perf_counter() - started) * 1e3
    stats.verify_ms = (time.perf_counter() - started) * 1e3
    return reason


def _speculative(
    pair: ModelPair,
    target: ModelCache,
    drafter: Drafter,
    ids: list[int],
    prompt_len: int,
    config: SessionConfig,
    generator: torch.Generator,
    stop: Callable[[list[int], int], str | None],
    stats: GenerationStats,
    started: float,
) -> str:
    """Rounds of propose → verify → commit + rollback until a stop (``ids`` grows in
    place). Returns the stop reason."""
    sampling = config.sampling
    # greedy with a model drafter (not one that changes how it proposes): the lean round
    lean = sampling.greedy and type(drafter).propose is ModelDrafter.propose
    tally = _Tally()
    reason: str | None = None
    while reason is None:
        gamma = gamma_for_round(
            config.gamma, len(ids) - prompt_len, config.max_new_tokens, len(ids),
            pair.context_length,
        )  # fmt: skip
        t_draft = time.perf_counter()
        if lean:  # greedy: argmax only, no q rows, no random draws
            draft_ids = drafter.propose_greedy_ids(ids, gamma)
            _sync(pair.device)
            t_verify = time.perf_counter()
            stats.draft_ms += (t_verify - t_draft) * 1e3
            stats.draft_forwards += gamma
            logits = target.extend(target.sync_to(ids + draft_ids))[-(gamma + 1) :]
            target_argmax = logits.argmax(dim=-1).tolist()  # [γ + 1]
            matches = [y == a for y, a in zip(draft_ids, target_argmax, strict=False)]
            n = matches.index(False) if False in matches else gamma
            next_token = target_argmax[n]
            alpha_sum = float(sum(matches))  # Σ min(p, q) is 1 on a match, 0 otherwise
        else:
            draft = drafter.propose(ids, gamma, sampling, config.draft_method, generator)
            t_verify = time.perf_counter()
            stats.draft_ms += draft.ms
            stats.draft_forwards += draft.forwards
            draft_ids = draft.ids.tolist()
            p_rows, verdict, _ = verify_drafts(
                target, ids, draft_ids, draft.probs, sampling, generator
            )
            n, next_token = verdict.accepted, verdict.next_token
            g = len(draft_ids)
            alpha_sum = float(torch.minimum(p_rows[:g], draft.probs).sum()) if g else 0.0
        _sync(pair.device)
        stats.verify_ms += (time.perf_counter() - t_verify) * 1e3
        stats.target_forwards += 1
        stats.rounds += 1
        tally.add(len(draft_ids), n, alpha_sum)
        appended, reason = commit_tokens(ids, draft_ids[:n] + [next_token], prompt_len, stop)
        ids += appended
        rollback(target, drafter, ids)
        if stats.rounds == 1:
            stats.ttft_ms = (time.perf_counter() - started) * 1e3
    tally.into(stats)
    return reason
