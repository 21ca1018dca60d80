"""How large a drafter's reduced vocabulary should be: acceptance against cost for each
``N`` (the top-``N`` token ids of ``draft_vocab.json``; ``full`` = all ``V``), for the draft
model and the EAGLE head, on both embedded pairs.

    SPECDEC_TORCH_THREADS=1 nice -n 15 python benchmarks/draft_vocab.py [--prompts 8]
        [--tokens 64] [--sizes 512,1024,2048] [--pairs embedded,embedded-zh]

Per (pair, drafter, N): the share of held-out tokens inside the top ``N`` (the file's
``coverage``), α (mean ``Σ min(p, q)`` over checked positions) at T = 0 and T = 1 on
``--prompts`` held-out prompts (``bench/lossless.held_out_prompts``, γ 4, seed 0, end of
text ignored), ``c`` (a draft step over a target step, each timing's fastest of 15
repeats, interleaved) and the cost model's speed-up at its best γ on that curve
(``costmodel.curve_improvement``). Greedy outputs are checked equal to the target alone's.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specdec_core.bench.curve import measure_forward_curve  # noqa: E402
from specdec_core.bench.lossless import held_out_prompts  # noqa: E402
from specdec_core.bench.runs import ignoring_eos  # noqa: E402
from specdec_core.core.models import load_pair  # noqa: E402
from specdec_core.core.settings import SessionConfig  # noqa: E402
from specdec_core.drafters.draft_vocab import read_vocab_file  # noqa: E402
from specdec_core.drafters.eagle import make_eagle_drafter  # noqa: E402
from specdec_core.drafters.model import make_model_drafter  # noqa: E402
from specdec_core.engine.chain.generate import generate  # noqa: E402
from specdec_core.rules.costmodel import best_gamma_on_curve, curve_improvement  # noqa: E402

MAKERS = {"model": make_model_drafter, "eagle": make_eagle_drafter}


def alpha(pair, prompts, make, n: int, temperature: float, reference, tokens: int):
    """``(mean α over prompts, every output equal to reference?)`` (``None``: not checked)."""
    config = SessionConfig(gamma=4, max_new_tokens=tokens, temperature=temperature, seed=0)
    runs = [generate(pair, p, config, "speculative", make(pair, n)) for p in prompts]
    same = reference is None or [r.output_ids for r in runs] == reference
    return sum(r.stats.acceptance_rate for r in runs) / len(runs), same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--sizes", default="512,1024,2048")
    parser.add_argument("--pairs", default="embedded,embedded-zh")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("SPECDEC_TORCH_THREADS", "1")))
    sizes = [int(s) for s in args.sizes.split(",")] + [0]
    print(f"load (1 min) {os.getloadavg()[0]:.1f}")
    print("pair         drafter  N     held-out  α T=0  α T=1  c      best γ → ×, T=0 / 1  = alone")
    for name in args.pairs.split(","):
        pair = ignoring_eos(load_pair(name, device="cpu"))
        coverage = (read_vocab_file(pair) or {}).get("coverage", {})
        prompts = held_out_prompts(args.prompts, name)
        greedy = SessionConfig(gamma=4, max_new_tokens=args.tokens)
        alone = [generate(pair, p, greedy, "autoregressive").output_ids for p in prompts]
        for drafter, make in MAKERS.items():
            for n in sizes:
                curve = measure_forward_curve(pair, prompts[0], 9, 15, make(pair, n), 4)
                by_k = {k + 1: s.low for k, s in enumerate(curve.target_spread)}
                c = curve.draft_spread.low / by_k[1]
                a0, same = alpha(pair, prompts, make, n, 0.0, alone, args.tokens)
                a1, _ = alpha(pair, prompts, make, n, 1.0, None, args.tokens)
                best = []
                for a in (a0, a1):
                    g = best_gamma_on_curve(a, c, by_k)
                    best.append(f"{g} → {curve_improvement(a, g, c, by_k):.2f}")
                shown = coverage.get(str(n), {}).get("heldout", 1.0 if n == 0 else float("nan"))
                print(
                    f"{name:12} {drafter:8} {n or 'full':5} {shown:8.3f}  {a0:.3f}  {a1:.3f}  "
                    f"{c:.3f}  {' / '.join(best):18} {'yes' if same else 'NO'}"
                )


if __name__ == "__main__":
    main()
