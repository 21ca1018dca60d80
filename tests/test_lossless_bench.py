"""The lossless page's measurements (bench/lossless.py, bench/same_seed.py) and the CLI's flags:
held-out prompts, same seed ≠ same text, the first-k-token test against its simulated
null (k = 1 and 2), bounds and codes, and ``--target-quant`` / ``--acceptance`` in the
JSON (unchanged without them; one ``error:`` line and exit 2 for bad values)."""

from __future__ import annotations

import json

import pytest
import torch

from specdec_core.__main__ import main
from specdec_core.bench import lossless
from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.same_seed import (
    MAX_SEEDS,
    exact_first_tokens,
    first_tokens_test,
    same_seed_texts,
)
from specdec_core.core.errors import ConfigError, InputError
from specdec_core.core.inputs import prompt_ids
from specdec_core.core.sampling import SamplingConfig

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Many batch-1 runs of a small model: one thread (two spin on a loaded machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_held_out_prompts():
    prompts = held_out_prompts(30)
    assert len(prompts) == 30 and len(set(prompts)) == 30
    assert prompts[0] == "BAPTISTA:\nGood morrow, neighbour Gremio.\n"
    assert all(p.count("\n") == 2 and p.endswith("\n") for p in prompts)
    assert held_out_prompts(100)[:1] == prompts[:1]
    for bad in (0, 201, "x"):
        with pytest.raises(InputError) as info:
            held_out_prompts(bad)
        assert info.value.code == "bad_value"


def test_a_missing_corpus_has_a_code(monkeypatch, tmp_path):
    monkeypatch.setattr(lossless, "CORPUS", tmp_path / "none.txt")
    with pytest.raises(InputError) as info:
        held_out_prompts(5)
    assert info.value.code == "corpus_missing"


def test_same_seed_different_text(embedded_pair):
    """Seed 0, T = 1: the two texts differ from the first token on (measured); at T = 0
    they are the same."""
    sampled = same_seed_texts(embedded_pair, PROMPT, seed=0, max_new_tokens=12)
    assert not sampled.same
    assert sampled.alone_ids[0] == sampled.speculative_ids[0] == 199  # both "\n" first
    assert sampled.alone_ids[1] != sampled.speculative_ids[1]
    greedy = same_seed_texts(embedded_pair, PROMPT, seed=0, max_new_tokens=12, temperature=0)
    assert greedy.same


def test_exact_first_tokens_law(embedded_pair):
    ids = prompt_ids(embedded_pair, PROMPT)
    one = exact_first_tokens(embedded_pair, ids, 1, SamplingConfig(1.0))
    assert sum(one.values()) == pytest.approx(1.0, abs=1e-9) and len(one) == 4096
    two = exact_first_tokens(embedded_pair, ids, 2, SamplingConfig(1.0))
    assert sum(two.values()) == pytest.approx(1.0, abs=1e-9)
    firsts = {k[0] for k in two if k != ("other",)}
    assert len(firsts) == 64  # JOINT_TOP first tokens enumerated, the rest in one cell
    for x1 in list(firsts)[:3]:  # the marginal of x1 is p(x1)
        marginal = sum(v for k, v in two.items() if k[0] == x1)
        assert marginal == pytest.approx(one[(x1,)], abs=1e-9)


@pytest.mark.parametrize(("k", "n"), [(1, 120), (2, 60)])
def test_first_tokens_agree_with_the_target_alone(embedded_pair, k, n):
    test = first_tokens_test(embedded_pair, PROMPT, n=n, k=k)
    assert (test.n, test.k) == (n, k)
    assert sum(a for a, _, _ in test.counts.values()) == n
    assert sum(s for _, s, _ in test.counts.values()) == n
    assert all(len(x) <= k for x in test.counts)
    assert test.p_value > 0.05  # χ² does not reject "same distribution"
    low, mid, high = test.null_quantiles
    assert low <= mid <= high and len(test.null_tv) == 200
    assert test.tv <= high  # within what two target-alone samples show
    assert 0.0 < test.null_share_above <= 1.0


def test_the_same_test_rejects_a_lossy_rule(embedded_pair):
    """Typical acceptance at δ = 0.05 on the speculative side (seeds 0..199, first token):
    χ² rejects "same distribution" (p ≈ 3e-6 measured), and the speculative sample is
    farther from the target's exact law than the target-alone sample."""
    lossy = {"acceptance": "typical", "acceptance_delta": 0.05}
    test = first_tokens_test(embedded_pair, PROMPT, n=200, k=1, acceptance=lossy)
    assert test.p_value < 1e-3
    assert test.tv_spec_exact > test.tv_alone_exact


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"acceptance": {"acceptance": "typical", "acceptance_delta": 2.0}}, "acceptance_delta"),
        ({"n": MAX_SEEDS + 1}, "bad_value"),
        ({"n": 0}, "bad_value"),
        ({"k": 3}, "bad_value"),
        ({"temperature": 0.0}, "needs_temperature"),
    ],
)
def test_first_tokens_test_refuses(embedded_pair, kwargs, code):
    with pytest.raises((InputError, ConfigError)) as info:
        first_tokens_test(embedded_pair, PROMPT, **kwargs)
    assert info.value.code == code


def _run(capsys, *args: str) -> dict:
    assert main(["run", "--prompt", PROMPT, "--max-new-tokens", "6", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_json_unchanged_by_default_and_marked_when_lossy(capsys):
    plain = _run(capsys, "--temperature", "1")
    assert list(plain) == ["output_ids", "text", "stop_reason", "stats", "rounds"]
    explicit = _run(capsys, "--temperature", "1", "--acceptance", "exact", "--target-quant", "none")
    assert explicit == plain
    lossy = _run(
        capsys, "--temperature", "1", "--acceptance", "threshold", "--acceptance-delta", "0.2"
    )
    assert lossy["acceptance"] == {"rule": "threshold", "lossy": True, "delta": 0.2, "top_k": 1}
    assert "target_quant" not in lossy
    quant = _run(capsys, "--target-quant", "int4")
    assert quant["target_quant"] == "int4" and "acceptance" not in quant


@pytest.mark.parametrize(
    "args",
    [
        ["--acceptance", "medusa"],
        ["--acceptance", "typical", "--acceptance-delta", "1.5"],
        ["--acceptance", "typical", "--acceptance-epsilon", "0"],
        ["--acceptance", "threshold", "--acceptance-top-k", "-1"],
        ["--target-quant", "int3"],
        ["--acceptance", "typical", "--mode", "autoregressive"],
        ["--acceptance", "typical", "--tree", "2,1"],
    ],
)
def test_cli_bad_values_are_one_error_line(capsys, args):
    assert main(["run", "--prompt", PROMPT, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_bench_refuses_a_bad_flag_before_loading(capsys):
    assert main(["bench", "--no-hf", "--acceptance", "fast"]) == 2
    assert capsys.readouterr().err.startswith("error: acceptance rule must be one of")
