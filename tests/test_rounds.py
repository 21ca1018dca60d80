"""Direct tests of the round pieces both engines share (``engine/rounds.py``): γ for a
round, the stop rule and its cut of a commit as case tables (like ``round_statuses`` in
test_records.py), the caches' rollback (``rollback_to``, ``core/kvcache.rollback``), the
two random streams of a round, and the chain's verification forward
(``engine/chain/round.verify``) on the embedded pair."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.kvcache import ModelCache, rollback
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.processors import make_processors
from specdec_core.core.sampling import SamplingConfig, one_hot
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import ModelDrafter
from specdec_core.engine.chain.round import ChainContext, verify
from specdec_core.engine.rounds import (
    StopRule,
    gamma_for_round,
    round_stream,
    stop_reason_after,
    stop_rule,
)

PROMPT = "ROMEO:\nBut soft, what light"


# ---------------------------------------------------------------- γ for a round, as a table
# columns: γ asked, generated so far, max_new_tokens, committed length L, context length
@pytest.mark.parametrize(
    ("gamma", "generated", "max_new", "committed", "context", "expected"),
    [
        pytest.param(4, 0, 100, 10, 256, 4, id="room-everywhere"),
        pytest.param(4, 0, 5, 10, 256, 4, id="tokens-left=gamma+1"),
        pytest.param(4, 1, 5, 10, 256, 3, id="tokens-left=gamma"),
        pytest.param(4, 3, 5, 10, 256, 1, id="two-tokens-left"),
        pytest.param(4, 4, 5, 10, 256, 0, id="one-token-left:plain-step"),
        pytest.param(4, 5, 5, 10, 256, 0, id="at-max_new_tokens"),
        pytest.param(4, 9, 5, 10, 256, 0, id="past-max_new_tokens:never-negative"),
        pytest.param(8, 0, 100, 251, 256, 4, id="context:L+gamma+1=context"),
        pytest.param(8, 0, 100, 252, 256, 3, id="context:three-left"),
        pytest.param(8, 0, 100, 255, 256, 0, id="context:last-position"),
        pytest.param(8, 0, 100, 256, 256, 0, id="context:full"),
        pytest.param(8, 97, 100, 250, 256, 2, id="both-short:tokens-win"),
        pytest.param(8, 90, 100, 253, 256, 2, id="both-short:context-wins"),
        pytest.param(12, 0, 6, 10, 256, 5, id="gamma-bigger-than-what-is-left"),
        pytest.param(0, 0, 100, 10, 256, 0, id="gamma-0"),
    ],
)
def test_gamma_for_round(gamma, generated, max_new, committed, context, expected):
    got = gamma_for_round(gamma, generated, max_new, committed, context)
    assert got == expected
    # what the rule is for: the round's γ + 1 tokens fit both bounds (a round always
    # commits one token, so at the bounds themselves γ is 0)
    if generated < max_new and committed < context:
        assert generated + got + 1 <= max_new
        assert committed + got + 1 <= context


# ---------------------------------------------------------------- the stop rule, as a table
EOS = 0
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _letters(ids: list[int]) -> str:
    """A stand-in tokenizer: id ``i`` is the letter ``LETTERS[i]`` (0 is ``a``)."""
    return "".join(LETTERS[i] for i in ids)


# columns: generated ids, total length (prompt + generated), eos id, max_new_tokens,
# context length, stop strings
@pytest.mark.parametrize(
    ("generated", "total", "eos", "max_new", "context", "stops", "expected"),
    [
        pytest.param([3, 4], 12, EOS, 10, 64, (), None, id="go-on"),
        pytest.param([], 10, EOS, 10, 64, (), None, id="nothing-generated"),
        pytest.param([3, EOS], 12, EOS, 10, 64, (), "eos", id="eos-last"),
        pytest.param([EOS, 3], 12, EOS, 10, 64, (), None, id="eos-not-last"),
        pytest.param([3, EOS], 12, None, 10, 64, (), None, id="no-eos-id"),
        pytest.param([3] * 9 + [EOS], 20, EOS, 10, 20, (), "eos", id="eos-before-max-and-ctx"),
        pytest.param([1, 2, 3], 13, EOS, 10, 64, ("cd",), "stop_string", id="stop-string"),
        pytest.param([1, 2, 3], 13, EOS, 10, 64, ("dc",), None, id="stop-string-absent"),
        pytest.param([1, 2], 12, EOS, 10, 64, ("", "x"), None, id="empty-stop-string-ignored"),
        pytest.param([1, 2, 3], 13, EOS, 3, 64, ("bc",), "stop_string", id="stop-before-max"),
        pytest.param([2, EOS], 12, EOS, 10, 64, ("ca",), "eos", id="eos-before-stop-string"),
        pytest.param([3] * 9, 19, EOS, 10, 64, (), None, id="one-below-max_new_tokens"),
        pytest.param([3] * 10, 20, EOS, 10, 64, (), "max_new_tokens", id="at-max_new_tokens"),
        pytest.param([3] * 11, 21, EOS, 10, 64, (), "max_new_tokens", id="past-max_new_tokens"),
        pytest.param([3] * 4, 63, EOS, 10, 64, (), None, id="one-below-context"),
        pytest.param([3] * 4, 64, EOS, 10, 64, (), "context_limit", id="at-context"),
        pytest.param([3] * 10, 64, EOS, 10, 64, (), "max_new_tokens", id="max-before-context"),
        pytest.param([], 0, EOS, 0, 64, (), "max_new_tokens", id="max_new_tokens=0"),
    ],
)
def test_stop_reason_after(generated, total, eos, max_new, context, stops, expected):
    reason = stop_reason_after(generated, total, eos, max_new, context, stops, _letters)
    assert reason == expected


def test_stop_strings_need_a_decoder():
    assert stop_reason_after([1, 2, 3], 13, EOS, 10, 64, ("bc",), None) is None
    assert stop_reason_after([1, 2, 3], 13, EOS, 10, 64, ("bc",), _letters) == "stop_string"


def test_the_bound_stop_rule_reads_the_pair_and_the_settings(embedded_pair):
    """``stop_rule`` binds the embedded pair's EOS id (0), context (256) and tokenizer."""
    pair = embedded_pair
    assert (pair.eos_token_id, pair.context_length) == (0, 256)
    ids = pair.tokenizer.encode(" soft, what light")
    config = SessionConfig(max_new_tokens=20, stop_strings=("what",))
    stop = stop_rule(pair, config)
    assert stop(ids[:1], 10) is None
    assert stop(ids, 10 + len(ids)) == "stop_string"
    assert stop([5, pair.eos_token_id], 12) == "eos"
    plain = stop_rule(pair, SessionConfig(max_new_tokens=3))
    assert plain(ids[:2], 12) is None
    assert plain(ids[:3], 13) == "max_new_tokens"
    assert plain(ids[:2], 256) == "context_limit"


