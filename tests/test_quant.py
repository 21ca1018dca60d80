"""A quantized target (core/quant.py): per-output-channel symmetric fake
quantization on the right axis, a copy (the shared pair untouched, the same draft),
speculative decoding equal to the quantized target's own greedy output on 30 held-out
prompts and matching its own first-token distribution (χ²), its distance to the float32
target, and the codes of bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.quantized import quant_figures, spec_matches_own_greedy
from specdec_core.bench.same_seed import first_tokens_test
from specdec_core.core.errors import ConfigError
from specdec_core.core.quant import (
    QUANT_LEVELS,
    check_dtype,
    quant_json,
    quantize_model,
    quantize_weight,
    quantized_pair,
    variant_pair,
    weight_error,
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Batch-1 forwards of a 256-wide model: one thread is as fast as two, and on a
    loaded machine two threads spin (8× slower here); the suite's setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("kind", ["int8", "int4"])
@pytest.mark.parametrize(("shape", "out_dim"), [((6, 5), 1), ((5, 6), 0)])
def test_quantize_weight_is_symmetric_per_output_channel(kind, shape, out_dim):
    w = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    w.select(out_dim, 2).zero_()  # an all-zero channel stays zero
    got = quantize_weight(w, kind, out_dim)
    levels = QUANT_LEVELS[kind]
    for j in range(shape[out_dim]):
        col, qcol = w.select(out_dim, j), got.select(out_dim, j)
        scale = float(col.abs().max()) / levels
        if scale == 0:
            assert (qcol == 0).all()
            continue
        ints = qcol / scale
        assert torch.allclose(ints, ints.round(), atol=1e-4)  # on the channel's grid
        assert float(ints.abs().max()) == pytest.approx(levels, abs=1e-4)  # absmax kept
        assert float((qcol - col).abs().max()) <= scale / 2 + 1e-6  # rounding error


def test_quantize_weight_worked_example():
    """Channel [0.875, −0.4375, 0.3, 0] at int4: s = 0.125, q = [7, −4 (−3.5: half to
    even), 2 (2.4), 0]."""
    w = torch.tensor([[0.875], [-0.4375], [0.3], [0.0]])  # Conv1D [in, out]: one channel
    assert quantize_weight(w, "int4", 1).flatten().tolist() == [0.875, -0.5, 0.25, 0.0]


def test_the_layers_and_the_axis(embedded_pair):
    q = quantize_model(embedded_pair.target, "int4")
    layers = [m for m in q.modules() if isinstance(m, Conv1D | nn.Linear)]
    assert len([m for m in layers if isinstance(m, Conv1D)]) == 16  # 4 blocks × 4 Conv1D
    c_fc = q.transformer.h[0].mlp.c_fc.weight  # Conv1D [in 256, out 1024]
    assert c_fc.shape == (256, 1024)
    for j in (0, 17, 1023):  # each output column takes ≤ 15 values
        assert len(torch.unique(c_fc[:, j])) <= 15
    # embeddings / the tied head, layer norms and biases unchanged
    base = embedded_pair.target.state_dict()
    for name, value in q.state_dict().items():
        if name.endswith(".weight") and ("attn.c_" in name or "mlp.c_" in name):
            assert not torch.equal(value, base[name]), name
        else:
            assert torch.equal(value, base[name]), name


def test_the_shared_pair_is_never_modified(embedded_pair):
    before = {k: v.clone() for k, v in embedded_pair.target.state_dict().items()}
    for kind in ("int8", "int4"):
        q = quantized_pair(embedded_pair, kind)
        assert q.target is not embedded_pair.target and q.draft is embedded_pair.draft
        assert q.name == f"embedded+{kind}" and q.eos_token_id == embedded_pair.eos_token_id
        assert quantized_pair(embedded_pair, kind).target is q.target  # cached copy
    after = embedded_pair.target.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert quantized_pair(embedded_pair, "none") is embedded_pair
    assert quant_json("none") == {} and quant_json("int4") == {"target_quant": "int4"}


def test_weight_errors_are_pinned(embedded_pair):
    """‖Ŵ − W‖ / ‖W‖ over the 16 quantized matrices of the embedded target."""
    assert weight_error(embedded_pair.target, "int8") == pytest.approx(0.0072415, abs=1e-6)
    assert weight_error(embedded_pair.target, "int4") == pytest.approx(0.1313368, abs=1e-6)
    assert weight_error(embedded_pair.target, "none") == 0.0


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_speculative_greedy_equals_the_quantized_targets_own(embedded_pair, kind):
    """Lossless with respect to the quantized model: 30 held-out prompts, 6 tokens."""
    equal, total = spec_matches_own_greedy(embedded_pair, kind, held_out_prompts(30), tokens=6)
    assert (equal, total) == (30, 30)


def test_first_token_distribution_matches_the_quantized_target(embedded_pair):
    """T = 1, seeds 0..99: speculative decoding with the int4 target against the int4
    target alone: χ² does not reject, TV within the simulated null's 95 % quantile."""
    q = quantized_pair(embedded_pair, "int4")
    prompt = held_out_prompts(100)[0]
    test = first_tokens_test(q, prompt, n=100, k=1)
    assert sum(a for a, _, _ in test.counts.values()) == 100
    assert sum(s for _, s, _ in test.counts.values()) == 100
    assert test.p_value > 0.05
    assert test.tv <= test.null_quantiles[2]


