"""The drafters' reduced vocabulary (``drafters/draft_vocab.py``, FR-Spec): the shipped
ranking files, the subset's rows and logits, ``q`` zero outside the subset and still
lossless (the residual commits tokens outside it: χ² on real rows), greedy output equal to
the target alone's for every lane, and the full head under a grammar."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare

from specdec_core.core.kvcache import ModelCache
from specdec_core.core.penalties import apply_penalties
from specdec_core.core.sampling import SamplingConfig, logits_to_probs
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.draft_vocab import ENV, DraftVocab, draft_vocab_for, read_vocab_file
from specdec_core.drafters.eagle import EagleDrafter, make_eagle_drafter
from specdec_core.drafters.model import ModelDrafter, make_model_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.rules.acceptance import residual_distribution, verify_sampling
from specdec_core.training.draft_vocab import coverage, ranking

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MAKERS = {"model": make_model_drafter, "eagle": make_eagle_drafter}


def test_ranking_most_frequent_first_ties_by_id():
    ids = torch.tensor([3, 1, 3, 2, 1, 3, 0])  # counts: 3 → 3, 1 → 2, then 0 and 2 once
    assert ranking(ids, 5) == [3, 1, 0, 2, 4]
    assert coverage(ids, [3, 1, 0, 2, 4], 2) == pytest.approx(5 / 7)


@pytest.mark.parametrize(
    ("pair_fixture", "n", "top_n"),
    [
        ("embedded_pair", 1024, {"model": 1024, "eagle": 1024, "eagle_sampled": 2048}),
        ("zh_pair", 2048, {"model": 2048, "eagle": 2048}),
    ],
)
def test_the_shipped_file_is_a_ranking_of_the_whole_vocabulary(request, pair_fixture, n, top_n):
    """The N chosen by ``benchmarks/draft_vocab.py`` and EAGLE's sampled one by
    ``benchmarks/eagle_head_size.py`` (the pair's model card)."""
    pair = request.getfixturevalue(pair_fixture)
    raw = read_vocab_file(pair)
    assert raw is not None and sorted(raw["ranking"]) == list(range(pair.vocab_size))
    assert raw["top_n"] == top_n
    assert 0.82 < raw["coverage"][str(n)]["heldout"] < raw["coverage"][str(n)]["train"] + 0.01
    for drafter in ("model", "eagle"):
        vocab = draft_vocab_for(pair, drafter)
        assert vocab is not None and vocab.size == n
        assert list(vocab.id_list) == sorted(raw["ranking"][:n])


def test_subset_rows_and_widened_logits():
    vocab = DraftVocab.of([4, 0, 2, 1, 3], 3, 5)  # the top 3: ids 0, 2, 4 (ascending)
    assert vocab.id_list == (0, 2, 4)
    weight = torch.arange(10.0).view(5, 2)
    assert torch.equal(vocab.columns(weight), weight[[0, 2, 4]].t())
    wide = vocab.expand(torch.tensor([[1.0, 2.0, 3.0]]))
    assert wide.tolist() == [[1.0, float("-inf"), 2.0, float("-inf"), 3.0]]
    with pytest.raises(ValueError):
        DraftVocab.of([0, 1], 3, 5)
    with pytest.raises(ValueError):
        DraftVocab.of([0, 0, 1], 2, 5)


def test_no_file_or_full_means_the_full_head(tiny_pair, embedded_pair, monkeypatch):
    assert draft_vocab_for(tiny_pair, "model") is None
    assert make_model_drafter(tiny_pair).vocab is None
    assert draft_vocab_for(embedded_pair, "model", 0) is None
    monkeypatch.setenv(ENV, "full")
    assert make_model_drafter(embedded_pair).vocab is None
    assert make_eagle_drafter(embedded_pair).vocab is None
    assert make_model_drafter(embedded_pair, 512).vocab.size == 512  # explicit N wins


def test_reduced_head_logits_are_the_full_heads_at_the_subset(embedded_pair):
    vocab = draft_vocab_for(embedded_pair, "model")
    ids = embedded_pair.tokenizer.encode("ROMEO:\nBut soft, what light")
    full, reduced = (
        ModelCache(embedded_pair.draft),
        make_model_drafter(embedded_pair, int8=False).kv,
    )
    torch.testing.assert_close(
        reduced.extend(ids), full.extend(ids)[:, vocab.ids], atol=1e-5, rtol=0
    )
    eagle, plain = make_eagle_drafter(embedded_pair), make_eagle_drafter(embedded_pair, 0)
    feature = torch.randn(embedded_pair.target.config.n_embd)
    torch.testing.assert_close(eagle._logits(feature), plain._logits(feature)[vocab.ids])


def _proposal(pair, name: str, prompt: str, temperature: float, processors=None):
    drafter = MAKERS[name](pair)
    target = ModelCache(pair.target)
    drafter.attach(target)
    ids = pair.tokenizer.encode(prompt)
    gen = torch.Generator().manual_seed(0)
    sampling = SamplingConfig(temperature=temperature)
    return drafter, drafter.propose(ids, 3, sampling, "probabilistic", gen, processors)


@pytest.mark.parametrize("name", ["model", "eagle"])
def test_q_is_zero_outside_the_subset(embedded_pair, name):
    drafter, draft = _proposal(embedded_pair, name, "ROMEO:\nBut soft, what light", 1.0)
    vocab = _sampled_vocab(drafter)
    outside = torch.ones(embedded_pair.vocab_size, dtype=torch.bool)
    outside[vocab.ids] = False
    assert draft.probs.shape == (3, embedded_pair.vocab_size)
    assert draft.probs[:, outside].sum() == 0
    torch.testing.assert_close(draft.probs.sum(-1), torch.ones(3))
    assert all(t in vocab.id_list for t in draft.ids.tolist())


def _sampled_vocab(drafter):
    """The subset a sampled proposal drafts on (EAGLE's own at T > 0)."""
    return getattr(drafter, "sampled_vocab", drafter.vocab)


def _head_widths(drafter, monkeypatch) -> list[int]:
    """The widths of the LM head rows EAGLE computes from now on (``N`` or ``V``)."""
    widths, head_mm = [], drafter._head_mm
    monkeypatch.setattr(
        drafter, "_head_mm", lambda f: widths.append(head_mm(f).shape[-1]) or head_mm(f)
    )
    return widths


@pytest.mark.parametrize(
    ("pair_fixture", "greedy", "sampled"), [("embedded_pair", 1024, 2048), ("zh_pair", 2048, 2048)]
)
def test_eagle_drafts_on_a_head_per_temperature(request, pair_fixture, greedy, sampled):
    """The file's ``eagle`` ``N`` greedy, its ``eagle_sampled`` one at T > 0 (the pair's
    ``eagle`` when it has none); an explicit ``N`` (``0``: the full head) is both."""
    pair = request.getfixturevalue(pair_fixture)
    drafter = make_eagle_drafter(pair)
    assert (drafter.vocab.size, drafter.sampled_vocab.size) == (greedy, sampled)
    assert draft_vocab_for(pair, "model", sampled=True).size == draft_vocab_for(pair, "model").size
    assert make_eagle_drafter(pair, 512).sampled_vocab.size == 512
    full = make_eagle_drafter(pair, 0)
    assert full.vocab is None and full.sampled_vocab is None


def test_eagle_greedy_and_sampled_proposals_run_their_own_head(embedded_pair, monkeypatch):
    """Greedy proposals (``propose`` at T = 0 and ``propose_argmax``) compute 1,024 rows,
    sampled ones 2,048 (``q`` zero outside those, and nonzero outside the greedy 1,024),
    and the greedy head is back after a sampled proposal."""
    drafter, _ = _proposal(embedded_pair, "eagle", "ROMEO:\nBut soft, what light", 0.0)
    widths = _head_widths(drafter, monkeypatch)
    ids = embedded_pair.tokenizer.encode("ROMEO:\nBut soft, what light")
    gen = torch.Generator().manual_seed(0)
    greedy = drafter.propose(ids, 3, SamplingConfig(temperature=0.0), "probabilistic", gen)
    drafter.propose_argmax(ids, 3)
    assert (
        widths
        and set(widths) == {1024}
        and greedy.ids.tolist() == drafter.propose_argmax(ids, 3)[0]
    )
    widths.clear()
    sampled = drafter.propose(ids, 3, SamplingConfig(temperature=1.0), "probabilistic", gen)
    assert widths and set(widths) == {2048}
    outside = torch.ones(embedded_pair.vocab_size, dtype=torch.bool)
    outside[drafter.sampled_vocab.ids] = False
    assert sampled.probs[:, outside].sum() == 0
    outside[drafter.sampled_vocab.ids] = True
    outside[drafter.vocab.ids] = False
    assert sampled.probs[:, outside].sum() > 0.01
    assert drafter.head_vocab() is drafter.vocab


def test_eagle_sampled_on_the_full_head_has_full_rows(embedded_pair, monkeypatch):
    """A drafter whose sampled head is the full one: ``[V]`` rows at T = 1 (``q`` nonzero
    outside the greedy subset), the greedy subset at T = 0."""
    reduced = make_eagle_drafter(embedded_pair)
    drafter = EagleDrafter(reduced.head, embedded_pair.target, reduced.vocab, reduced.int8, None)
    drafter.attach(ModelCache(embedded_pair.target))
    widths = _head_widths(drafter, monkeypatch)
    ids = embedded_pair.tokenizer.encode("ROMEO:\nBut soft, what light")
    gen = torch.Generator().manual_seed(0)
    sampled = drafter.propose(ids, 3, SamplingConfig(temperature=1.0), "probabilistic", gen)
    assert set(widths) == {embedded_pair.vocab_size}
    outside = torch.ones(embedded_pair.vocab_size, dtype=torch.bool)
    outside[drafter.vocab.ids] = False
    assert (sampled.probs[:, outside] > 0).sum(-1).min() > 2048
    widths.clear()
    drafter.propose_argmax(ids, 3)
    assert set(widths) == {1024}


@pytest.mark.parametrize("name", ["model", "eagle"])
def test_a_grammar_runs_the_full_head(embedded_pair, name):
    """A mask that allows one token outside the subset: the proposal computes every row
    (the drafts are that token, ``q`` one-hot on it), and the reduced head is back after."""
    allowed = max(
        set(range(embedded_pair.vocab_size)) - set(draft_vocab_for(embedded_pair, name).id_list)
    )

    def row(logits, prefix):
        assert logits.shape == (embedded_pair.vocab_size,) and torch.isfinite(logits).all()
        return torch.full_like(logits, float("-inf")).index_fill_(0, torch.tensor([allowed]), 0.0)

    fake = SimpleNamespace(active=True, grammar=object(), row=row)
    drafter, draft = _proposal(embedded_pair, name, "ROMEO:\nBut soft", 1.0, fake)
    assert draft.ids.tolist() == [allowed] * 3 and draft.probs[:, allowed].tolist() == [1.0] * 3
    assert drafter.head_vocab() is drafter.vocab is not None


@pytest.mark.parametrize(
    ("pair_fixture", "prompt", "name"),
    [
        ("embedded_pair", "KING HENRY:\nMy lord of", "model"),
        ("embedded_pair", "KING HENRY:\nMy lord of", "eagle"),
        ("zh_pair", "床前明月光，疑是", "model"),
    ],
)
def test_the_residual_commits_tokens_outside_the_subset_and_the_output_follows_p(
    request, pair_fixture, prompt, name
):
    """Real rows at T = 1: ``q`` (the reduced drafter's) is zero outside its subset, ``p``
    is not; the exact law min(p, q) + (1 − Σ min) r equals p, and 20,000 verified draws
    follow p (χ², the tokens with ≥ 20 expected draws one bin each, the rest of the
    subset and everything outside it pooled), tokens outside the subset included."""
    pair = request.getfixturevalue(pair_fixture)
    drafter, draft = _proposal(pair, name, prompt, 1.0)
    q = draft.probs[0].double()
    ids = torch.tensor([pair.tokenizer.encode(prompt)])
    with torch.inference_mode():
        p = logits_to_probs(pair.target(input_ids=ids).logits[0, -1], SamplingConfig(1.0))
    p = p.double()
    inside = torch.zeros(pair.vocab_size, dtype=torch.bool)
    inside[_sampled_vocab(drafter).ids] = True
    assert q[~inside].sum() == 0 and p[~inside].sum() > 0.02  # a real test
    exact = torch.minimum(p, q) + (1 - torch.minimum(p, q).sum()) * residual_distribution(p, q)
    torch.testing.assert_close(exact, p, atol=1e-8, rtol=0)
    n, gen = 20000, torch.Generator().manual_seed(0)
    counts = torch.zeros(pair.vocab_size, dtype=torch.float64)
    rows_q, rows_p = q.float()[None], torch.stack([p, p]).float()
    for y in torch.multinomial(q.float(), n, replacement=True, generator=gen).tolist():
        v = verify_sampling(torch.tensor([y]), rows_q, rows_p, gen)
        counts[y if v.accepted else v.next_token] += 1
    assert counts[~inside].sum() > 0.8 * n * float(p[~inside].sum())
    big = p * n >= 20
    bins = [big, inside & ~big, ~inside & ~big]
    observed = counts[big].tolist() + [float(counts[b].sum()) for b in bins[1:]]
    expected = (p[big] * n).tolist() + [float(p[b].sum()) * n for b in bins[1:]]
    expected = [e * n / sum(expected) for e in expected]  # p's float rounding
    assert chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.parametrize("pair_fixture", ["embedded_pair", "zh_pair"])
def test_greedy_output_equals_the_target_alone_for_every_reduced_lane(request, pair_fixture):
    pair = request.getfixturevalue(pair_fixture)
    prompt = "ROMEO:\nBut soft" if pair_fixture == "embedded_pair" else "床前明月光，"
    config = SessionConfig(gamma=4, max_new_tokens=24)
    alone = generate(pair, prompt, config, "autoregressive").output_ids
    for name, make in MAKERS.items():
        assert make(pair).vocab is not None
        for gamma in (1, 3, 4):
            run = generate(
                pair,
                prompt,
                SessionConfig(gamma=gamma, max_new_tokens=24),
                "speculative",
                make(pair),
            )
            assert run.output_ids == alone, (name, gamma)
        tree = generate_tree(pair, prompt, config, (2, 2, 1, 1), drafter=name)
        assert tree.output_ids == alone, name
    assert isinstance(make_model_drafter(pair), ModelDrafter)


def test_a_no_repeat_ban_that_covers_the_subset_runs_the_full_head(embedded_pair):
    """``no_repeat_ngram_size = 1`` bans every id of the prefix: on a prompt holding all of
    a 4-id subset, the reduced head would leave ``q`` nothing to draw (NaN). The proposal
    runs the full head there, so chain and tree runs equal the full-head drafter's, draw
    for draw; the shipped ``N`` (larger than any prefix of this context) keeps its subset."""
    pair = embedded_pair
    small = make_model_drafter(pair, 4)
    ids = pair.tokenizer.encode(pair.tokenizer.decode(list(small.vocab.id_list)))
    assert set(small.vocab.id_list) <= set(ids)
    config = SessionConfig(gamma=3, max_new_tokens=6, temperature=1.0, no_repeat_ngram_size=1)
    full = generate(pair, ids, config, "speculative", make_model_drafter(pair, 0)).output_ids
    assert generate(pair, ids, config, "speculative", small).output_ids == full
    tree = generate_tree(pair, ids, config, (2, 1), drafter=make_model_drafter(pair, 0))
    assert generate_tree(pair, ids, config, (2, 1), drafter=small).output_ids == tree.output_ids
    procs = SimpleNamespace(grammar=None, penalties=config.penalties)
    shipped = make_model_drafter(pair)
    with small.full_head_for(procs, ids, 3), shipped.full_head_for(procs, ids, 3):
        assert small.head_vocab() is None and shipped.head_vocab() is shipped.vocab
    assert small.head_vocab() is small.vocab


@pytest.mark.parametrize("shape", [None, (2, 2)])
def test_runs_follow_p_when_most_of_its_mass_is_outside_the_subset(embedded_pair, shape):
    """End to end through the engine (chain, and a tree): a 64-id subset holds about half
    of the target's first-token mass under a repetition penalty on the prompt's ids (two
    outside the subset) and top-k 50 (applied over the subset's 64 ids in ``q``, over
    ``V`` in ``p``). The first committed token of 300 seeded runs follows the processed
    target row ``p`` (χ², p > 1e-3), and not the drafter's ``q``. (300 runs do not tell
    a ``q`` mis-recorded by a small tempering apart; the rows' test above is the fine
    one.)"""
    pair, prompt = embedded_pair, "KING:\nWe"
    config = SessionConfig(
        gamma=3, temperature=1.0, top_k=50, max_new_tokens=2, repetition_penalty=1.5
    )
    ids = pair.tokenizer.encode(prompt)
    with torch.inference_mode():
        logits = pair.target(input_ids=torch.tensor([ids])).logits[0, -1]
    p = logits_to_probs(apply_penalties(logits, ids, len(ids), config.penalties), config.sampling)
    drafter = make_model_drafter(pair, 64)
    inside = torch.zeros(pair.vocab_size, dtype=torch.bool)
    inside[drafter.vocab.ids] = True
    assert set(ids) - set(drafter.vocab.id_list) and 0.4 < float(p[~inside].sum()) < 0.6
    q = drafter.propose(ids, 1, config.sampling, "probabilistic", torch.Generator()).probs[0]
    n, counts = 300, torch.zeros(pair.vocab_size, dtype=torch.float64)
    for seed in range(n):
        run_config = replace(config, seed=seed)
        made = make_model_drafter(pair, 64)
        if shape is None:
            run = generate(pair, prompt, run_config, "speculative", made)
        else:
            run = generate_tree(pair, prompt, run_config, shape, drafter=made)
        counts[run.output_ids[0]] += 1

    def pvalue(law: torch.Tensor) -> float:
        big = law * n >= 5
        observed = counts[big].tolist() + [float(counts[~big].sum())]
        expected = (law[big] * n).tolist() + [float(law[~big].sum()) * n]
        if expected[-1] < 1e-9:  # nothing pooled: the rest must be empty too
            observed, expected = observed[:-1], expected[:-1]
        expected = [e * n / sum(expected) for e in expected]
        return float(chisquare(observed, expected).pvalue)

    assert pvalue(p.double()) > 1e-3
    assert pvalue(q.double()) < 1e-6
