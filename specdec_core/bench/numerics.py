"""Lossless "up to hardware numerics": the verification forward's logits
against one-token decode steps over the same prefix, in float32 and in lower precision,
and a bounded, seeded search for a near-tie where greedy speculative decoding and the
greedy target alone part ways.

The algorithm is exact: the verify forward computes the same function as ``γ + 1`` decode
steps. The arithmetic is not: one forward over ``γ + 1`` new tokens multiplies a
``[γ + 1, d]`` matrix where a decode step multiplies ``[1, d]``, and the kernels may sum in
a different order (real reports: vLLM #7627, transformers #39421 "batched vs single GEMM,
expected"). In float32 the difference is ~1e-6 on a logit; in bfloat16 (8 bits of
mantissa) it is ~1e-2, and where the top two logits are closer than that the argmax — the
greedy token — can flip. Logprobs themselves are never promised to match.

Precisions are copies of the shared pair (``core/quant.variant_pair``); the shared pair is
never modified. All logits are float32 numbers (cast up after the forward); margins and
differences are in logit units (nats).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from specdec_core.core.inputs import prompt_ids, whole_number
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import variant_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import GenerationResult, generate

MAX_GAMMA = 16
MAX_SEARCH_PROMPTS = 200
MAX_SEARCH_TOKENS = 64
#: A margin under this many logit units counts as a near-tie (≈ 2 bfloat16 ulps at |x| ≈ 4).
NEAR_TIE = 0.0625


@dataclass(frozen=True)
class PositionNumerics:
    """One verified position: row ``index`` (0 = after the last prompt token, ``i`` =
    after draft ``y_i``). ``max_abs_delta``: ``max_x |verify(x) − decode(x)|``;
    ``margin_decode`` / ``margin_verify``: top-1 minus top-2 logit of each row;
    ``argmax_decode`` / ``argmax_verify``: the greedy token of each; ``flip``: they
    differ."""

    index: int
    max_abs_delta: float
    margin_decode: float
    margin_verify: float
    argmax_decode: int
    argmax_verify: int

    @property
    def flip(self) -> bool:
        return self.argmax_decode != self.argmax_verify


@dataclass(frozen=True)
class NumericsReport:
    """:func:`verify_vs_decode`: ``dtype`` (name), ``device``, ``prompt_ids`` ``[L]``,
    ``draft_ids`` ``[γ]``, ``positions`` (``γ + 1`` :class:`PositionNumerics`)."""

    dtype: str
    device: str
    prompt_ids: tuple[int, ...]
    draft_ids: tuple[int, ...]
    positions: tuple[PositionNumerics, ...]

    @property
    def max_abs_delta(self) -> float:
        return max(p.max_abs_delta for p in self.positions)

    @property
    def flips(self) -> tuple[int, ...]:
        """Row indices where the argmax differs."""
        return tuple(p.index for p in self.positions if p.flip)


def _top2(row: torch.Tensor) -> tuple[int, float, int, float]:
    values, ids = torch.topk(row.float(), 2)
    return int(ids[0]), float(values[0]), int(ids[1]), float(values[1])


def _margin(row: torch.Tensor) -> float:
    """Top-1 minus top-2 logit of a ``[V]`` row."""
    _, first, _, second = _top2(row)
    return first - second


def greedy_drafts(pair: ModelPair, ids: list[int], gamma: int) -> list[int]:
    """The draft model's ``gamma`` greedy tokens after ``ids`` (one-token steps)."""
    cache = ModelCache(pair.draft)
    out: list[int] = []
    for _ in range(gamma):
        out.append(int(cache.extend(cache.sync_to(ids + out))[-1].argmax()))
    return out


