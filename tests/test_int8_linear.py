"""Weight-only int8 drafters (``core/int8_linear.py``): the layer against the dequantized
float32 product and the grid of ``quantize_weight``, the drafters' ``q`` on held-out
text close to their float32 ``q``, the rules using exactly the int8 drafter's ``q``, the
target untouched, and the ``SPECDEC_DRAFT_WEIGHTS`` switch."""

from __future__ import annotations

import pytest
import torch

from specdec_core.core.int8_linear import (
    ENV,
    draft_int8,
    int8_linear,
    int8_weights,
    kernel_available,
    quantize_linear,
)
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.lean_gpt2 import gpt2_weights
from specdec_core.core.quant import quantize_weight
from specdec_core.core.settings import SamplingConfig, SessionConfig
from specdec_core.drafters.eagle import make_eagle_drafter
from specdec_core.drafters.model import make_model_drafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.session import SpeculativeSession

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.skipif(not kernel_available("cpu"), reason="no int8 weight-only kernel"),
]
MAKERS = {"model": make_model_drafter, "eagle": make_eagle_drafter}


def test_int8_linear_equals_the_dequantized_float32_product_within_bfloat16():
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(256, 1024, generator=gen) * 0.05  # Conv1D layout [in, out]
    bias = torch.randn(1024, generator=gen) * 0.1
    x = torch.randn(3, 256, generator=gen)
    layer = quantize_linear(weight, bias, 1)
    assert layer.codes.dtype == torch.int8 and layer.codes.shape == (1024, 256)
    assert int(layer.codes.abs().amax(dim=1).min()) == 127  # every channel spans the grid
    # the grid of quantize_weight; only the scales are rounded to bfloat16 (< 2^-8 relative)
    fake = quantize_weight(weight, "int8", 1)
    assert float(((layer.dequantized() - fake).abs() / fake.abs().clamp_min(1e-6)).max()) < 2**-8
    got = layer(x)
    want = x.bfloat16().float() @ layer.dequantized() + bias
    assert got.dtype == torch.float32 and got.shape == (3, 1024)
    # the output is rounded to bfloat16 before the float32 bias: within 2^-8 of |x W|
    error = (got - want).abs() - (want - bias).abs() * 2**-8
    assert float(error.max()) < 1e-5
    measured = float((got - want).abs().max())
    assert 0 < measured < 0.02  # measured 0.0078 (|y| up to ~5)
    # against the float32 weights themselves: the quantization error, still small
    assert float((got - (x @ weight + bias)).abs().max()) < 0.05


def test_int8_layers_are_made_once_per_weight_and_leave_the_model_alone(embedded_pair):
    weights = gpt2_weights(embedded_pair.draft)
    before = weights.blocks[0].attn[0].clone()
    quantized = int8_weights(weights)
    again = int8_weights(gpt2_weights(embedded_pair.draft))
    assert quantized.blocks[0].attn is again.blocks[0].attn  # cached per weight tensor
    assert int8_linear(weights.blocks[0].attn[0], None, 1) is quantized.blocks[0].attn
    assert torch.equal(weights.blocks[0].attn[0], before)  # the shared model unchanged
    assert quantized.wpe is weights.wpe and quantized.lm_head is weights.lm_head


def _first_q(pair, name: str, ids: list[int], int8: bool) -> torch.Tensor:
    drafter = MAKERS[name](pair, int8=int8)
    assert drafter.int8 is int8
    drafter.attach(ModelCache(pair.target))
    gen = torch.Generator().manual_seed(0)
    draft = drafter.propose(ids, 1, SamplingConfig(temperature=1.0), "probabilistic", gen)
    return draft.probs[0]


