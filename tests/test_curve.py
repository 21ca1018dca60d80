"""The verify-cost curve times rounds as a run runs them: real greedy rounds after other
rounds, halfway through a run's context (``bench/curve.py``)."""

from __future__ import annotations

import pytest

from specdec_core.bench.curve import (
    ROUND_SPAN,
    ROUND_WARMUP,
    _Rounds,
    measure_forward_curve,
    mid_run,
    round_figures,
)
from specdec_core.bench.runs import ignoring_eos
from specdec_core.core.inputs import encode_prompt
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate

PROMPT = "First Citizen:\nWe are"


class _WarmingDrafter:
    """A drafter whose proposals cost 3.0, 2.0, 1.5, then 1.0 ms of ``forward_ms`` each
    (a small model's forward right after other forwards, warming over rounds)."""

    draft_cost = "one_forward"

    def __init__(self) -> None:
        self.forward_ms, self.rolled, self.costs = 0.0, [], [3.0, 2.0, 1.5]

    def rollback_to(self, committed: list[int]) -> int:
        self.rolled.append(len(committed))
        return 0

    def propose_argmax(self, context: list[int], gamma: int, confidence=None):
        self.forward_ms += self.costs.pop(0) if self.costs else 1.0
        return [1] * gamma, 1


def test_the_round_is_timed_after_rounds_back_to_back(tiny_pair):
    ids = encode_prompt(tiny_pair, PROMPT)
    drafter, target = _WarmingDrafter(), ModelCache(tiny_pair.target)
    target.extend(ids[:-1])
    rounds = _Rounds(drafter, target, ids, 4)
    # rounds 1-3 (3.0, 2.0, 1.5 ms) untimed; the 4th, one verification after the 3rd
    assert rounds.timer() == 1.0
    assert len(rounds.timed) == 1 and rounds.timed[0][:2] == (4, 1.0) and rounds.timed[0][2] > 0
    # each round committed what it accepted + one token, both caches rolled back to it
    steps = [b - a for a, b in zip([len(ids)] + drafter.rolled, drafter.rolled, strict=False)]
    assert len(steps) == ROUND_WARMUP + 1 and all(1 <= n <= 5 for n in steps)
    assert drafter.rolled[-1] == len(rounds.committed)
    assert target.ids == rounds.committed[:-1]
    assert rounds.committed[: len(ids)] == ids


def test_the_timed_rounds_start_again_after_a_span(tiny_pair):
    ids = encode_prompt(tiny_pair, PROMPT)
    drafter, target = _WarmingDrafter(), ModelCache(tiny_pair.target)
    target.extend(ids[:-1])
    rounds = _Rounds(drafter, target, ids, 4)
    lengths = []
    for _ in range(8):
        rounds.timer()
        lengths.append(len(rounds.committed) - len(ids))
    # each call runs ROUND_WARMUP + 1 rounds of 1 to 5 tokens; none starts past the span
    assert all(n <= ROUND_SPAN + (ROUND_WARMUP + 1) * 5 for n in lengths)
    assert min(lengths) >= ROUND_WARMUP + 1 and len(rounds.timed) == 8
    assert any(b < a for a, b in zip(lengths, lengths[1:], strict=False))  # started again


def _spied(drafter, name: str) -> list[int]:
    """Record how many tokens each call of the drafter's work fed: an EAGLE head forward
    (``_feed``), the block drafter's forward (``kv.extend_keep``), a recurrent read."""
    owner = drafter.kv if name == "block" else drafter
    attr = {"eagle": "_feed", "block": "extend_keep", "recurrent": "_read"}[name]
    calls: list[int] = []
    method = getattr(owner, attr)

    def spy(*args, **kwargs):
        calls.append(len(args[1] if name == "eagle" else args[0]))
        return method(*args, **kwargs)

    setattr(owner, attr, spy)
    return calls


@pytest.mark.parametrize("name", ["eagle", "block", "recurrent"])
def test_the_timed_rounds_are_a_greedy_runs_rounds(embedded_pair, name):
    """The rounds the curve times draft, accept, catch up and verify as a greedy run's do
    from the same context: the same drafts and verdicts round after round, and the drafter
    feeds the same work in each (the EAGLE head catches up on the features of every
    token the last round committed, not on one)."""
    ids = encode_prompt(embedded_pair, "ROMEO:\nBut soft, what light through yonder window")
    config = SessionConfig(gamma=4, temperature=0.0, max_new_tokens=4 * ROUND_SPAN)
    ran = make_named_drafter(embedded_pair, name)
    run_calls = _spied(ran, name)
    records = generate(ignoring_eos(embedded_pair), ids, config, "speculative", ran).records
    timed = make_named_drafter(embedded_pair, name)
    timed_calls = _spied(timed, name)
    target = ModelCache(embedded_pair.target)
    timed.attach(target)
    if name == "eagle":
        target.extend(ids[:-1])  # the run's first proposal runs this prefill itself
    rounds = _Rounds(timed, target, ids, 4)
    records = records[:8]  # far from the budget (it lowers γ at the end)
    done = [rounds.one() for _ in records]
    assert [g for g, _, _ in done] == [len(r.drafted) for r in records] == [4] * 8
    committed = [t for r in records for t in r.appended]
    assert rounds.committed[len(ids) :] == committed  # the same verdicts
    assert timed_calls == run_calls[: len(timed_calls)]
    if name == "eagle":  # each proposal's first head forward: the last round's tokens
        firsts = timed_calls[4::4]  # 4 head forwards a round (catch-up + 3 drafts fed)
        assert firsts == [len(r.appended) for r in records[: len(firsts)]]
        assert sum(firsts) / len(firsts) > 1.5


