"""Chain vs tree, timed on the fast paths: target-only, chain speculative
(:func:`generate.generate`) and tree speculative (:func:`tree.generate_tree`) over the
same prompts and settings; tokens per target forward and measured ms per generated token
(median over repeats). Used by ``python -m specdec_core bench --tree`` and
``benchmarks/tree_vs_chain.py``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .bench.runs import ignoring_eos
from .drafters import make_named_drafter
from .generate import generate
from .inputs import SessionConfig
from .models import ModelPair
from .tree_generate import generate_tree


@dataclass(frozen=True)
class TreeBenchRow:
    """One method over all prompts: ``method`` (``target-only`` | ``chain`` | ``tree``),
    ``setting`` (``γ=4``, ``2,2,1,1``, or ``""``), ``drafter``; ``tokens`` generated and
    ``target_forwards`` run per repeat (the same every repeat: seeded); ``ms_per_token``
    the median over repeats of total wall time / tokens; ``draft_forwards`` per repeat."""

    method: str
    setting: str
    drafter: str
    temperature: float
    tokens: int
    target_forwards: int
    draft_forwards: int
    tokens_per_target_forward: float
    ms_per_token: float

    def to_json(self) -> dict:
        return asdict(self)


def _once(pair, prompts, config, method, shape, budget, drafter) -> tuple[int, int, int, float]:
    total = (0, 0, 0, 0.0)  # tokens, target forwards, draft forwards, ms
    for prompt in prompts:
        if method == "tree":
            run = generate_tree(pair, prompt, config, shape, budget, drafter)
            got = (len(run.output_ids), run.target_forwards, run.draft_forwards, run.total_ms)
        else:
            mode = "autoregressive" if method == "target-only" else "speculative"
            made = None if mode == "autoregressive" else make_named_drafter(pair, drafter)
            res = generate(pair, prompt, config, mode=mode, drafter=made)
            stats = res.stats
            got = (stats.new_tokens, stats.target_forwards, stats.draft_forwards, stats.total_ms)
        total = tuple(a + b for a, b in zip(total, got, strict=True))  # type: ignore[assignment]
    return total


def measure(
    pair: ModelPair,
    prompts: Sequence[str],
    config: SessionConfig,
    method: str,
    shape: Sequence[int] = (2, 2, 1, 1),
    budget: int = 12,
    drafter: str = "model",
    repeats: int = 3,
    ignore_eos: bool = True,
) -> TreeBenchRow:
    """Time ``method`` over ``prompts`` (one untimed warm-up on the first prompt)."""
    timed = ignoring_eos(pair) if ignore_eos else pair
    _once(timed, prompts[:1], config, method, shape, budget, drafter)
    runs = [_once(timed, prompts, config, method, shape, budget, drafter) for _ in range(repeats)]
    tokens, forwards, drafts, _ = runs[0]
    ms = statistics.median(r[3] / r[0] for r in runs if r[0])
    setting = {"tree": ",".join(map(str, shape)), "chain": f"γ={config.gamma}"}.get(method, "")
    return TreeBenchRow(method, setting, "" if method == "target-only" else drafter,
                        config.temperature, tokens, forwards, drafts,
                        tokens / forwards if forwards else 0.0, ms)  # fmt: skip


def compare(
    pair: ModelPair,
    prompts: Sequence[str],
    config: SessionConfig,
    shapes: Sequence[Sequence[int]] = ((2, 2, 1, 1),),
    drafters: Sequence[str] = ("model",),
    budget: int = 12,
    repeats: int = 3,
    ignore_eos: bool = True,
) -> list[TreeBenchRow]:
    """Target-only, then per drafter the chain (γ = ``config.gamma``) and each tree shape."""
    rows = [measure(pair, prompts, config, "target-only", repeats=repeats, ignore_eos=ignore_eos)]
    for name in drafters:
        rows.append(measure(pair, prompts, config, "chain", drafter=name, repeats=repeats,
                            ignore_eos=ignore_eos))  # fmt: skip
        for shape in shapes:
            rows.append(measure(pair, prompts, config, "tree", shape, budget, name, repeats,
                                ignore_eos))  # fmt: skip
    return rows
