"""The CLI contract of docs/ARCHITECTURE.md: ``run`` and ``bench`` with ``--json``."""

from __future__ import annotations

import json
import os
import re
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


# ---------------------------------------------------------------- processors
GRAMMAR_VIEW_KEYS = {"accepted_tokens", "terminated", "completed", "allowed_next"}


def _run(capsys, pair_arg, *extra: str) -> dict:
    base = ["run", "--pair", pair_arg, "--prompt", "KING:\nWe", "--max-new-tokens", "14"]
    return run_json(capsys, *base, *extra, "--json")


def test_run_with_a_regex_reports_the_matcher_per_round(capsys, pair_arg, tiny_pair):
    regex = r"[a-z ]{1,20}\.\n"
    out = _run(capsys, pair_arg, "--regex", regex, "--gamma", "3")
    committed = 0
    previous = None
    for r in out["rounds"]:
        assert set(r) == ROUND_KEYS | {"grammar"}
        g = r["grammar"]
        assert set(g) == {"before_verify", "after_verify", "after_commit"}
        assert all(set(v) == GRAMMAR_VIEW_KEYS for v in g.values())
        assert g["before_verify"]["accepted_tokens"] == committed
        if previous is not None:
            assert g["before_verify"] == previous
        drafted = r["drafted"]
        through = drafted.index(0) + 1 if 0 in drafted else len(drafted)
        assert g["after_verify"]["accepted_tokens"] == committed + through
        committed += len(r["appended"])
        assert g["after_commit"]["accepted_tokens"] == committed
        previous = g["after_commit"]
    text = tiny_pair.tokenizer.decode(out["output_ids"])
    if out["stop_reason"] == "eos":
        assert re.fullmatch(regex, tiny_pair.tokenizer.decode(out["output_ids"][:-1]))
    else:
        assert re.fullmatch(r"[a-z ]{0,20}(\.\n?)?", text), text
    alone = _run(capsys, pair_arg, "--regex", regex, "--mode", "autoregressive")
    assert alone["output_ids"] == out["output_ids"] and alone["rounds"] == []


def test_run_with_penalties_equals_the_target_alone(capsys, pair_arg):
    flags = ["--repetition-penalty", "1.6", "--no-repeat-ngram-size", "2"]
    out = _run(capsys, pair_arg, *flags, "--frequency-penalty", "0.5", "--presence-penalty", "0.5")
    alone = _run(
        capsys,
        pair_arg,
        *flags,
        "--frequency-penalty",
        "0.5",
        "--presence-penalty",
        "0.5",
        "--mode",
        "autoregressive",
    )
    plain = _run(capsys, pair_arg)
    assert out["output_ids"] == alone["output_ids"] != plain["output_ids"]
    ids = out["output_ids"]
    bigrams = list(zip(ids, ids[1:], strict=False))
    assert len(bigrams) == len(set(bigrams))  # no repeated 2-gram in the generated part
    for r in out["rounds"]:
        assert set(r) == ROUND_KEYS | {"penalty"}
        assert set(r["penalty"]) == {"before_verify", "after_verify", "after_commit"}
        after = r["penalty"]["after_commit"]
        assert set(after) == {"counts", "distinct"} and after["distinct"] >= len(after["counts"])
        assert all(whole >= generated >= 0 for _, whole, generated in after["counts"])
        wholes = [whole for _, whole, _ in after["counts"]]
        assert wholes == sorted(wholes, reverse=True)  # most frequent first


def test_run_with_a_json_schema_file(capsys, pair_arg, tmp_path):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema), encoding="utf-8")
    from_file = _run(capsys, pair_arg, "--json-schema", str(path))
    from_text = _run(capsys, pair_arg, "--json-schema", json.dumps(schema))
    assert from_file["output_ids"] == from_text["output_ids"]
    assert all("grammar" in r for r in from_file["rounds"])
    big = tmp_path / "big.json"
    big.write_text('{"description": "' + "x" * 5000 + '"}', encoding="utf-8")
    assert main(["run", "--pair", pair_arg, "--prompt", "x", "--json-schema", str(big)]) == 2
    assert "at most 2000" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--regex", "a("], "does not compile"),
        (["--regex", "(x){0}"], "allows no token"),
        (["--regex", "x" * 2001], "at most 2000"),
        (["--json-schema", '{"type": "object", "required": 5'], "not JSON"),
        (["--json-schema", "no/such/file.json"], "neither JSON text nor a readable"),
        (["--regex", "a", "--json-schema", "{}"], "cannot be used together"),
        (["--regex", "a", "--drafter", "ngram"], "ngram drafter"),
        (["--repetition-penalty", "0"], "repetition penalty must be between"),
        (["--repetition-penalty", "nan"], "repetition penalty must be between"),
        (["--frequency-penalty", "3"], "frequency penalty must be between"),
        (["--presence-penalty", "-2.5"], "presence penalty must be between"),
        (["--no-repeat-ngram-size", "0"], "must be ≥ 1"),
        (["--no-repeat-ngram-size", "-3"], "must be ≥ 1"),
        (["--no-repeat-ngram-size", "11"], "n-gram size"),
    ],
)
def test_processor_flag_errors_exit_2_with_one_line(capsys, pair_arg, args, message):
    assert main(["run", "--pair", pair_arg, "--prompt", "KING:", *args, "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err, err
    assert captured.out == ""


def test_tree_run_with_a_regex_reports_the_matcher_per_round(capsys, pair_arg):
    out = _run(capsys, pair_arg, "--regex", r"[a-z ]{1,20}\.\n", "--tree", "2,1")
    committed = 0
    for r in out["rounds"]:
        g = r["grammar"]
        assert g["before_verify"]["accepted_tokens"] == committed
        committed += len(r["appended"])
        assert g["after_commit"]["accepted_tokens"] == committed
    plain = _run(capsys, pair_arg, "--tree", "2,1")
    assert all("grammar" not in r and "penalty" not in r for r in plain["rounds"])
