from __future__ import annotations

import math

import pytest
import torch

from specdec_core.core.errors import ConfigError
from specdec_core.core.sampling import SamplingConfig, logits_to_probs, tv_distance

LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])


def test_greedy_is_one_hot_on_argmax():
    probs = logits_to_probs(LOGITS, SamplingConfig(temperature=0.0))
    assert probs.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert probs.dtype == torch.float32


def test_temperature_softmax():
    probs = logits_to_probs(LOGITS, SamplingConfig(temperature=2.0))
    assert torch.allclose(probs, torch.softmax(LOGITS / 2.0, -1))
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-6)


def test_top_k_keeps_k_tokens_renormalised():
    probs = logits_to_probs(LOGITS, SamplingConfig(temperature=1.0, top_k=2))
    full = torch.softmax(LOGITS, -1)
    assert (probs[2:] == 0).all()
    assert torch.allclose(probs[:2], full[:2] / full[:2].sum())


def test_top_p_smallest_set_reaching_mass():
    full = torch.softmax(LOGITS, -1)  # ≈ [.5465, .2010, .1219, .0740, .0272] (sorted)
    probs = logits_to_probs(LOGITS, SamplingConfig(temperature=1.0, top_p=0.7))
    # .5465 < .7, .5465 + .2010 = .7475 ≥ .7 → keep two tokens
    assert (probs > 0).tolist() == [True, True, False, False, False]
    assert torch.allclose(probs[:2], full[:2] / full[:2].sum())
    tiny = logits_to_probs(LOGITS, SamplingConfig(temperature=1.0, top_p=0.01))
    assert tiny.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]  # the top token always survives


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 1.0), (3, 1.0), (0, 0.8), (3, 0.8)])
def test_temperature_one_skips_only_an_exact_division(top_k, top_p):
    """T = 1 skips dividing by 1.0; the division path (2x / 2 = x exactly, at T = 2)
    gives the same float32 rows bit for bit, with top-k and top-p too."""
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0)) * 3
    at_one = logits_to_probs(logits, SamplingConfig(temperature=1.0, top_k=top_k, top_p=top_p))
    at_two = logits_to_probs(2 * logits, SamplingConfig(temperature=2.0, top_k=top_k, top_p=top_p))
    assert torch.equal(at_one, at_two)
    if top_k == 0 and top_p == 1.0:
        assert torch.equal(at_one, torch.softmax(logits, -1))


def test_batched_rows():
    logits = torch.stack([LOGITS, LOGITS.flip(0)])
    probs = logits_to_probs(logits, SamplingConfig(temperature=0.7, top_k=3, top_p=0.9))
    assert probs.shape == (2, 5)
    assert torch.allclose(probs[0], probs[1].flip(0))


def test_tv_distance():
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.2, 0.5, 0.3])
    assert tv_distance(p, q).item() == pytest.approx(0.4, abs=1e-6)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (SamplingConfig(temperature=-0.1), "temperature"),
        (SamplingConfig(temperature=math.nan), "temperature"),
        (SamplingConfig(temperature=1e9), "temperature"),
        (SamplingConfig(temperature=1.0, top_p=0.0), "top-p"),
        (SamplingConfig(temperature=1.0, top_p=1.5), "top-p"),
        (SamplingConfig(temperature=1.0, top_k=-1), "top-k"),
        (SamplingConfig(temperature=1.0, top_k=99), "top-k"),
    ],
)
def test_validation(config, message):
    with pytest.raises(ConfigError, match=message):
        config.validate(vocab_size=50)
