"""``generate()``: the fast path — target-only autoregressive baseline and speculative
decoding, with counters and timings but no trace building.

The speculative loop is the round of ``session.py`` without the teaching extras:
propose (serial draft) → verify (one target forward) → commit + rollback.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

from .drafters import Drafter, ModelDrafter
from .kvcache import ModelCache
from .models import ModelPair
from .rounds import commit_tokens, gamma_for_round, rollback, stop_reason_after, verify_drafts
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

    @property
    def tokens_per_s(self) -> float:
        return 1e3 * self.new_tokens / self.total_ms if self.total_ms > 0 else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.new_tokens if self.new_tokens else 0.0

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "ms_per_token": self.ms_per_token,
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
    """
    config = (config or SessionConfig()).validate(pair.vocab_size)
    ids = encode_prompt(pair, prompt) if isinstance(prompt, str) else list(prompt)
    prompt_len = len(ids)
    sampling = config.sampling
    generator = torch.Generator().manual_seed(config.seed)
    target = ModelCache(pair.target)
    stats = GenerationStats()

    def stop(generated: list[int], total_len: int) -> str | None:
        return stop_reason_after(
            generated, total_len, pair.eos_token_id, config.max_new_tokens,
            pair.context_length, config.stop_strings, pair.tokenizer.decode,
        )  # fmt: skip

    started = time.perf_counter()
    reason: str | None = None
    if mode == "autoregressive":
        no_drafts = torch.zeros(0, pair.vocab_size)
        while reason is None:
            _, verdict, _ = verify_drafts(target, ids, [], no_drafts, sampling, generator)
            stats.target_forwards += 1
            ids.append(verdict.next_token)
            reason = stop(ids[prompt_len:], len(ids))
            if stats.target_forwards == 1:
                _sync(pair.device)
                stats.ttft_ms = (time.perf_counter() - started) * 1e3
        stats.verify_ms = (time.perf_counter() - started) * 1e3
    else:
        drafter = drafter or ModelDrafter(pair.draft)
        alpha_sum, alpha_n = 0.0, 0
        drafted_at: list[int] = []
        accepted_at: list[int] = []
        while reason is None:
            gamma = gamma_for_round(
                config.gamma, len(ids) - prompt_len, config.max_new_tokens, len(ids),
                pair.context_length,
            )  # fmt: skip
            draft = drafter.propose(ids, gamma, sampling, config.draft_method, generator)
            t_verify = time.perf_counter()
            draft_ids = draft.ids.tolist()
            p_rows, verdict, _ = verify_drafts(
                target, ids, draft_ids, draft.probs, sampling, generator
            )
            _sync(pair.device)
            stats.verify_ms += (time.perf_counter() - t_verify) * 1e3
            stats.draft_ms += draft.ms
            stats.draft_forwards += draft.forwards
            stats.target_forwards += 1
            stats.rounds += 1
            n, g = verdict.accepted, len(draft_ids)
            if g:
                alpha_sum += float(torch.minimum(p_rows[:g], draft.probs).sum())
                alpha_n += g
            drafted_at += [0] * (g - len(drafted_at))
            accepted_at += [0] * (g - len(accepted_at))
            for i in range(g):
                drafted_at[i] += 1
                accepted_at[i] += i < n
            stats.accepted_histogram += [0] * (n + 1 - len(stats.accepted_histogram))
            stats.accepted_histogram[n] += 1
            stats.mean_accepted += n
            appended, reason = commit_tokens(
                ids, draft_ids[:n] + [verdict.next_token], prompt_len, stop
            )
            ids += appended
            rollback(target, drafter, ids)
            if stats.rounds == 1:
                stats.ttft_ms = (time.perf_counter() - started) * 1e3
        stats.acceptance_rate = alpha_sum / alpha_n if alpha_n else 0.0
        stats.mean_accepted /= max(stats.rounds, 1)
        stats.per_position_acceptance = [
            a / d for a, d in zip(accepted_at, drafted_at, strict=True)
        ]
    _sync(pair.device)
    stats.total_ms = (time.perf_counter() - started) * 1e3
    output = ids[prompt_len:]
    stats.new_tokens = len(output)
    return GenerationResult(output, pair.tokenizer.decode(output), reason, stats)
