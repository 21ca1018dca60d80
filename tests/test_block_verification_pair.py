"""Block verification in the chain round (``--verification block``, ``rules/block.py``) on
the embedded pair: the CLI's per-round block records, greedy equality with every chain
drafter, the step machine's records equal the fast path's, an edit (one-hot q), the
settings' refusals (a tree, a lossy rule, an unknown name) and χ² of the sampled output
against the target alone."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import run_json
from scipy.stats import chi2

from specdec_core.__main__ import main as cli
from specdec_core.core.errors import ConfigError
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.generate import check_tree_settings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CHAIN_DRAFTERS = ("model", "ngram", "early-exit", "eagle", "mtp", "block", "recurrent")


def test_cli_block_records(capsys):
    """The issue's command: every sampled round carries what the rule computed, and the
    record agrees with itself (kept = accepted drafts unless a stop cut the round;
    token-wise's count from the same draws and ratios; τ + 1 is the resampled row)."""
    out = run_json(
        capsys, "run", "--pair", "embedded", "--prompt", "ROMEO:", "--temperature", "1",
        "--seed", "3", "--verification", "block", "--max-new-tokens", "24", "--json",
    )  # fmt: skip
    rounds = out["rounds"]
    assert len(rounds) >= 3 and all("block" in r for r in rounds)
    for r in rounds:
        b, checks = r["block"], r["checks"]
        gamma = len(r["drafted"])
        assert len(b["weights"]) == len(b["stop_probs"]) == len(b["u"]) == gamma
        assert [c["u"] for c in checks] == b["u"]
        if r["kind"] != "stopped":
            assert b["kept"] == r["accepted"]
            assert r["kind"] == ("bonus" if b["kept"] == gamma else "correction")
        assert b["resample_position"] == b["kept"] + 1
        a = [c["accept_prob"] for c in checks]
        assert b["token_wise"] == next((i for i, u in enumerate(b["u"]) if not u < a[i]), gamma)
        w = 1.0  # p'_i = min(1, p'_{i-1} p_i(y_i) / q_i(y_i)), float32 rows
        for c, weight in zip(checks, b["weights"], strict=True):
            w = min(1.0, w * c["p"] / c["q"])
            assert weight == pytest.approx(w, rel=1e-5)
        if not gamma:  # a round cut to no drafts: the bonus from p_1, as token-wise
            assert b["kept"] == 0 and r["kind"] in ("bonus", "stopped")
            continue
        assert b["stop_probs"][-1] == pytest.approx(b["weights"][-1], abs=1e-12)  # h_γ = p'_γ
        kept = [
            i + 1 for i, (u, h) in enumerate(zip(b["u"], b["stop_probs"], strict=True)) if u < h
        ]
        assert b["kept"] == max(kept, default=0)
        probs = b["residual_probs"]
        assert probs == sorted(probs, reverse=True) and 0.0 < sum(probs) <= 1.0 + 1e-9
    token = run_json(
        capsys, "run", "--pair", "embedded", "--prompt", "ROMEO:", "--temperature", "1",
        "--seed", "3", "--max-new-tokens", "24", "--json",
    )  # fmt: skip
    assert all("block" not in r for r in token["rounds"])  # the default JSON is unchanged


@pytest.mark.parametrize("drafter", CHAIN_DRAFTERS)
def test_greedy_block_equals_the_target_alone(embedded_pair, drafter):
    """T = 0: block verification decides what the greedy rule decides (one-hot rows), so
    the output is the target's own greedy output, token for token."""
    for prompt in ("ROMEO:", "KING:\nWe"):
        config = SessionConfig(gamma=4, max_new_tokens=16, verification="block")
        alone = generate(embedded_pair, prompt, config, mode="autoregressive").output_ids
        run = generate(
            embedded_pair, prompt, config, drafter=make_named_drafter(embedded_pair, drafter)
        )
        assert run.output_ids == alone
        assert all(r.block is None for r in run.records)


@pytest.mark.parametrize("drafter", CHAIN_DRAFTERS)
def test_step_machine_and_fast_path_agree_under_block(embedded_pair, drafter):
    """T = 0.8, top-k 20: the step machine's records equal the fast path's record by record,
    block decisions included, with every chain drafter."""
    config = SessionConfig(
        gamma=3, temperature=0.8, top_k=20, seed=7, max_new_tokens=14, verification="block"
    )
    fast = generate(
        embedded_pair, "KING:\nWe", config, drafter=make_named_drafter(embedded_pair, drafter)
    )
    session = SpeculativeSession(
        embedded_pair, "KING:\nWe", config, make_named_drafter(embedded_pair, drafter)
    )
    while session.phase == "propose":
        session.propose()
        session.verify()
        session.commit()
    assert session.generated_ids == fast.output_ids
    assert tuple(session.records) == fast.records
    drafted = [r for r in fast.records if r.drafted]
    assert drafted and all(r.block is not None for r in drafted)


def test_an_edit_is_a_one_hot_draft(embedded_pair):
    """Editing draft 1 makes ``q_1`` one-hot, so ``p'_1 = min(1, p_1(y_1) / 1) = p_1(y_1)``."""
    config = SessionConfig(gamma=3, temperature=1.0, seed=2, max_new_tokens=8, verification="block")
    session = SpeculativeSession(embedded_pair, "ROMEO:", config)
    session.propose()
    token = embedded_pair.tokenizer.encode(" the")[0]
    session.steps.edit_draft(1, token)
    trace = session.verify()
    first = trace.checks[0]
    assert first.edited and first.q == pytest.approx(1.0)
    session.commit()
    block = session.history[-1].record.block
    assert block is not None
    assert block.weights[0] == pytest.approx(first.p, rel=1e-5)


def test_refusals():
    with pytest.raises(ConfigError) as exc:
        SessionConfig(verification="blocky").validate()
    assert exc.value.code == "bad_verification"
    with pytest.raises(ConfigError) as exc:
        SessionConfig(verification="block", acceptance="typical").validate()
    assert exc.value.code == "verification_lossy"
    with pytest.raises(ConfigError) as exc:
        check_tree_settings(SessionConfig(verification="block", temperature=1.0), "model")
    assert exc.value.code == "block_tree"
    check_tree_settings(SessionConfig(temperature=1.0), "model")  # token-wise: a tree runs


def test_cli_tree_with_block_is_one_error_line(capsys):
    code = cli(["run", "--prompt", "ROMEO:", "--tree", "2,1", "--verification", "block", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "token-wise" in err and err.count("\n") == 1


def _chi2_p(counts: Counter, probs: dict, n: int) -> float:
    """Pearson χ² p-value over outcomes expected ≥ 5 times; the rest pooled in one cell."""
    keys = [k for k in probs if probs[k] * n >= 5]
    cells = [(probs[k] * n, counts.get(k, 0)) for k in keys]
    cells.append((max(0.0, n - sum(e for e, _ in cells)), n - sum(o for _, o in cells)))
    if any(e <= 1e-9 and o > 0 for e, o in cells):
        return 0.0
    cells = [(e, o) for e, o in cells if e > 1e-9]
    stat = sum((o - e) ** 2 / e for e, o in cells)
    return float(chi2.sf(stat, len(cells) - 1))


N_SAMPLES = 600


@torch.inference_mode()
def test_chi2_first_two_tokens_follow_the_target(embedded_pair):
    """T = 1, γ = 4, the pair's draft model, block verification: the first two generated
    tokens, one run per seed 0..599, follow the target alone's exact ``P(t1, t2)``
    (p > 1e-3), and the rounds kept more than token-wise would have with the same draws
    at least once (the rule was exercised, not just token-wise)."""
    pair, prompt = embedded_pair, "KING:\nWe"
    ids = pair.tokenizer.encode(prompt)
    p1 = torch.softmax(pair.target(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
    firsts = (p1 >= 1e-3).nonzero().flatten().tolist()
    second = pair.target(input_ids=torch.tensor([ids + [t] for t in firsts])).logits[:, -1]
    exact: dict[tuple[int, int], float] = {}
    for j, t1 in enumerate(firsts):
        joint = p1[t1] * torch.softmax(second[j].float(), -1)
        for t2 in (joint >= 1e-4).nonzero().flatten().tolist():
            exact[(t1, t2)] = float(joint[t2])
    counts: Counter = Counter()
    more = 0
    for seed in range(N_SAMPLES):
        config = SessionConfig(
            gamma=4, max_new_tokens=3, temperature=1.0, seed=seed, verification="block"
        )
        run = generate(pair, prompt, config)
        counts[tuple(run.output_ids[:2])] += 1
        more += sum(r.block.kept > r.block.token_wise for r in run.records if r.block)
    assert _chi2_p(counts, exact, N_SAMPLES) > 1e-3
    assert more > 0


def test_a_block_round_survives_the_trace_json_and_a_lesson_link(embedded_pair):
    """The round's block decision round-trips through the trace JSON (trace files), and a
    lesson link with ``verification=block`` replays to the same decisions."""
    import json

    from specdec_core.core.trace_json import from_jsonable, to_jsonable
    from specdec_core.engine.chain.trace import RoundTrace
    from specdec_core.lessons.link import LessonState, decode, encode
    from specdec_core.lessons.replay import replay

    config = SessionConfig(temperature=1.0, seed=3, max_new_tokens=80, verification="block")
    session = SpeculativeSession(embedded_pair, "ROMEO:", config)
    for _ in range(2):
        session.propose()
        session.verify()
        session.commit()
    trace = session.history[-1]
    back = from_jsonable(RoundTrace, json.loads(json.dumps(to_jsonable(trace))))
    assert back.verify.block == trace.verify.block is not None
    assert back.record == trace.record
    state = LessonState(prompt="ROMEO:", temperature=1.0, seed=3, verification="block", round=2)
    state, problems = decode(encode(state), ["embedded"])
    assert problems == []
    again = replay(embedded_pair, state).session
    assert [h.record for h in again.history] == [h.record for h in session.history]