def test_round_figures_price_the_timed_rounds():
    """Table: what the cost model reads off timed rounds ``(drafts, draft ms, verify ms)``
    on a curve ``t(k) = 1 + 0.1 (k − 1)`` ms."""
    curve = tuple(1.0 + 0.1 * k for k in range(9))  # t(1) = 1.0 … t(9) = 1.8
    rounds = [(4, 2.0, 1.4 * 1.1), (4, 2.4, 1.4 * 1.3), (2, 0.8, 1.2 * 1.2)]
    serial = round_figures(rounds, curve, "serial")
    # median drafts 4; ms per draft 0.5, 0.6, 0.4 → median 0.5 → 4 × 0.5
    assert serial["round_drafts"] == 4 and serial["draft_round_ms"] == pytest.approx(2.0)
    # level: median of 1.1, 1.3, 1.2 = 1.2, at t(5) = 1.4
    assert serial["round_verify_ms"] == pytest.approx(1.2 * 1.4)
    assert round_figures(rounds, curve, "heads")["draft_round_ms"] == pytest.approx(2.0)
    block = round_figures(rounds, curve, "one_forward")  # median forward of rounds that drafted
    assert block["draft_round_ms"] == pytest.approx(2.0)
    lookup = [(0, 0.02, 1.0), (4, 0.03, 1.4), (3, 0.05, 1.3 * 1.5)]
    none = round_figures(lookup, curve, "none")  # every round's lookup, drafting or not
    assert none["round_drafts"] == 3 and none["draft_round_ms"] == pytest.approx(0.03)
    assert none["round_verify_ms"] == pytest.approx(1.0 * 1.3)  # levels 1.0, 1.0, 1.5
    assert round_figures([], curve, "serial") == dict(
        round_drafts=0, draft_round_ms=0.0, round_verify_ms=0.0
    )
    assert round_figures([(0, 0.0, 1.0)], curve, "serial")["draft_round_ms"] == 0.0


def test_the_curve_is_timed_halfway_through_the_run(embedded_pair, monkeypatch):
    """With the run's length, every timed target forward attends to the prompt + the
    target's greedy continuation over half the run (less half a span of rounds)."""
    ids = encode_prompt(embedded_pair, PROMPT)
    with_new = mid_run(ModelCache(embedded_pair.target), ids, 3)
    plain = generate(
        ignoring_eos(embedded_pair), ids, SessionConfig(max_new_tokens=3), "autoregressive"
    )
    assert with_new == ids + plain.output_ids  # the target's own greedy tokens
    seen: list[int] = []
    forward = ModelCache._forward

    def spy(self, new_ids, keep):
        if self.model is embedded_pair.target:
            seen.append(self.kv_len)
        return forward(self, new_ids, keep)

    monkeypatch.setattr(ModelCache, "_forward", spy)
    measure_forward_curve(embedded_pair, PROMPT, 3, 1, "ngram", new_tokens=64)
    mid = len(ids) + 64 // 2 - ROUND_SPAN // 2
    # the continuation, then the curve's t(k) after mid − 1 cached, rounds from there on
    assert max(seen) < mid + ROUND_SPAN + 8 and seen.count(mid - 1) >= 3 * (1 + 2)


def test_each_pass_times_t1_right_after_an_untimed_target_step(embedded_pair, monkeypatch):
    """A run's step follows a target forward; so does the curve's t(1): every pass over
    ``k = 1 … 3`` starts with an untimed step, never straight after the drafter's work."""
    ids = encode_prompt(embedded_pair, PROMPT)
    fed: list[tuple[int, int]] = []  # (which target cache, tokens fed) in order
    forward = ModelCache._forward

    def spy(self, new_ids, keep):
        if self.model is embedded_pair.target:
            fed.append((id(self), len(new_ids)))
        return forward(self, new_ids, keep)

    monkeypatch.setattr(ModelCache, "_forward", spy)
    curve = measure_forward_curve(embedded_pair, ids, 3, 2, "model")
    curve_cache = fed[0][0]  # its first forward reads the prompt
    passes = [n for cache, n in fed[1:] if cache == curve_cache]
    assert passes == [1, 1, 2, 3] * (2 + 2)  # (warm-up passes + repeats) × (step, k = 1 … 3)
    assert len(curve.target_ms) == 3