# ---------------------------------------------------------------- a commit cut short
# columns: committed, proposal (accepted drafts + correction/bonus), prompt_len, max_new
@pytest.mark.parametrize(
    ("committed", "proposal", "max_new", "appended", "reason"),
    [
        pytest.param([1, 2], [3, 4, 5], 10, [3, 4, 5], None, id="no-stop:all-appended"),
        pytest.param([1, 2], [3, EOS, 5], 10, [3, EOS], "eos", id="eos-on-a-draft:rest-cut"),
        pytest.param([1, 2], [3, 4, EOS], 10, [3, 4, EOS], "eos", id="eos-as-the-correction"),
        pytest.param([1, 2], [3, 4, 5], 2, [3, 4], "max_new_tokens", id="budget-after-two"),
        pytest.param([1, 2, 6], [3, 4], 2, [3], "max_new_tokens", id="budget-counts-generated"),
        pytest.param([1, 2], [1, 2, 4], 10, [1, 2], "stop_string", id="stop-string-bc"),
    ],
)
def test_the_stop_rule_cuts_a_commit_short(committed, proposal, max_new, appended, reason):
    """``StopRule.cut`` appends token by token and stops at the first reason; the prompt
    (``[1, 2]``: 2 ids) is not counted against ``max_new_tokens``."""
    stop = StopRule(EOS, max_new, 64, ("bc",), _letters)
    assert stop.cut(committed, proposal, 2) == (appended, reason)
    assert stop([3], 3) is None and stop([3, EOS], 4) == "eos"  # the rule itself, called


