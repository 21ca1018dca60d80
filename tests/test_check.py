"""The device check (``python -m specdec_core check``): a quick run on the embedded pair
in a process where Streamlit, plotly and segno cannot be imported (the GPU image lacks
them) gives one JSON object naming the device with every case passing; a failing case
sets the exit status; a missing xgrammar skips its case with a reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specdec_core.bench import check, check_cases
from specdec_core.bench.check_cases import CaseResult, GreedyCase, greedy_matrix, run_greedy_case
from specdec_core.bench.check_speed import pooled
from specdec_core.drafters.registry import DRAFTER_NAMES

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = "import sys\nfor m in ('streamlit', 'plotly', 'segno'): sys.modules[m] = None\n"


def test_quick_check_runs_without_streamlit_and_every_case_passes():
    code = (
        BLOCKED + "from specdec_core.__main__ import main\n"
        "sys.exit(main(['check', '--quick', '--json', '--threads', '1']))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_TORCH_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)  # one JSON object on stdout
    assert out["device"] == "CPU" and out["device_type"] == "cpu" and out["quick"] is True
    assert out["ok"] is True and out["failed"] == 0
    assert out["passed"] + out["skipped"] == len(out["cases"]) >= 21
    names = {c["name"] for c in out["cases"]}
    assert {f"chain {d}" for d in DRAFTER_NAMES} <= names
    assert {"tree model (2, 2, 1, 1)", "int4 target", "chain: advance vs fresh replay"} <= names
    assert all(c["ok"] is not False for c in out["cases"])
    s = out["sampled"]
    assert s["n"] == 200 and s["ok"] and 0.001 <= s["p_value"] <= 1 and s["dof"] == s["cells"] - 1
    speed = out["speed"]
    assert [r["drafter"] for r in speed["rows"]] == list(DRAFTER_NAMES)  # the embedded pair has all
    for row in speed["rows"]:
        assert row["tokens_per_s"] > 0 and row["speedup"] == pytest.approx(
            row["tokens_per_s"] / row["target_tokens_per_s"]
        )
        assert row["error_pct"] == pytest.approx(
            100 * (row["predicted_speedup"] - row["speedup"]) / row["speedup"]
        )
    assert speed["verify_ratio"][0] == 1.0 and speed["target_step_ms"] > 0
    assert out["reference"][0]["device"] == "NVIDIA H200"
    assert out["software"]["torch"] and out["threads"] == 1
    # one progress line per section on stderr
    for section in ("greedy equality", "replay equality", "sampled chi-square", "speed table"):
        assert f"[check] {section}" in done.stderr


def test_a_failing_case_sets_the_exit_status_and_the_screen_says_fail(monkeypatch, capsys):
    bad = CaseResult("greedy", "chain model", False, "'ROMEO' differs at token 3 of 24")
    good = CaseResult("replay", "tree: replayed twice", True, "bit-identical")
    skipped = CaseResult("greedy", "regex grammar", None, "xgrammar is not installed")
    report = check.CheckReport(
        "CPU", "cpu", {"torch": "x"}, 1, "embedded", True, (bad, good, skipped), None, None, 1.0
    )
    monkeypatch.setattr(check, "run_check", lambda *a, **k: report)
    assert check.check_command(True, True) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["ok"], out["passed"], out["failed"], out["skipped"]) == (False, 1, 1, 1)
    assert check.check_command(True, False) == 1
    text = capsys.readouterr().out
    assert "FAIL chain model" in text and "skip regex grammar" in text
    assert "1 equality case(s) FAIL" in text
    ok = check.CheckReport("CPU", "cpu", {}, 1, "embedded", True, (good, skipped), None, None, 1.0)
    monkeypatch.setattr(check, "run_check", lambda *a, **k: ok)
    assert check.check_command(True, True) == 0  # a skipped case never fails the check


def test_a_speculative_run_that_differs_from_the_target_fails_its_case(embedded_pair, monkeypatch):
    real = check_cases.generate

    def off_by_one(pair, prompt, config, mode="speculative", *args, **kwargs):
        out = real(pair, prompt, config, mode, *args, **kwargs)
        if mode == "speculative":  # a wrong token at position 2
            out.output_ids[2] = (out.output_ids[2] + 1) % pair.vocab_size
        return out

    monkeypatch.setattr(check_cases, "generate", off_by_one)
    case = run_greedy_case(embedded_pair, GreedyCase("chain model"), ("ROMEO:",), 8, 4)
    assert case.ok is False and "differs at token 2 of 8" in case.detail


def test_without_xgrammar_the_grammar_case_is_skipped_with_a_reason(embedded_pair, monkeypatch):
    monkeypatch.setitem(sys.modules, "xgrammar", None)  # import xgrammar raises ImportError
    (grammar,) = [c for c in greedy_matrix() if c.needs_xgrammar]
    case = run_greedy_case(embedded_pair, grammar, ("ROMEO:",), 8, 4)
    assert case.ok is None and case.detail == "xgrammar is not installed"


def test_a_drafter_the_pair_lacks_is_skipped(tiny_pair):
    case = run_greedy_case(tiny_pair, GreedyCase("chain eagle", "eagle"), ("ab",), 4, 2)
    assert case.ok is None and "ships no eagle drafter" in case.detail


def test_pooled_cells_keep_every_expected_count_at_five_or_more():
    probs = np.array([0.5, 0.3, 0.14, 0.04, 0.02])  # the last two expect 4 and 2 of 100
    counts = np.array([52, 28, 11, 5, 4])
    c, p = pooled(counts, probs, 100)
    assert list(c) == [52, 28, 11, 9] and p == pytest.approx([0.5, 0.3, 0.14, 0.06])
    c, p = pooled(counts, np.array([0.5, 0.3, 0.1, 0.1, 0.0]), 100)  # 4 draws where p = 0
    assert list(c) == [52, 28, 11, 5, 4] and p[-1] == 0.0  # kept: they fail the test
    c, p = pooled(np.array([60, 40, 0]), np.array([0.6, 0.4, 0.0]), 100)
    assert list(c) == [60, 40]  # an empty pool expecting nothing is dropped


def test_the_chi_square_rejects_a_distribution_that_is_not_the_targets(embedded_pair):
    from specdec_core.bench.check_speed import CHI_PROMPT, first_tokens, fit, target_probs

    real = target_probs(embedded_pair, CHI_PROMPT)
    counts = first_tokens(embedded_pair, 200)
    assert counts.sum() == 200
    cells, fine = fit(counts, real)
    assert fine.p_value >= 1e-3 and fine.dof == cells - 1
    # a law that swaps the top token's probability (≈ 0.15) with the fifth's (≈ 0.04):
    # still a distribution, no longer the target's
    skewed = real.copy()
    order = np.argsort(real)
    top, fifth = int(order[-1]), int(order[-5])
    skewed[top], skewed[fifth] = real[fifth], real[top]
    assert fit(counts, skewed)[1].p_value < 1e-6


def test_a_grammar_that_cannot_compile_here_skips_and_a_crash_fails(tiny_pair, monkeypatch):
    from specdec_core.core.errors import ConfigError

    calls = []

    def busy(*args):
        calls.append(1)
        raise ConfigError("the server is compiling other grammars: try again", "grammar_busy")

    monkeypatch.setattr(check_cases, "_greedy_case", busy)
    monkeypatch.setattr(check_cases.time, "sleep", lambda s: None)
    case = run_greedy_case(tiny_pair, GreedyCase("regex grammar"), ("ab",), 4, 2)
    assert case.ok is None and "did not compile here" in case.detail and len(calls) == 2

    def crash(*args):
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(check_cases, "_greedy_case", crash)
    case = run_greedy_case(tiny_pair, GreedyCase("chain model"), ("ab",), 4, 2)
    assert case.ok is False and case.detail == "RuntimeError: CUDA error: an illegal memory access"
