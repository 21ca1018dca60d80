"""Greedy verification keeps a T = 1 slice of the target's logits (context for the chart,
never used by the rule); the exact acceptance preview before Verify; old trace JSON
without the new field still loads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import from_jsonable, to_jsonable
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.chain.trace import VerifyTrace
from specdec_core.ui.figures.step import distribution_option

LABELS = {
    k: k
    for k in (
        "p",
        "q",
        "min",
        "excess",
        "other",
        "probability",
        "token",
        "marked",
        "correction",
        "context",
    )
}


def _session(pair, **cfg) -> SpeculativeSession:
    ids = pair.tokenizer.encode("ROMEO:\nBut soft")
    return SpeculativeSession(pair, ids, SessionConfig(gamma=3, **cfg))


def test_greedy_verify_has_t1_context_and_sampling_has_none(embedded_pair):
    s = _session(embedded_pair)
    s.propose()
    v = s.verify()
    assert v.greedy and len(v.context_dists) == len(v.checks) + 1
    for c, ctx in zip(v.checks, v.context_dists, strict=False):
        assert c.dist.p is not None and set(np.unique(c.dist.p)) <= {0.0, 1.0}  # one-hot
        assert ctx.q is None and 0 < float(ctx.p.max()) < 1  # a real distribution
        # the argmax of the T = 1 row is the greedy argmax
        assert int(ctx.token_ids[int(np.argmax(ctx.p))]) == c.target_argmax.id
    option = distribution_option(
        v.checks[0].dist, LABELS, "t", v.checks[0].token.id, context=v.context_dists[0]
    )
    rows = option["dataset"]["source"]
    assert len(rows) > 2  # the context brings its top tokens onto the axis
    # the faint T = 1 bars come first; the T = 1 argmax (the greedy argmax) is drawn at
    # its real probability
    assert option["series"][0]["name"] == "context"
    ctx_col = option["dataset"]["dimensions"].index("context")
    assert max(r[ctx_col] for r in rows) == pytest.approx(float(v.context_dists[0].p.max()))
    back = from_jsonable(VerifyTrace, to_jsonable(v))
    assert len(back.context_dists) == len(v.context_dists)

    t = _session(embedded_pair, temperature=1.0)
    t.propose()
    assert t.verify().context_dists == ()


def test_old_trace_json_without_context_still_loads(embedded_pair):
    s = _session(embedded_pair, temperature=1.0)
    s.propose()
    data = to_jsonable(s.verify())
    del data["context_dists"]
    assert from_jsonable(VerifyTrace, data).context_dists == ()
    assert {f.name for f in dataclasses.fields(VerifyTrace)} >= {"context_dists"}


def test_accept_preview_is_the_verified_acceptance_probability(embedded_pair):
    s = _session(embedded_pair, temperature=1.0, seed=3)
    s.propose()
    s.steps.make_position_wrong(1)
    preview = s.steps.accept_preview()
    v = s.verify()
    assert preview[0] == pytest.approx(v.checks[0].accept_prob, rel=1e-4, abs=1e-6)
    assert preview[0] == pytest.approx(v.checks[0].p, rel=1e-4, abs=1e-6)  # q one-hot