def test_rollback_to_leaves_the_last_committed_token_without_kv(embedded_pair):
    """``ModelCache.rollback_to`` and ``Drafter.rollback_to``: after a verify forward over
    committed + drafts, both keep the committed prefix they share, minus its last token."""
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    target, drafter = ModelCache(pair.target), ModelDrafter(pair.draft)
    drafter.attach(target)
    stream = round_stream(0, 0, "draft")
    drafts = drafter.propose(committed, 3, SamplingConfig(), "probabilistic", stream).ids.tolist()
    target.extend(target.sync_to(committed + drafts))
    assert target.kv_len == len(committed) + 3 and drafter.cached_ids() is not None
    new = committed + drafts[:1] + [7]  # one draft kept, then a correction
    held = len(drafter.cached_ids())
    assert target.rollback_to(new) == 2  # drafts 2 and 3 leave the target's cache
    assert target.ids == new[:-1]  # the correction has no KV: the next round's first input
    assert drafter.rollback_to(new) == held - len(committed) - 1
    assert drafter.cached_ids() == new[: len(committed) + 1]
    assert target.rollback_to(new) == 0 and drafter.rollback_to(new) == 0  # idempotent


def test_one_rollback_brings_the_processors_and_both_caches_back(embedded_pair):
    """``core/kvcache.rollback``, the reject step of both shapes' ``apply_round``: the
    processors stand on the new committed ids, each cache as its ``rollback_to`` leaves it,
    the rows removed returned (target, draft)."""
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    penalties = PenaltyConfig(repetition_penalty=1.3)
    processors = make_processors(
        pair.tokenizer, pair.vocab_size, penalties, None, len(committed), committed
    )
    target, drafter = ModelCache(pair.target), ModelDrafter(pair.draft)
    drafter.attach(target)
    stream = round_stream(0, 0, "draft")
    draft = drafter.propose(committed, 3, SamplingConfig(), "probabilistic", stream, processors)
    drafts = draft.ids.tolist()
    target.extend(target.sync_to(committed + drafts))
    assert processors.ids[: len(committed)] == committed and len(processors.ids) > len(committed)
    new = committed + drafts[:1] + [7]  # one draft kept, then a correction
    held = len(drafter.cached_ids())
    assert rollback(target, drafter, processors, new) == (2, held - len(committed) - 1)
    assert processors.ids == new and target.ids == new[:-1]
    assert drafter.cached_ids() == new[: len(committed) + 1]
    assert rollback(target, drafter, None, new) == (0, 0)  # idempotent; no processors


# ---------------------------------------------------------------- the round's two streams
def _draws(seed: int, round_index: int, stream: str, n: int = 2000) -> torch.Tensor:
    return torch.rand(n, generator=round_stream(seed, round_index, stream))


def test_a_stream_is_a_function_of_seed_round_and_name():
    """Each call gives a fresh generator at the stream's start; nothing else (a draw from
    another stream, the global RNG) moves it."""
    first = _draws(7, 3, "verify")
    torch.manual_seed(123)
    _draws(7, 3, "draft", 10_000)  # drafting used many draws: verification does not move
    torch.rand(5)  # neither does the global generator
    assert torch.equal(_draws(7, 3, "verify"), first)
    assert not torch.equal(_draws(7, 3, "draft"), first)
    assert not torch.equal(_draws(7, 4, "verify"), first)
    assert not torch.equal(_draws(8, 3, "verify"), first)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((0, 0, "draft"), (0, 0, "verify")),
        ((0, 0, "verify"), (0, 1, "verify")),
        ((0, 0, "draft"), (1, 0, "draft")),
        ((5, 2, "draft"), (5, 3, "verify")),
    ],
    ids=["draft-vs-verify", "round-0-vs-1", "seed-0-vs-1", "mixed"],
)
def test_neighbouring_streams_are_uncorrelated(a, b):
    """2,000 uniforms of two neighbouring streams: each looks uniform and the two are
    uncorrelated (|r| < 0.1; the standard error is 1/√2000 ≈ 0.022)."""
    x, y = _draws(*a), _draws(*b)
    for z in (x, y):
        assert abs(z.mean().item() - 0.5) < 0.03 and 0.0 <= z.min() and z.max() < 1.0
    r = torch.corrcoef(torch.stack([x, y]))[0, 1].item()
    assert abs(r) < 0.1, r


# ---------------------------------------------------------------- the verification forward
def _greedy_continuation(pair, ids: list[int], n: int) -> list[int]:
    """The target's own greedy next ``n`` tokens (plain forwards, no cache)."""
    out = list(ids)
    with torch.inference_mode():
        for _ in range(n):
            logits = pair.target(input_ids=torch.tensor([out])).logits[0, -1]
            out.append(int(logits.argmax()))
    return out[len(ids) :]


