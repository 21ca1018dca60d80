"""The lossy verification rules in the engine (rules/lossy.py): the accept test
on hand-made rows (a case table with exact values), agreement with the lab's enumeration
(rules/lab/lossy.py), the rule's emitted law against its exact final distribution (Monte
Carlo of verify_lossy), the engine behind the explicit setting only (greedy unchanged, the
chain session = the fast path), SessionConfig's codes, and the speed/TV trade-off."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from specdec_core.bench.lossy_tradeoff import lossy_tradeoff
from specdec_core.core.errors import ConfigError, InputError
from specdec_core.core.sampling import tv_distance
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.rules.lab import lossy as lab
from specdec_core.rules.lossy import (
    LossyRule,
    accept_mask,
    accepts,
    entropy_nats,
    lossy_final_distribution,
    lossy_rule,
    typical_bar,
    verify_lossy,
)

T = torch.tensor


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Batch-1 forwards of a small model: one thread is as fast as two, and on a loaded
    machine two threads spin; the suite's setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"

# (p, rule, accept set, final law for q = Q) — exact values worked by hand
P = [0.6, 0.3, 0.1]
Q = [0.2, 0.5, 0.3]
CASES = [
    # H(P) = 0.898 nats, 0.3·e^−H = 0.1223; bar = min(0.09, 0.1223) = 0.09: all pass → q
    (P, LossyRule("typical", 0.3, 0.09), [1, 1, 1], [0.2, 0.5, 0.3]),
    # ε = 0.2: bar 0.1223, token 2 (0.1) fails: 0.3 of q redrawn from p
    (P, LossyRule("typical", 0.3, 0.2), [1, 1, 0], [0.38, 0.59, 0.03]),
    # δ = 0.5, top-1: only token 0: 0.8 of q redrawn from p
    (P, LossyRule("threshold", 0.5, top_k=1), [1, 0, 0], [0.68, 0.24, 0.08]),
    # δ = 0.5, top-2: tokens 0 and 1 (the top-k clause admits 0.3 < δ)
    (P, LossyRule("threshold", 0.5, top_k=2), [1, 1, 0], [0.38, 0.59, 0.03]),
    # nothing passes (δ = 1, no top-k): every draft redrawn from p → exactly p
    (P, LossyRule("threshold", 1.0, top_k=0), [0, 0, 0], [0.6, 0.3, 0.1]),
    # δ = 0, no top-k: everything with p > 0 passes; p = 0 never does
    ([0.0, 0.7, 0.3], LossyRule("threshold", 0.0, top_k=0), [0, 1, 1], None),
    # a tie for the top-1: the lower id ranks first
    ([0.4, 0.4, 0.2], LossyRule("threshold", 0.9, top_k=1), [1, 0, 0], None),
]


@pytest.mark.parametrize(("p", "rule", "mask", "final"), CASES)
def test_accept_set_and_final_law_case_table(p, rule, mask, final):
    got = accept_mask(T(p, dtype=torch.float64), rule)
    assert got.tolist() == [bool(m) for m in mask]
    for token in range(len(p)):  # the one-token test says what the mask says
        assert accepts(T(p, dtype=torch.float64), token, rule) == bool(mask[token])
    if final is not None:
        law = lossy_final_distribution(T(p, dtype=torch.float64), T(Q, dtype=torch.float64), rule)
        assert law.tolist() == pytest.approx(final, abs=1e-12)
        assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)


def test_typical_bar_and_entropy_values():
    assert entropy_nats(T(P)) == pytest.approx(0.897945, abs=1e-6)
    assert typical_bar(T(P), 0.3, 0.2) == pytest.approx(0.3 * math.exp(-0.897945), abs=1e-6)
    assert typical_bar(T(P), 0.3, 0.09) == pytest.approx(0.09)
    assert entropy_nats(T([1.0, 0.0, 0.0])) == 0.0  # 0·log 0 = 0


def test_engine_rule_agrees_with_the_lab_enumeration():
    """The engine's torch test and the lab's numpy enumeration (H6's rules/lab/lossy.py)
    give the same accept sets and final laws on random rows."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = int(rng.integers(3, 9))
        p = rng.dirichlet(np.full(v, 0.5))
        p[rng.integers(v)] = 0.0 if rng.random() < 0.3 else p[0]
        p /= p.sum()
        q = rng.dirichlet(np.ones(v))
        d, e, k = float(rng.uniform(0, 1)), float(rng.uniform(0.01, 1)), int(rng.integers(0, 4))
        for name in ("typical", "threshold"):
            rule = LossyRule(name, d, e, k)
            mine = accept_mask(T(p), rule).numpy()
            theirs = lab.accept_set(p, name, lab.LossyRules(d, e, k))
            assert (mine == theirs).all(), (p, name, d, e, k)
            assert lossy_final_distribution(T(p), T(q), rule).numpy() == pytest.approx(
                lab.lossy_final(p, q, theirs), abs=1e-12
            )


def test_verify_lossy_emits_its_exact_law_not_p():
    """Monte Carlo of one position: y ~ q, then verify_lossy (γ = 1, the bonus row p
    again): the first emitted token's law is P = q·[S] + (1 − Σ_S q)·p, TV(P, p) = 0.08."""
    p, q = T([0.6, 0.3, 0.1]), T([0.2, 0.5, 0.3])
    rule = LossyRule("threshold", 0.5, top_k=1)
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(3)
    n = 4000
    rows = torch.stack([p, p])
    for _ in range(n):
        y = torch.multinomial(q, 1, generator=gen)
        verdict = verify_lossy(y, rows, gen, rule)
        first = int(y) if verdict.accepted == 1 else verdict.next_token
        counts[first] += 1
        assert verdict.u == () and verdict.accept_probs == ((1.0,) if int(y) == 0 else (0.0,))
    law = lossy_final_distribution(p, q, rule)
    assert float(tv_distance(counts / n, law.float())) < 0.02  # 4000 draws: ≈ 0.006 typical
    assert float(tv_distance(law, p.double())) == pytest.approx(0.08)


def test_verify_lossy_redraws_the_rejected_position_from_p():
    """A rejection draws the next token from p_k with the round's stream: the same call
    as torch.multinomial(p_k) on a generator in the same state."""
    rows = T([[0.05, 0.9, 0.05], [0.2, 0.3, 0.5]])
    rule = LossyRule("threshold", 0.5, top_k=1)
    verdict = verify_lossy(T([0]), rows, torch.Generator().manual_seed(7), rule)
    expected = int(torch.multinomial(rows[0], 1, generator=torch.Generator().manual_seed(7)))
    assert (verdict.accepted, verdict.kind, verdict.next_token) == (0, "correction", expected)
    bonus = verify_lossy(T([1]), rows, torch.Generator().manual_seed(7), rule)
    expected = int(torch.multinomial(rows[1], 1, generator=torch.Generator().manual_seed(7)))
    assert (bonus.accepted, bonus.kind, bonus.next_token) == (1, "bonus", expected)


def test_lossy_rule_from_config_and_json():
    assert lossy_rule(SessionConfig()) is None  # the default is the exact rule
    assert not SessionConfig().lossy
    cfg = SessionConfig(acceptance="threshold", acceptance_delta=0.2, acceptance_top_k=3)
    assert lossy_rule(cfg) == LossyRule("threshold", 0.2, 0.09, 3)
    assert lossy_rule(cfg).to_json() == {
        "rule": "threshold",
        "lossy": True,
        "delta": 0.2,
        "top_k": 3,
    }
    typical = lossy_rule(replace(cfg, acceptance="typical"))
    assert typical.to_json() == {"rule": "typical", "lossy": True, "delta": 0.2, "epsilon": 0.09}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"acceptance": "medusa"}, "acceptance_rule"),
        ({"acceptance": None}, "acceptance_rule"),
        ({"acceptance_delta": -0.1}, "acceptance_delta"),
        ({"acceptance_delta": 1.5}, "acceptance_delta"),
        ({"acceptance_delta": float("nan")}, "acceptance_delta"),
        ({"acceptance_delta": True}, "acceptance_delta"),
        ({"acceptance_epsilon": 0.0}, "acceptance_epsilon"),
        ({"acceptance_epsilon": 1.01}, "acceptance_epsilon"),
        ({"acceptance_top_k": -1}, "acceptance_top_k"),
        ({"acceptance_top_k": 4097}, "acceptance_top_k"),
        ({"acceptance_top_k": 1.5}, "acceptance_top_k"),
    ],
)
def test_config_refuses_bad_acceptance_settings_with_a_code(kwargs, code):
    with pytest.raises(ConfigError) as info:
        SessionConfig(**kwargs).validate(4096)
    assert info.value.code == code