def decode_and_verify_logits(
    model: torch.nn.Module, ids: list[int], drafts: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's rows after ``ids[-1], y_1..y_γ`` computed twice over the same cached
    prefix ``ids[:-1]``: ``γ + 1`` one-token decode steps, and ONE verification forward
    over ``[ids[-1]] + drafts`` (the engine's :func:`~specdec_core.engine.chain.round.verify`
    forward). Returns ``(decode, verify)``, each ``[γ + 1, V]`` float32 CPU."""
    rows = []
    for feed_as_one in (False, True):
        cache = ModelCache(model)
        if len(ids) > 1:
            cache.extend(ids[:-1])
        feed = [ids[-1], *drafts]
        if feed_as_one:
            rows.append(cache.extend(feed).cpu())
        else:
            rows.append(torch.stack([cache.extend([t])[-1] for t in feed]).cpu())
    return rows[0], rows[1]


def verify_vs_decode(
    pair: ModelPair,
    prompt: str | list[int],
    dtype: str = "float32",
    gamma: int = 4,
    draft_ids: list[int] | None = None,
) -> NumericsReport:
    """Verify-forward logits against one-token decode steps for one prompt and its drafts.

    Args:
        pair: the shared pair (a copy in ``dtype`` is used: ``core/quant.variant_pair``).
        prompt: text or ids. dtype: ``float32``, ``bfloat16`` or ``float16``.
        gamma: drafts when ``draft_ids`` is ``None`` (the float32 draft model's greedy
            tokens, so every precision compares the same tokens), 1..16.
        draft_ids: explicit drafts ``[γ]`` (valid token ids).

    Returns:
        :class:`NumericsReport` (logit units; float32 numbers).

    Raises:
        PromptError, InputError (``bad_value``: γ out of range), ConfigError
        (``dtype_unknown``, ``dtype_unsupported`` on a device without that precision).
    """
    variant = variant_pair(pair, dtype=dtype)
    ids = prompt_ids(pair, prompt)
    if draft_ids is None:
        gamma = whole_number(gamma, 1, MAX_GAMMA, "γ")
        with torch.inference_mode():
            draft_ids = greedy_drafts(pair, ids, gamma)
    drafts = prompt_ids(pair, list(draft_ids)) if draft_ids else []
    with torch.inference_mode():
        decode, verify = decode_and_verify_logits(variant.target, ids, drafts)
    positions = []
    for i in range(len(drafts) + 1):
        a_d, v1_d, _, v2_d = _top2(decode[i])
        a_v, v1_v, _, v2_v = _top2(verify[i])
        delta = float((verify[i] - decode[i]).abs().max())
        positions.append(PositionNumerics(i, delta, v1_d - v2_d, v1_v - v2_v, a_d, a_v))
    return NumericsReport(dtype, pair.device, tuple(ids), tuple(drafts), tuple(positions))


@dataclass(frozen=True)
class FlipCase:
    """A prompt where greedy speculative decoding and the greedy target alone diverge in a
    lower precision, because two logits nearly tie.

    Attributes:
        prompt: the text. dtype: the precision of the divergence.
        position: index in the generated tokens (0 = first) where they first differ.
        alone_token / spec_token: the two ids chosen there (target alone: a one-token
            decode step; speculative: the round's verification forward).
        decode_logits: ``(logit of alone_token, logit of spec_token)`` in the decode row.
        verify_logits: the same two logits in the verification row.
        margin: ``decode_logits[0] − decode_logits[1]`` (≥ 0: the decode step's argmax
            wins there), the near-tie.
        alone_ids / spec_ids: both outputs in ``dtype``.
        float32_agree: in float32 the two outputs of the same prompt are identical.
        float32_logits: the two tokens' logits in float32 after the same context (decode).
        round_index: the speculative round that decided ``position``; row: its row.
    """

    prompt: str
    dtype: str
    position: int
    alone_token: int
    spec_token: int
    decode_logits: tuple[float, float]
    verify_logits: tuple[float, float]
    margin: float
    alone_ids: tuple[int, ...]
    spec_ids: tuple[int, ...]
    float32_agree: bool
    float32_logits: tuple[float, float]
    round_index: int
    row: int


@dataclass(frozen=True)
class FlipSearch:
    """:func:`find_flip`: the first :class:`FlipCase` found (``None``: none within the
    bound), ``tried`` prompts, ``positions`` greedy steps looked at, ``near_ties`` of them
    with a decode margin under :data:`NEAR_TIE`, ``smallest_margin`` seen (logit units)."""

    case: FlipCase | None
    tried: int
    positions: int
    near_ties: int
    smallest_margin: float


def greedy_alone(
    model: torch.nn.Module, ids: list[int], n: int, eos_token_id: int | None
) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy target alone, exactly as the fast path's autoregressive loop runs it
    (``extend_last`` over the ids not yet cached, argmax): up to ``n`` ids (stops after
    EOS) and each step's ``[V]`` float32 CPU row."""
    cache = ModelCache(model)
    out: list[int] = []
    rows: list[torch.Tensor] = []
    while len(out) < n:
        row = cache.extend_last(cache.sync_to(ids + out)).cpu()
        rows.append(row)
        out.append(int(row.argmax()))
        if eos_token_id is not None and out[-1] == eos_token_id:
            break
    return out, rows


def _verify_row(
    model: torch.nn.Module, ids: list[int], records: tuple, position: int
) -> tuple[torch.Tensor, int, int]:
    """Replay the speculative run's verification forwards (same feeds, same cache
    surgery as the fast path) up to the round that decided generated ``position``; returns
    that round's ``[V]`` row for it, the round index and the row index."""
    cache = ModelCache(model)
    committed = list(ids)
    start = 0
    for r, record in enumerate(records):
        drafted = list(record.drafted)
        logits = cache.extend(cache.sync_to(committed + drafted))[-(len(drafted) + 1) :]
        if position < start + len(record.appended):
            row = position - start
            return logits[row].cpu(), r, row
        committed += list(record.appended)
        start += len(record.appended)
    raise ValueError(f"position {position} is beyond the run")


def find_flip(
    pair: ModelPair,
    prompts: list[str],
    dtype: str = "bfloat16",
    seed: int = 0,
    max_prompts: int = 40,
    max_new_tokens: int = 16,
    gamma: int = 4,
) -> FlipSearch:
    """Search ``prompts`` (in an order shuffled by ``seed``, at most ``max_prompts`` of
    them) for one where, in ``dtype``, greedy speculative decoding (the engine's fast path,
    draft and target both in ``dtype``) and the greedy target alone differ within
    ``max_new_tokens`` tokens. Stops at the first such prompt.

    Returns:
        :class:`FlipSearch` (the case with both logits, the margin, and the float32 check:
        the same prompt decoded both ways in float32, on the shared pair).

    Raises:
        InputError (``bad_value``: a bound out of range), ConfigError (``dtype_unknown``,
        ``dtype_unsupported``), PromptError.
    """
    max_prompts = whole_number(max_prompts, 1, MAX_SEARCH_PROMPTS, "prompts")
    max_new_tokens = whole_number(max_new_tokens, 2, MAX_SEARCH_TOKENS, "new tokens")
    gamma = whole_number(gamma, 1, MAX_GAMMA, "γ")
    low = variant_pair(pair, dtype=dtype)
    order = list(prompts)
    random.Random(seed).shuffle(order)
    config = SessionConfig(gamma=gamma, max_new_tokens=max_new_tokens)
    tried = positions = near = 0
    smallest = float("inf")
    with torch.inference_mode():
        for prompt in order[:max_prompts]:
            tried += 1
            ids = prompt_ids(pair, prompt)
            alone, rows = greedy_alone(low.target, ids, max_new_tokens, pair.eos_token_id)
            margins = [_margin(r) for r in rows]
            positions += len(margins)
            near += sum(m < NEAR_TIE for m in margins)
            smallest = min([smallest, *margins])
            spec = generate(low, ids, config, "speculative")
            if spec.output_ids == alone:
                continue
            j = next(
                (i for i, (a, s) in enumerate(zip(alone, spec.output_ids, strict=False)) if a != s),
                min(len(alone), len(spec.output_ids)),
            )
            if j >= len(alone) or j >= len(spec.output_ids):
                continue  # one stopped (a stop string/context) where the other did not
            case = _case(pair, low, prompt, ids, dtype, alone, rows, spec, j, config)
            return FlipSearch(case, tried, positions, near, smallest)
    return FlipSearch(None, tried, positions, near, smallest)


def _case(
    pair: ModelPair,
    low: ModelPair,
    prompt: str,
    ids: list[int],
    dtype: str,
    alone: list[int],
    rows: list[torch.Tensor],
    spec: GenerationResult,
    j: int,
    config: SessionConfig,
) -> FlipCase:
    """The :class:`FlipCase` at generated position ``j`` (see :func:`find_flip`)."""
    a, s = alone[j], spec.output_ids[j]
    verify_row, r, row = _verify_row(low.target, ids, spec.records, j)
    decode_row = rows[j]
    context = ids + alone[:j]
    f32_row = ModelCache(pair.target).extend(context)[-1].cpu()
    f32_alone = generate(pair, ids, config, "autoregressive").output_ids
    f32_spec = generate(pair, ids, config, "speculative").output_ids
    return FlipCase(
        prompt=prompt,
        dtype=dtype,
        position=j,
        alone_token=a,
        spec_token=s,
        decode_logits=(float(decode_row[a]), float(decode_row[s])),
        verify_logits=(float(verify_row[a]), float(verify_row[s])),
        margin=float(decode_row[a] - decode_row[s]),
        alone_ids=tuple(alone),
        spec_ids=tuple(spec.output_ids),
        float32_agree=f32_alone == f32_spec,
        float32_logits=(float(f32_row[a]), float(f32_row[s])),
        round_index=r,
        row=row,
    )
