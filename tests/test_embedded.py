"""The shipped embedded pair: loads offline, shared tokenizer, target better than draft,
greedy speculative output equals the target's own greedy output."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import CORPUS
from transformers import AutoTokenizer

from specdec_core.core.models import EMBEDDED_DIR
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession


def test_files_are_safetensors_and_small():
    total = 0
    for part in ("target", "draft"):
        folder = EMBEDDED_DIR / part
        assert (folder / "model.safetensors").is_file()
        assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
        total += sum(f.stat().st_size for f in folder.iterdir())
    assert total <= 30 * 2**20


def test_loads_offline_with_shared_tokenizer(embedded_pair):
    pair = embedded_pair
    assert pair.vocab_size == 4096 and pair.context_length == 256
    assert pair.eos_token_id == pair.tokenizer.convert_tokens_to_ids("<|endoftext|>") == 0
    draft_tok = AutoTokenizer.from_pretrained(EMBEDDED_DIR / "draft", local_files_only=True)
    assert draft_tok.get_vocab() == pair.tokenizer.get_vocab()
    line = "ROMEO:\nBut soft, what light through yonder window breaks?"
    ids = pair.tokenizer.encode(line)
    assert pair.tokenizer.decode(ids) == line and len(ids) < len(line)
    assert next(pair.target.parameters()).dtype == torch.float32
    report = json.loads((EMBEDDED_DIR / "training_report.json").read_text())
    assert report["vocab_size"] == 4096 and report["seed"] == 0


@torch.inference_mode()
def _ppl(model, ids: list[int]) -> float:
    chunk = torch.tensor([ids])
    logits = model(input_ids=chunk[:, :-1]).logits[0]
    return math.exp(torch.nn.functional.cross_entropy(logits, chunk[0, 1:]).item())


def test_target_perplexity_below_draft_on_heldout(embedded_pair):
    text = CORPUS.read_text(encoding="utf-8")[-20000:]  # inside the held-out last 10 %
    ids = []  # as in training: speeches separated by the end-of-text token
    for speech in text.split("\n\n")[1:]:
        ids += embedded_pair.tokenizer.encode(speech) + [embedded_pair.eos_token_id]
    windows = [ids[i : i + 256] for i in range(0, 256 * 8, 256)]
    target = sum(_ppl(embedded_pair.target, w) for w in windows) / len(windows)
    draft = sum(_ppl(embedded_pair.draft, w) for w in windows) / len(windows)
    assert 20 < target < draft < 300


PROMPTS = ["ROMEO:\n", "First Citizen:\nWe are accounted poor citizens", "KING HENRY VI:\n"]


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_speculative_equals_target_greedy(embedded_pair, gamma):
    pair = embedded_pair
    accepted: list[int] = []
    for prompt in PROMPTS:
        session = SpeculativeSession(pair, prompt, SessionConfig(gamma=gamma, max_new_tokens=60))
        session.run()
        ids = torch.tensor([pair.tokenizer.encode(prompt)])
        n = len(session.generated_ids)
        want = pair.target.generate(
            ids,
            do_sample=False,
            max_new_tokens=n,
            pad_token_id=0,
            attention_mask=torch.ones_like(ids),
        )[0, ids.shape[1] :]
        assert session.generated_ids == want.tolist(), prompt
        accepted += [r.verify.accepted for r in session.history if r.propose.gamma == gamma]
    assert 0 in accepted and gamma in accepted  # rounds with none and with all accepted


@pytest.mark.parametrize(
    ("pair_fixture", "prompt"),
    [("embedded_pair", "ROMEO:\nBut soft, what light"), ("zh_pair", "床前明月光，疑是")],
)
def test_chi_square_on_real_rows_with_temperature_top_k_top_p(request, pair_fixture, prompt):
    """Real model rows at T = 0.7, top-k 20, top-p 0.9, on each shipped pair: the emitted
    token follows p (χ²), and no token outside the target's kept set ever appears."""
    from scipy.stats import chisquare

    from specdec_core.core.sampling import SamplingConfig, logits_to_probs
    from specdec_core.rules.acceptance import verify_sampling

    pair = request.getfixturevalue(pair_fixture)
    sampling = SamplingConfig(temperature=0.7, top_k=20, top_p=0.9)
    ids = torch.tensor([pair.tokenizer.encode(prompt)])
    with torch.inference_mode():
        p = logits_to_probs(pair.target(input_ids=ids).logits[0, -1], sampling)
        q = logits_to_probs(pair.draft(input_ids=ids).logits[0, -1], sampling)
    kept = p > 0
    assert 1 < int(kept.sum()) <= 20 and torch.minimum(p, q).sum() < 0.99  # a real test
    gen = torch.Generator().manual_seed(0)
    n = 20000
    drafts = torch.multinomial(q, n, replacement=True, generator=gen)
    counts = torch.zeros_like(p)
    for y in drafts.tolist():
        v = verify_sampling(torch.tensor([y]), q[None], torch.stack([p, p]), gen)
        counts[y if v.accepted else v.next_token] += 1
    assert counts[~kept].sum() == 0
    expected = p[kept].double() / p[kept].double().sum() * n
    result = chisquare(counts[kept].double().numpy(), expected.numpy())
    assert result.pvalue > 1e-3