def test_config_accepts_the_edges():
    for kwargs in (
        {"acceptance": "typical", "acceptance_delta": 0.0, "acceptance_epsilon": 1.0},
        {"acceptance": "threshold", "acceptance_delta": 1.0, "acceptance_top_k": 4096},
    ):
        SessionConfig(**kwargs).validate(4096)


def test_greedy_output_is_the_targets_under_every_rule(embedded_pair):
    """At T = 0 both lossy rules accept exactly the argmax: same text as the exact rule."""
    base = SessionConfig(max_new_tokens=12)
    exact = generate(embedded_pair, PROMPT, base).output_ids
    for rule, d in (("typical", 0.3), ("threshold", 0.0), ("threshold", 1.0)):
        cfg = replace(base, acceptance=rule, acceptance_delta=d)
        assert generate(embedded_pair, PROMPT, cfg).output_ids == exact


def test_lossy_rule_runs_in_the_session_and_the_fast_path_alike(embedded_pair):
    """T = 1, seeded: the step machine and the fast path take the same decisions under
    the typical rule, and the rule changes the run (it accepts what the exact rule would
    not, and its checks carry no uniform draw)."""
    cfg = SessionConfig(max_new_tokens=16, temperature=1.0, seed=3, acceptance="typical")
    fast = generate(embedded_pair, PROMPT, cfg)
    session = SpeculativeSession(embedded_pair, PROMPT, cfg)
    while session.phase == "propose":
        session.propose()
        trace = session.verify()
        assert all(c.u is None for c in trace.checks)
        assert {c.accept_prob for c in trace.checks} <= {0.0, 1.0}
        session.commit()
    assert session.generated_ids == fast.output_ids
    exact = generate(embedded_pair, PROMPT, replace(cfg, acceptance="exact"))
    assert exact.output_ids != fast.output_ids


