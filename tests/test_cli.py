"""The CLI contract of docs/ARCHITECTURE.md: ``run`` and ``bench`` with ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import run_json

from specdec_core.__main__ import main
from specdec_core.server.cli import parse_edits

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUND_KEYS = {
    "drafted",
    "accepted",
    "appended",
    "kind",
    "checks",
    "committed_len",
    "target_kv_len",
    "draft_kv_len",
}
CHECK_KEYS = {"token", "p", "q", "overlap", "accept_prob", "u", "status"}


def test_run_greedy_json_contract(capsys, pair_arg):
    out = run_json(
        capsys,
        "run",
        "--pair",
        pair_arg,
        "--prompt",
        "KING:\nWe",
        "--gamma",
        "3",
        "--max-new-tokens",
        "12",
        "--json",
    )
    assert set(out) >= {"output_ids", "text", "stop_reason", "stats", "rounds"}
    assert len(out["output_ids"]) == 12 and out["stop_reason"] == "max_new_tokens"
    assert set(out["stats"]) >= {
        "rounds",
        "target_forwards",
        "draft_forwards",
        "acceptance_rate",
        "mean_accepted",
    }
    prompt_len = out["rounds"][0]["committed_len"] - len(out["rounds"][0]["appended"])
    total = prompt_len
    for r in out["rounds"]:
        assert set(r) == ROUND_KEYS and all(set(c) == CHECK_KEYS for c in r["checks"])
        total += len(r["appended"])
        assert r["committed_len"] == total  # lengths count prompt tokens
        assert r["target_kv_len"] == total - 1 and r["draft_kv_len"] <= total - 1
        assert r["appended"][: r["accepted"]] == r["drafted"][: r["accepted"]]
        assert r["kind"] in {"correction", "bonus", "stopped"}
    ar = run_json(
        capsys,
        "run",
        "--pair",
        pair_arg,
        "--prompt",
        "KING:\nWe",
        "--mode",
        "autoregressive",
        "--max-new-tokens",
        "12",
        "--json",
    )
    assert ar["output_ids"] == out["output_ids"]  # greedy speculative == target alone


def test_run_sampled_with_edit(capsys, pair_arg):
    out = run_json(
        capsys,
        "run",
        "--pair",
        pair_arg,
        "--prompt",
        "KING:\nWe",
        "--gamma",
        "4",
        "--temperature",
        "0.8",
        "--top-k",
        "50",
        "--seed",
        "3",
        "--max-new-tokens",
        "15",
        "--edit",
        "1:2=42",
        "--json",
    )
    first = out["rounds"][0]
    assert first["drafted"][1] == 42
    check = first["checks"][1]
    assert check["q"] == 1.0  # an edit is a one-hot proposal
    if first["checks"][0]["status"] == "accepted":
        assert check["accept_prob"] == pytest.approx(check["p"], abs=1e-6)
    assert all(c["u"] is not None for c in first["checks"] if c["status"] != "discarded")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt", ""], "empty"),
        (["--prompt", "x", "--gamma", "0"], "gamma"),
        (["--prompt", "x", "--temperature", "-1"], "temperature"),
        (["--prompt", "x", "--top-p", "0"], "top-p"),
        (["--prompt", "x", "--edit", "1:1=999999"], "token id"),
        (["--prompt", "x", "--edit", "banana"], "ROUND:POS=TOKEN_ID"),
    ],
)
def test_run_errors_exit_nonzero_with_one_line(capsys, pair_arg, args, message):
    assert main(["run", "--pair", pair_arg, *args, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_unknown_pair_and_custom_without_opt_in(capsys, tiny_dirs, monkeypatch):
    assert main(["run", "--pair", "gpt5", "--prompt", "x"]) == 2
    assert "unknown model pair" in capsys.readouterr().err
    monkeypatch.delenv("SPECDEC_ALLOW_CUSTOM_MODELS", raising=False)
    assert (
        main(["run", "--pair", f"{tiny_dirs['target']},{tiny_dirs['draft']}", "--prompt", "x"]) == 2
    )
    assert "SPECDEC_ALLOW_CUSTOM_MODELS" in capsys.readouterr().err


def test_parse_edits():
    assert parse_edits(["1:2=42", "1:3=7", "2:1=5"]) == {1: [(2, 42), (3, 7)], 2: [(1, 5)]}
    with pytest.raises(ValueError):
        parse_edits(["0:1=5"])


def test_cli_subprocess_embedded_pair():
    """The real entry point on the shipped pair, as a user types it."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specdec_core",
            "run",
            "--pair",
            "embedded",
            "--prompt",
            "ROMEO:\nBut soft",
            "--max-new-tokens",
            "10",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["output_ids"]) == 10 and out["stats"]["rounds"] >= 2
    assert 0.0 <= out["stats"]["acceptance_rate"] <= 1.0


def test_edits_that_cannot_apply_are_reported(capsys, pair_arg):
    args = ["run", "--pair", pair_arg, "--prompt", "KING:\nWe", "--max-new-tokens", "6"]
    out = run_json(capsys, *args, "--edit", "1:1=5", "--edit", "99:1=42", "--json")
    assert out["rounds"][0]["drafted"][0] == 5
    assert main([*args, "--edit", "99:1=42", "--json"]) == 0
    captured = capsys.readouterr()
    assert "--edit 99:1 not applied" in captured.err and json.loads(captured.out)["rounds"]
    assert main([*args, "--mode", "autoregressive", "--edit", "1:1=5", "--json"]) == 2
    assert "needs --mode speculative" in capsys.readouterr().err