@pytest.mark.parametrize("name", ["model", "eagle"])
def test_int8_q_close_to_float32_on_heldout_text(embedded_pair, heldout_prompts, name):
    """At the end of each of the 30 held-out prompts: TV(q_fp32, q_int8) measured mean
    0.0068 (model) / 0.0091 (EAGLE), max 0.0086 / 0.022 (0.0092 / 0.022 at two threads); the
    same top-1 token on 29 / 29 of 30 (the others are near-ties: a top-two gap under 0.002
    in q_fp32)."""
    tvs, agree = [], 0
    for prompt in heldout_prompts:
        ids = embedded_pair.tokenizer.encode(prompt)
        q32, q8 = (_first_q(embedded_pair, name, ids, int8) for int8 in (False, True))
        tvs.append(0.5 * float((q32 - q8).abs().sum()))
        agree += int(q32.argmax()) == int(q8.argmax())
    assert len(tvs) == 30 and agree >= 28
    assert 0.003 < sum(tvs) / len(tvs) < 0.012 and max(tvs) < 0.03


@pytest.mark.parametrize("name", ["model", "eagle"])
def test_the_rule_uses_the_int8_drafters_q(embedded_pair, name):
    """The step machine's pending ``q`` (what the panel shows and the rule reads) is the
    int8 drafter's row, not the float32 one; the verification's checks show its values."""
    config = SessionConfig(gamma=3, temperature=1.0, seed=3, max_new_tokens=20)
    prompt = "ROMEO:\nBut soft"
    drafter = MAKERS[name](embedded_pair, int8=True)  # EAGLE: int8 only when asked
    assert drafter.int8
    session = SpeculativeSession(embedded_pair, prompt, config, drafter=drafter)
    session.propose()
    q_rows = session.steps.pending.q_rows
    ids = embedded_pair.tokenizer.encode(prompt)
    q8 = _first_q(embedded_pair, name, ids, True)
    q32 = _first_q(embedded_pair, name, ids, False)
    assert torch.equal(q_rows[0], q8) and not torch.equal(q_rows[0], q32)
    checks = session.verify().checks
    first = session.steps.pending.ids[0]
    assert checks[0].q == float(q8[first]) != float(q32[first])


def test_switch_and_devices(embedded_pair, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert draft_int8("cpu") and not draft_int8("cuda:0") and not kernel_available("cuda")
    assert not draft_int8("cpu", by_default=False)
    assert make_named_drafter(embedded_pair, "model").int8
    assert not make_named_drafter(embedded_pair, "eagle").int8  # its q would move with threads
    assert not make_named_drafter(embedded_pair, "early-exit").int8  # the target's blocks
    monkeypatch.setenv(ENV, "int8")
    assert draft_int8("cpu", by_default=False) and not draft_int8("cuda:0", by_default=False)
    for name in ("model", "eagle"):
        assert make_named_drafter(embedded_pair, name).int8
    monkeypatch.setenv(ENV, "float32")
    assert not draft_int8("cpu")
    for name in ("model", "eagle"):
        drafter = make_named_drafter(embedded_pair, name)
        assert not drafter.int8
    model = make_model_drafter(embedded_pair)
    assert isinstance(model.kv.weights.blocks[0].attn, tuple)  # the float32 (weight, bias)
    assert isinstance(model.kv.head, torch.Tensor)


def test_a_width_the_kernel_cannot_read_keeps_the_drafter_float32(tiny_dirs, tmp_path):
    """The kernel reads ``in`` in blocks of 16: a draft of width 24 (torch 2.13 reads past
    each row there: garbage or a segfault) runs float32, and the run stays the target's."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from specdec_core.core.int8_linear import int8_fits
    from specdec_core.core.models import load_pair
    from specdec_core.engine.chain.generate import generate

    tok = AutoTokenizer.from_pretrained(tiny_dirs["target"])
    torch.manual_seed(4)
    config = GPT2Config(n_layer=1, n_embd=24, n_head=2, vocab_size=len(tok), n_positions=64)
    GPT2LMHeadModel(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    pair = load_pair((tiny_dirs["target"], tmp_path), device="cpu", allow_custom=True)
    assert not int8_fits(gpt2_weights(pair.draft))
    assert int8_fits(gpt2_weights(pair.target))  # width 32, inner 128
    drafter = make_model_drafter(pair)
    assert not drafter.int8 and isinstance(drafter.kv.weights.blocks[0].fc, tuple)
    run_config = SessionConfig(gamma=3, max_new_tokens=12)
    alone = generate(pair, "To be", run_config, "autoregressive").output_ids
    assert generate(pair, "To be", run_config, "speculative", drafter).output_ids == alone