def test_verify_is_one_forward_with_gamma_plus_one_rows(embedded_pair):
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    drafts = _greedy_continuation(pair, committed, 3) + [7]  # 3 right, the 4th wrong
    assert drafts[3] != _greedy_continuation(pair, committed + drafts[:3], 1)[0]
    target = ModelCache(pair.target)
    sampling = SamplingConfig()  # greedy
    ctx = ChainContext(target, None, sampling)
    q = one_hot(torch.tensor(drafts), pair.vocab_size)  # greedy drafts: one-hot rows
    checked = verify(ctx, committed, drafts, q, round_stream(0, 0, "verify"), True)
    p_rows, verdict, fed = checked.p_rows, checked.verdict, checked.fed
    assert target.forwards == 1 and fed == len(committed) + 4  # an empty cache: all of it
    assert target.ids == committed + drafts
    assert p_rows.shape == (5, pair.vocab_size) and p_rows.dtype == torch.float32
    assert p_rows.device.type == "cpu"
    assert torch.equal(p_rows.sum(-1), torch.ones(5))  # greedy: one-hot rows
    assert (verdict.accepted, verdict.kind) == (3, "correction") and verdict.u == ()
    assert verdict.accept_probs == (1.0, 1.0, 1.0, 0.0)
    assert checked.overlaps == (1.0, 1.0, 1.0, 0.0)  # Σ min(p, q) of one-hot rows
    # the rows are those of a plain forward over the same tokens (positions L-1 .. L+3)
    with torch.inference_mode():
        full = pair.target(input_ids=torch.tensor([committed + drafts])).logits[0].float()
    rows = full[len(committed) - 1 :]
    assert verdict.next_token == int(rows[3].argmax())
    soft = checked.raw
    assert soft.shape == (5, pair.vocab_size)
    torch.testing.assert_close(soft, torch.softmax(rows, -1), atol=1e-5, rtol=1e-4)

    # the next round's verification reuses the committed prefix: it feeds the last
    # committed token (no KV yet) + the drafts, still in one forward
    kept = committed + drafts[:3] + [verdict.next_token]
    target.crop(len(kept) - 1)
    again = _greedy_continuation(pair, kept, 2)
    q2 = one_hot(torch.tensor(again), pair.vocab_size)
    again_checked = verify(ctx, kept, again, q2, round_stream(0, 1, "verify"))
    p2, v2, fed2 = again_checked.p_rows, again_checked.verdict, again_checked.fed
    assert target.forwards == 2 and fed2 == 1 + 2 and p2.shape == (3, pair.vocab_size)
    assert (v2.accepted, v2.kind) == (2, "bonus")


def test_sampled_verification_draws_from_the_verify_stream(embedded_pair):
    """At T = 1 the verdict is a function of the stream: the same stream gives the same
    u's and verdict; the u's are the stream's first draws."""
    pair = embedded_pair
    committed = pair.tokenizer.encode(PROMPT)
    drafts = [11, 12, 13]
    q = torch.full((3, pair.vocab_size), 1.0 / pair.vocab_size)  # a uniform drafter
    sampling = SamplingConfig(temperature=1.0)

    def once(seed: int):
        ctx = ChainContext(ModelCache(pair.target), None, sampling)
        checked = verify(ctx, committed, drafts, q, round_stream(seed, 0, "verify"))
        return checked.p_rows, checked.verdict, checked.fed

    p_rows, verdict, _ = once(4)
    _, same, _ = once(4)
    assert same == verdict
    assert p_rows.shape == (4, pair.vocab_size)
    torch.testing.assert_close(p_rows.sum(-1), torch.ones(4))
    n_u = len(verdict.u)
    assert 1 <= n_u <= 3
    expected_u = torch.rand(n_u, generator=round_stream(4, 0, "verify")).tolist()
    assert list(verdict.u) == pytest.approx(expected_u)
    # a_i = min(1, p_i(y_i) / q_i(y_i)) for every drafted position
    ratios = [min(1.0, p_rows[i, y].item() * pair.vocab_size) for i, y in enumerate(drafts)]
    assert list(verdict.accept_probs) == pytest.approx(ratios, rel=1e-5)