def test_tradeoff_points_on_the_pair(embedded_pair):
    prompts = [PROMPT, "HAMLET:\nTo be, or not to be, that is the question:"]
    points = lossy_tradeoff(embedded_pair, "typical", [0.05, 1.0], prompts, seeds=1, tokens=8)
    assert [(p.rule, p.delta) for p in points] == [("exact", None), ("typical", 0.05)] + [
        ("typical", 1.0)
    ]
    assert points[0].tv_first_mean == 0.0 and points[0].speedup == 1.0
    for p in points:
        assert 0.0 <= p.acceptance_rate <= 1.0 and 1.0 <= p.tokens_per_round <= 5.0
    # δ = 0.05 passes more than δ = 1 (bar min(ε, δ e^−H)): higher acceptance
    assert points[1].acceptance_rate >= points[2].acceptance_rate
    assert 0.0 < points[1].tv_first_mean <= points[1].tv_first_max < 1.0


@pytest.mark.parametrize(
    ("rule", "deltas", "temperature", "code"),
    [
        ("exact", [0.3], 1.0, "acceptance_not_lossy"),
        ("medusa", [0.3], 1.0, "acceptance_rule"),
        ("typical", [1.3], 1.0, "acceptance_delta"),
        ("typical", [0.3], 0.0, "needs_temperature"),
        ("typical", [0.1] * 13, 1.0, "bad_value"),
    ],
)
def test_tradeoff_refuses_bad_input(embedded_pair, rule, deltas, temperature, code):
    with pytest.raises((ConfigError, InputError)) as info:
        lossy_tradeoff(embedded_pair, rule, deltas, [PROMPT], temperature=temperature)
    assert info.value.code == code
