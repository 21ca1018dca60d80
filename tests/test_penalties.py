"""Unit tests of ``core/penalties.py``: the penalties against transformers' processors and
the OpenAI / vLLM formula, the no-repeat n-gram rule by hand, the documented order, and
the validation codes."""

from __future__ import annotations

import pytest
import torch
from transformers import NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor

from specdec_core.core.errors import ConfigError
from specdec_core.core.penalties import (
    MAX_NGRAM_SIZE,
    PenaltyConfig,
    apply_penalties,
    banned_ngram_tokens,
    penalty_counts,
)

V = 64


def _rows(seed: int, n: int = 40, symbols: int = 5) -> list[tuple[torch.Tensor, list[int]]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(1, 30, (1,), generator=g))
        prefix = torch.randint(0, symbols, (length,), generator=g).tolist()  # repeats likely
        out.append((torch.randn(V, generator=g) * 3, prefix))
    return out


@pytest.mark.parametrize("theta", [0.5, 1.3, 2.0, 7.5])
def test_repetition_penalty_equals_transformers(theta):
    hf = RepetitionPenaltyLogitsProcessor(theta)
    for logits, prefix in _rows(int(theta * 10)):
        ours = apply_penalties(logits, prefix, 1, PenaltyConfig(repetition_penalty=theta))
        ref = hf(torch.tensor([prefix]), logits[None].clone())[0]
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
        seen = sorted(set(prefix))
        assert not torch.equal(ours[seen], logits[seen])  # the penalty did something
        unseen = [t for t in range(V) if t not in seen]
        assert torch.equal(ours[unseen], logits[unseen])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_transformers(n):
    hf = NoRepeatNGramLogitsProcessor(n)
    banned_somewhere = 0
    for logits, prefix in _rows(n, symbols=3):
        ours = apply_penalties(logits, prefix, 1, PenaltyConfig(no_repeat_ngram_size=n))
        ref = hf(torch.tensor([prefix]), logits[None].clone())[0]
        assert torch.equal(torch.isinf(ours), torch.isinf(ref))
        torch.testing.assert_close(ours[~torch.isinf(ours)], ref[~torch.isinf(ref)])
        assert torch.isinf(ours).nonzero().flatten().tolist() == banned_ngram_tokens(prefix, n)
        banned_somewhere += bool(torch.isinf(ours).any())
    assert banned_somewhere >= 5  # the rule was exercised


def test_banned_ngram_tokens_by_hand():
    assert banned_ngram_tokens([1, 2, 3, 1, 2], 3) == [3]  # "1 2" was followed by 3
    assert banned_ngram_tokens([1, 2, 3, 1, 2], 2) == [3]  # "2" was followed by 3
    assert banned_ngram_tokens([1, 2, 1, 4, 1], 2) == [2, 4]
    assert banned_ngram_tokens([5, 6, 5], 1) == [5, 6]
    assert banned_ngram_tokens([1, 2], 3) == []  # shorter than n
    assert banned_ngram_tokens([1, 2, 3], 0) == []


def test_frequency_and_presence_by_hand():
    logits = torch.zeros(8)
    prefix = [1, 2, 3, 3, 4, 3]  # prompt [1, 2], generated 3 ×3, 4 ×1
    cfg = PenaltyConfig(frequency_penalty=0.5, presence_penalty=0.25)
    out = apply_penalties(logits, prefix, 2, cfg)
    expected = torch.zeros(8)
    expected[3] = -(0.5 * 3 + 0.25)
    expected[4] = -(0.5 * 1 + 0.25)
    assert torch.equal(out, expected)  # prompt tokens 1, 2 untouched
    negative = apply_penalties(logits, prefix, 2, PenaltyConfig(frequency_penalty=-1.0))
    assert float(negative[3]) == 3.0 and float(negative[1]) == 0.0


def test_frequency_and_presence_formula_on_random_rows():
    """vLLM's ``apply_penalties``: s − f·count − r·[count > 0] over the output tokens."""
    cfg = PenaltyConfig(frequency_penalty=0.7, presence_penalty=-0.4)
    for i, (logits, prefix) in enumerate(_rows(7)):
        prompt_len = i % (len(prefix) + 1)
        ours = apply_penalties(logits, prefix, prompt_len, cfg)
        ref = logits.clone()
        for t in range(V):
            count = prefix[prompt_len:].count(t)
            ref[t] -= 0.7 * count + (-0.4) * (count > 0)
        torch.testing.assert_close(ours, ref)


def test_penalties_chain_in_the_documented_order():
    logits = torch.tensor([2.0, -1.0, 3.0, 0.5])
    cfg = PenaltyConfig(
        repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.0, no_repeat_ngram_size=2
    )
    out = apply_penalties(logits, [0, 1, 0, 1, 0], 2, cfg)  # generated: 0 1 0
    # token 0: 2/2 − 0.5·2 = 0; token 1: banned ("0 1" seen); token 2, 3: untouched
    assert out.tolist() == [0.0, float("-inf"), 3.0, 0.5]
    assert penalty_counts([0, 1, 0, 1, 0], 2) == {0: (3, 2), 1: (2, 1)}


def test_penalty_config_validation_codes():
    for bad in (
        PenaltyConfig(repetition_penalty=0.0),
        PenaltyConfig(repetition_penalty=float("nan")),
        PenaltyConfig(frequency_penalty=2.5),
        PenaltyConfig(presence_penalty=-3.0),
        PenaltyConfig(presence_penalty=True),  # type: ignore[arg-type]
        PenaltyConfig(no_repeat_ngram_size=-1),
        PenaltyConfig(no_repeat_ngram_size=MAX_NGRAM_SIZE + 1),
        PenaltyConfig(no_repeat_ngram_size=2.0),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError) as info:
            bad.validate()
        assert info.value.code == "bad_penalty"
    assert not PenaltyConfig().active and PenaltyConfig(no_repeat_ngram_size=1).active
