"""The verify-cost curve times a round as a run runs it: after other rounds, at the size
a run's proposal has (``bench/curve.py``)."""

from __future__ import annotations

from specdec_core.bench.curve import ROUND_WARMUP, _round_timer, measure_forward_curve
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.kvcache import ModelCache
from specdec_core.drafters.registry import make_named_drafter

PROMPT = "First Citizen:\nWe are"


class _WarmingDrafter:
    """A drafter whose proposals cost 3.0, 2.0, 1.5, then 1.0 ms of ``forward_ms`` each
    (a small model's forward right after other forwards, warming over rounds)."""

    draft_cost = "one_forward"

    def __init__(self) -> None:
        self.forward_ms, self.rolled, self.costs = 0.0, [], [3.0, 2.0, 1.5]

    def rollback(self, length: int) -> int:
        self.rolled.append(length)
        return 0

    def propose_argmax(self, context: list[int], gamma: int) -> tuple[list[int], int]:
        self.forward_ms += self.costs.pop(0) if self.costs else 1.0
        return [1] * gamma, 1


def test_the_round_is_timed_after_rounds_back_to_back(tiny_pair):
    ids = encode_prompt(tiny_pair, PROMPT)
    drafter, target, out = _WarmingDrafter(), ModelCache(tiny_pair.target), []
    target.extend(ids[:-1])
    timer = _round_timer(drafter, target, ids[:-1], ids, 4, out)
    # rounds 1-3 (3.0, 2.0, 1.5 ms) untimed; the 4th, one verification after the 3rd
    assert timer() == 1.0
    assert drafter.rolled == [len(ids) - 1] * 4  # each round catches up on the newest token
    assert len(out) == 1 and out[0][0] == 4 and out[0][1] > 0  # the timed round's verify
    assert target.ids == ids[:-1]  # every verification rolled back
    assert timer() == 1.0 and len(out) == 2


def test_the_block_drafters_timed_forward_is_a_runs_forward(embedded_pair):
    """Every block forward the curve runs feeds the newest token + γ − 1 masks at the
    prompt's end and runs the LM head on those γ rows (``V + 1`` wide), as a run's round
    after one token committed does."""
    ids = encode_prompt(embedded_pair, PROMPT)
    block = make_named_drafter(embedded_pair, "block")
    calls: list[tuple[int, int, int, int]] = []
    extend_keep = block.kv.extend_keep

    def spy(new_ids: list[int], keep: int):
        at = block.kv.kv_len
        logits = extend_keep(new_ids, keep)
        calls.append((at, len(new_ids), keep, logits.shape[-1]))
        return logits

    block.kv.extend_keep = spy
    curve = measure_forward_curve(embedded_pair, PROMPT, 9, 2, block)
    # (warm-up passes + repeats) × the rounds of each timed round
    assert calls == [(len(ids) - 1, 4, 4, embedded_pair.vocab_size + 1)] * 4 * (ROUND_WARMUP + 1)
    assert curve.draft_cost == "one_forward" and curve.round_drafts == 4


def test_a_recurrent_drafters_timed_proposals_read_only_the_newest_token(embedded_pair):
    """The prefix is read once before timing (its checkpoint kept), so each proposal reads
    the newest token and its drafts, one token a read, as in a run; not the whole prompt
    again (a rollback by one token without a checkpoint there falls back to the zero
    state)."""
    ids = encode_prompt(embedded_pair, PROMPT)
    drafter = make_named_drafter(embedded_pair, "recurrent")
    reads: list[int] = []
    read = drafter._read

    def spy(new_ids: list[int]):
        reads.append(len(new_ids))
        return read(new_ids)

    drafter._read = spy
    curve = measure_forward_curve(embedded_pair, PROMPT, 9, 2, drafter)
    assert reads[0] == len(ids) - 1  # the prefix, once
    # then (warm-up passes + repeats) × (4 rounds + the draft step's proposal) × 4 reads
    assert reads[1:] == [1] * (2 + 2) * (ROUND_WARMUP + 2) * 4
    assert curve.draft_cost == "serial" and curve.draft_step_ms > 0
