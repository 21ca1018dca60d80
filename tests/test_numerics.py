"""Lossless "up to numerics" (bench/numerics.py): the verify forward's logits
against one-token decode steps (float32 within 1e-4; bfloat16 visibly apart), and the
seeded, bounded search for a bf16 near-tie where greedy speculative decoding and the
greedy target alone diverge, pinned (prompt, position, both logits, margin, flip), with
the same prompt agreeing in float32."""

from __future__ import annotations

import pytest
import torch

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.numerics import find_flip, greedy_alone, verify_vs_decode
from specdec_core.core.errors import ConfigError, InputError
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.quant import variant_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate

PROMPTS = (
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "HAMLET:\nTo be, or not to be, that is the question:",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
)
WIDOW = "Widow:\nLord, let me never have a cause to sigh,\n"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """bf16 forwards on a loaded 2-core CPU: two threads spin; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_float32_verify_equals_decode_within_1e_4(embedded_pair, prompt):
    report = verify_vs_decode(embedded_pair, prompt, "float32", gamma=6)
    assert len(report.positions) == 7 and len(report.draft_ids) == 6
    assert report.max_abs_delta < 1e-4
    assert report.flips == ()
    for p in report.positions:
        assert p.margin_decode == pytest.approx(p.margin_verify, abs=2e-4)


def test_bfloat16_verify_and_decode_differ(embedded_pair):
    """Same prompt, same drafts: in bf16 the two computations differ by whole bf16 steps
    (≥ 1/128 on logits of size ≈ 1..8), four orders above float32."""
    f32 = verify_vs_decode(embedded_pair, PROMPTS[0], "float32", gamma=4)
    bf16 = verify_vs_decode(embedded_pair, PROMPTS[0], "bfloat16", gamma=4)
    assert bf16.draft_ids == f32.draft_ids  # the float32 draft's tokens in both
    assert bf16.max_abs_delta >= 1 / 128
    assert bf16.max_abs_delta > 1000 * f32.max_abs_delta


def test_explicit_drafts_and_bad_input(embedded_pair):
    report = verify_vs_decode(embedded_pair, PROMPTS[1], "float32", draft_ids=[5, 6])
    assert report.draft_ids == (5, 6) and len(report.positions) == 3
    with pytest.raises(InputError) as info:
        verify_vs_decode(embedded_pair, PROMPTS[1], "float32", gamma=17)
    assert info.value.code == "bad_value"
    with pytest.raises(ConfigError) as info:
        verify_vs_decode(embedded_pair, PROMPTS[1], "float64")
    assert info.value.code == "dtype_unknown"
    with pytest.raises(InputError) as info:
        find_flip(embedded_pair, list(PROMPTS), max_prompts=201)
    assert info.value.code == "bad_value"


def test_the_greedy_replay_is_the_engines(embedded_pair):
    """greedy_alone (which keeps each row) decides what the fast path decides, in bf16."""
    low = variant_pair(embedded_pair, dtype="bfloat16")
    for prompt in (WIDOW, PROMPTS[2]):  # the second ends at once (EOS first)
        ids = prompt_ids(embedded_pair, prompt)
        mine, rows = greedy_alone(low.target, ids, 6, embedded_pair.eos_token_id)
        engine = generate(low, ids, SessionConfig(max_new_tokens=6), "autoregressive")
        assert mine == engine.output_ids and len(rows) == len(mine)
    assert len(greedy_alone(low.target, prompt_ids(embedded_pair, WIDOW), 6, 0)[0]) == 6


def test_the_bf16_flip_case_is_pinned(embedded_pair):
    """Seed 6 puts the 'Widow' prompt first: at its 4th greedy token the bf16 decode step
    has token 387 ahead of 292 by one bf16 step (5.5 vs 5.46875), while the verification
    forward gives both 5.46875 (a tie: the lower id, 292, wins); the runs diverge there.
    In float32 387 leads by 0.0093 and both runs agree.

    The exact logits come from this CPU's bf16 kernels (torch's AVX2 path, the machines
    this project tests on); other kernels round differently, so elsewhere the pin is
    skipped, with the reason, rather than asserting numbers found on other hardware."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        pytest.skip(f"the case was pinned with AVX2 bf16 kernels; this CPU uses {capability}")
    search = find_flip(
        embedded_pair, held_out_prompts(100), "bfloat16", seed=6, max_prompts=2, max_new_tokens=8
    )
    case = search.case
    assert case is not None and search.tried == 1
    assert case.prompt == WIDOW
    assert (case.position, case.alone_token, case.spec_token) == (3, 387, 292)
    assert case.alone_ids[:3] == case.spec_ids[:3] and case.alone_ids[3] != case.spec_ids[3]
    assert case.decode_logits == (5.5, 5.46875)
    assert case.verify_logits == (5.46875, 5.46875)
    assert case.margin == 0.03125
    assert (case.round_index, case.row) == (1, 0)
    assert case.float32_agree
    assert case.float32_logits == pytest.approx((5.47648, 5.46720), abs=2e-4)
    assert search.near_ties >= 1 and search.smallest_margin <= case.margin
