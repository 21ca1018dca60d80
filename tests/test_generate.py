"""The fast path agrees with the step machine and the target alone."""

from __future__ import annotations

import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.model import early_exit_model
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession

PROMPT = "First Citizen:\nWe are"


@pytest.mark.parametrize("gamma", [1, 4])
@pytest.mark.parametrize("pair_name", ["tiny_pair", "self_pair"])
def test_fast_greedy_equals_autoregressive(request, pair_name, gamma):
    tiny_pair = request.getfixturevalue(pair_name)
    config = SessionConfig(gamma=gamma, max_new_tokens=30)
    spec = generate(tiny_pair, PROMPT, config, "speculative")
    ar = generate(tiny_pair, PROMPT, config, "autoregressive")
    assert spec.output_ids == ar.output_ids
    assert spec.stop_reason == ar.stop_reason
    s = spec.stats
    assert s.target_forwards == s.rounds <= ar.stats.target_forwards == len(ar.output_ids)
    if pair_name == "self_pair":  # draft == target: every draft accepted
        assert s.rounds == -(-30 // (gamma + 1)) and s.acceptance_rate == 1.0
    assert sum(s.accepted_histogram) == s.rounds
    advanced = sum((n + 1) * c for n, c in enumerate(s.accepted_histogram))
    assert advanced >= len(spec.output_ids)  # a stop may cut the last round short
    assert s.mean_accepted == pytest.approx(
        sum(n * c for n, c in enumerate(s.accepted_histogram)) / s.rounds
    )
    assert 0.0 <= s.acceptance_rate <= 1.0 and len(s.per_position_acceptance) == gamma
    assert s.tokens_per_s > 0 and s.draft_ms > 0 and s.verify_ms > 0


def test_fast_path_replays_session_for_same_seed(tiny_pair):
    """Same seed, same draw order: the fast path and the step machine agree token for
    token even when sampling (temperature 0.8, top-k 40, top-p 0.95)."""
    config = SessionConfig(
        gamma=3, temperature=0.8, top_k=40, top_p=0.95, seed=4, max_new_tokens=25
    )
    fast = generate(tiny_pair, PROMPT, config)
    session = SpeculativeSession(tiny_pair, PROMPT, config)
    session.run()
    assert fast.output_ids == session.generated_ids
    checked = [
        c for r in session.history for c in r.verify.checks if c.status in ("accepted", "rejected")
    ]
    assert fast.stats.acceptance_rate == pytest.approx(
        sum(c.overlap for c in checked) / len(checked), abs=1e-6
    )
    assert fast.stats.rounds == len(session.history)


def test_ngram_lookup_proposes_planted_repeat():
    drafter = NgramDrafter(vocab_size=100, max_n=3)
    context = [1, 2, 3, 4, 5, 6, 7, 9, 2, 3, 4]
    assert drafter.lookup(context, 3) == [5, 6, 7]
    assert drafter.lookup([1, 2, 3, 8], 4) == []  # no earlier occurrence: nothing proposed
    draft = drafter.propose(context, 2, SessionConfig().sampling, "greedy", None)
    assert draft.ids.tolist() == [5, 6] and draft.probs[0, 5] == 1.0 and draft.forwards == 0


@pytest.mark.parametrize("drafter_name", ["ngram", "early-exit"])
def test_other_drafters_are_lossless_in_greedy(tiny_pair, drafter_name):
    config = SessionConfig(gamma=3, max_new_tokens=25)
    ar = generate(tiny_pair, PROMPT, config, "autoregressive")
    spec = generate(tiny_pair, PROMPT, config, drafter=make_named_drafter(tiny_pair, drafter_name))
    assert spec.output_ids == ar.output_ids


def test_early_exit_with_all_layers_accepts_everything(tiny_pair):
    layers = tiny_pair.target.config.n_layer
    drafter = make_named_drafter(tiny_pair, "early-exit", layers)
    spec = generate(tiny_pair, PROMPT, SessionConfig(gamma=4, max_new_tokens=20), drafter=drafter)
    assert spec.stats.mean_accepted == 4.0 and spec.stats.acceptance_rate == 1.0
    # the shared target was not modified
    assert (
        tiny_pair.target.config.n_layer == layers and len(tiny_pair.target.transformer.h) == layers
    )
    shallow = early_exit_model(tiny_pair.target, 1)
    assert shallow.transformer.h[0] is tiny_pair.target.transformer.h[0]
    with pytest.raises(ValueError, match="between 1 and"):
        early_exit_model(tiny_pair.target, layers + 1)


@pytest.mark.parametrize("drafter_name", ["model", "ngram"])
def test_timeline_bars_sum_to_the_wall_time(tiny_pair, drafter_name):
    from specdec_core.bench.runs import ignoring_eos

    pair = ignoring_eos(tiny_pair)
    config = SessionConfig(gamma=3, max_new_tokens=20)
    plain = generate(
        pair, "ab ab ab ab", config, "speculative", make_named_drafter(pair, drafter_name)
    )
    assert plain.timeline is None  # only kept when asked for
    runs = {
        "speculative": generate(
            pair,
            "ab ab ab ab",
            config,
            "speculative",
            make_named_drafter(pair, drafter_name),
            trace_timeline=True,
        ),
        "autoregressive": generate(
            pair, "ab ab ab ab", config, "autoregressive", trace_timeline=True
        ),
    }
    assert runs["speculative"].output_ids == plain.output_ids  # tracing changes nothing
    for mode, run in runs.items():
        tl, st = run.timeline, run.stats
        assert tl is not None and tl.mode == mode and tl.total_ms == st.total_ms
        # the bars are exactly the forwards the run timed; the rest is the overhead
        assert tl.forward_ms == pytest.approx(st.target_forward_ms + st.draft_forward_ms)
        assert tl.overhead_ms == pytest.approx(st.overhead_ms, abs=1e-6)
        assert tl.forward_ms + tl.overhead_ms == pytest.approx(st.total_ms)
        ends = [0.0] + [s.end_ms for s in tl.forwards]
        for prev_end, span in zip(ends, tl.forwards, strict=False):
            assert prev_end <= span.start_ms + 1e-6 and span.ms >= 0  # one after another
        assert tl.forwards[-1].end_ms <= st.total_ms
        assert sum(r.committed for r in tl.rounds) == st.new_tokens == 20
        kinds = [s.kind for s in tl.forwards]
        if mode == "autoregressive":
            assert kinds == ["target"] * 20 and len(tl.rounds) == 20
            continue
        assert kinds.count("verify") == st.rounds == len(tl.rounds)
        assert kinds.count("draft") == st.draft_forwards
        assert [r.drafted for r in tl.rounds] == [len(r.drafted) for r in run.records]
        for span in tl.forwards:  # every forward lies inside its round
            r = tl.rounds[span.round]
            assert r.start_ms - 1e-6 <= span.start_ms and span.end_ms <= r.end_ms + 1e-6