def test_distance_to_the_float32_target(embedded_pair):
    """10 held-out prompts, 8 greedy tokens, T = 1 rows (values measured on this pair)."""
    prompts = held_out_prompts(100)[:10]
    int4 = quant_figures(embedded_pair, "int4", prompts, tokens=8)
    assert int4.tv_first_mean == pytest.approx(0.02674, abs=2e-4)
    assert int4.tv_first_max == pytest.approx(0.05002, abs=2e-4)
    assert int4.greedy_divergence == pytest.approx(0.4)
    assert int4.acceptance_float32 == pytest.approx(0.84185, abs=2e-4)
    assert int4.acceptance_quant == pytest.approx(0.83989, abs=2e-4)
    int8 = quant_figures(embedded_pair, "int8", prompts[:4], tokens=8)
    assert int8.tv_first_mean < 0.002 and int8.greedy_divergence == 0.0


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda p: quantized_pair(p, "int3"), "quant_unknown"),
        (lambda p: quantized_pair(p, None), "quant_unknown"),
        (lambda p: quantize_weight(torch.ones(2, 2), "none", 0), "quant_unknown"),
        (lambda p: variant_pair(p, dtype="float8"), "dtype_unknown"),
        (lambda p: check_dtype("bfloat16", "cuda:99"), "dtype_unsupported"),
        (lambda p: quant_figures(p, "int5", ["A:\n"]), "quant_unknown"),
    ],
)
def test_bad_input_has_a_code(embedded_pair, call, code):
    with pytest.raises(ConfigError) as info:
        call(embedded_pair)
    assert info.value.code == code


def test_a_large_target_is_not_copied(embedded_pair, monkeypatch):
    import specdec_core.core.quant as quant

    monkeypatch.setattr(quant, "MAX_COPY_PARAMS", 1_000_000)  # the target has ≈ 4.2 M
    with pytest.raises(ConfigError) as info:
        quantized_pair(embedded_pair, "int8")
    assert info.value.code == "variant_too_large"
    assert quantized_pair(embedded_pair, "none") is embedded_pair  # nothing to copy


def test_a_device_without_the_precision_refuses(embedded_pair, monkeypatch):
    import specdec_core.core.quant as quant

    monkeypatch.setattr(quant, "dtype_supported", lambda dtype, device: dtype == torch.float32)
    with pytest.raises(ConfigError) as info:
        variant_pair(embedded_pair, dtype="float16")
    assert info.value.code == "dtype_unsupported"
    assert info.value.params == {"dtype": "float16", "device": "cpu"}
