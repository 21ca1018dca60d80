"""Rank a pair's token ids by frequency in its own training text: the file a drafter's
reduced vocabulary is cut from (FR-Spec, Zhao et al. 2025; EAGLE-3's draft vocabulary).

    python -m specdec_core.training.draft_vocab [--pair embedded|embedded-zh]
        [--model-top-n N] [--eagle-top-n N]

Training-free: the ranking is the count of each id in the training part of the corpus
(the first 90 % of the token stream, :func:`~specdec_core.training.loop.corpus_split`),
most frequent first, ties by id. Writes ``draft_vocab.json`` beside the pair's models
(``assets/models/<pair>/``): the ranking, each drafter's ``N`` (chosen by
``benchmarks/draft_vocab.py``) and the share of the training and held-out tokens the top
``N`` cover. Deterministic: the same corpus and tokenizer give the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

from specdec_core.drafters.draft_vocab import FILE_NAME, KIND
from specdec_core.training.corpus import CORPORA, REPO_ROOT
from specdec_core.training.loop import corpus_split

#: The ``N`` each drafter uses unless told (measured: ``benchmarks/draft_vocab.py``;
#: EAGLE's sampled ``N``: ``benchmarks/eagle_head_size.py``).
DEFAULT_TOP_N = {"model": 1024, "eagle": 1024, "eagle_sampled": 2048}
COVERAGE_AT = (256, 512, 1024, 2048)


def ranking(train_ids: torch.Tensor, vocab_size: int) -> list[int]:
    """``[V]`` token ids, most frequent in ``train_ids`` first, ties broken by lower id."""
    counts = torch.bincount(train_ids, minlength=vocab_size)[:vocab_size]
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))
    return order


def coverage(ids: torch.Tensor, ranked: list[int], n: int) -> float:
    """Share of the tokens in ``ids`` whose id is among ``ranked[:n]``."""
    keep = torch.zeros(len(ranked), dtype=torch.bool)
    keep[ranked[:n]] = True
    return float(keep[ids].float().mean())


def build(pair: str, top_n: dict[str, int]) -> dict:
    """The file's content for ``pair`` (a key of :data:`CORPORA`)."""
    corpus = CORPORA[pair]
    folder = REPO_ROOT / "assets" / "models" / pair
    train_ids, val_ids = corpus_split(corpus.path, folder / "target")
    vocab = json.loads((folder / "target" / "config.json").read_text())["vocab_size"]
    ranked = ranking(train_ids, vocab)
    return {
        "kind": KIND,
        "pair": pair,
        "corpus": str(corpus.path.relative_to(REPO_ROOT)),
        "corpus_sha256": hashlib.sha256(corpus.path.read_bytes()).hexdigest(),
        "counted": f"the training split: the first {len(train_ids)} tokens (90 %)",
        "vocab_size": vocab,
        "top_n": top_n,
        "coverage": {
            str(n): {
                "train": round(coverage(train_ids, ranked, n), 4),
                "heldout": round(coverage(val_ids, ranked, n), 4),
            }
            for n in sorted({*COVERAGE_AT, *top_n.values()})
        },
        "ranking": ranked,
    }


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pair", default="embedded", choices=sorted(CORPORA))
    parser.add_argument("--model-top-n", type=int, default=DEFAULT_TOP_N["model"])
    parser.add_argument("--eagle-top-n", type=int, default=DEFAULT_TOP_N["eagle"])
    parser.add_argument("--eagle-sampled-top-n", type=int, default=DEFAULT_TOP_N["eagle_sampled"])
    args = parser.parse_args(argv)
    top_n = {"model": args.model_top_n, "eagle": args.eagle_top_n}
    content = build(args.pair, {**top_n, "eagle_sampled": args.eagle_sampled_top_n})
    out = REPO_ROOT / "assets" / "models" / args.pair / FILE_NAME
    head = json.dumps({k: v for k, v in content.items() if k != "ranking"}, indent=1)
    ranked = json.dumps(content["ranking"], separators=(",", ":"))
    out.write_text(f'{head[:-2]},\n "ranking": {ranked}\n}}\n')
    print(f"wrote {out.relative_to(REPO_ROOT)}: coverage {content['coverage']}")
    return out


if __name__ == "__main__":
    main()
