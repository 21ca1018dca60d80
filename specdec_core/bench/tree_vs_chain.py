"""Chain vs tree, timed on the fast paths: target-only, chain speculative
(:func:`specdec_core.engine.chain.generate.generate`) and tree speculative
(:func:`specdec_core.engine.tree.generate.generate_tree`) over the
same prompts and settings; tokens per target forward and measured ms per generated token
(median over repeats, with its spread and how it was measured). The methods are timed
interleaved -- one untimed warm-up run of each, then each repeat runs every method once --
so a burst of load hits them alike. Used by ``python -m specdec_core bench --tree``,
``benchmarks/tree_vs_chain.py`` and the step-through page's "chain vs tree"
(:func:`chain_vs_tree`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.timing import HowMeasured, Spread
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree


@dataclass(frozen=True)
class TreeBenchRow:
    """One method over all prompts: ``method`` (``target-only`` | ``chain`` | ``tree``),
    ``setting`` (``γ=4``, ``2,2,1,1``, or ``""``), ``drafter``; ``tokens`` generated and
    ``target_forwards`` run per repeat (the same every repeat: seeded); ``ms_per_token``
    the median over repeats of total wall time / tokens (0 when no run made a token), its
    ``spread`` (``None``: no run made a token) and ``how`` it was measured;
    ``draft_forwards`` per repeat."""

    method: str
    setting: str
    drafter: str
    temperature: float
    tokens: int
    target_forwards: int
    draft_forwards: int
    tokens_per_target_forward: float
    ms_per_token: float
    spread: Spread | None = None  # ms per token over the repeats
    how: HowMeasured | None = None

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


Variant = tuple[str, tuple[int, ...], str]  # (method, tree shape, drafter)


def _row(variant: Variant, config: SessionConfig, runs: list, how: HowMeasured) -> TreeBenchRow:
    method, shape, drafter = variant
    tokens, forwards, drafts, _ = runs[0]
    per_token = [ms / n for n, _, _, ms in runs if n]  # a run that made no token: no rate
    spread = Spread.of(per_token) if per_token else None
    setting = {"tree": ",".join(map(str, shape)), "chain": f"γ={config.gamma}"}.get(method, "")
    return TreeBenchRow(
        method,
        setting,
        "" if method == "target-only" else drafter,
        config.temperature,
        tokens,
        forwards,
        drafts,
        tokens / forwards if forwards else 0.0,
        spread.median if spread else 0.0,
        spread,
        how,
    )


def measure_many(
    pair: ModelPair,
    prompts: Sequence[str],
    config: SessionConfig,
    variants: Sequence[Variant],
    budget: int = 12,
    repeats: int = 3,
    ignore_eos: bool = True,
) -> list[TreeBenchRow]:
    """Time every variant ``(method, shape, drafter)`` over ``prompts``, interleaved: one
    untimed warm-up run of each on the first prompt, then ``repeats`` passes each running
    every variant once. One row per variant, in order.

    Raises:
        PromptError, ConfigError: from the generators.
    """
    timed = ignoring_eos(pair) if ignore_eos else pair
    for method, shape, drafter in variants:
        _once(timed, prompts[:1], config, method, shape, budget, drafter)
    runs: list[list] = [[] for _ in variants]
    for _ in range(max(1, repeats)):
        for i, (method, shape, drafter) in enumerate(variants):
            runs[i].append(_once(timed, prompts, config, method, shape, budget, drafter))
    how = HowMeasured.now(max(1, repeats), 1, config.max_new_tokens)
    return [_row(tuple(v), config, r, how) for v, r in zip(variants, runs, strict=True)]  # type: ignore[arg-type]


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
    """Time ``method`` over ``prompts`` (one untimed warm-up on the first prompt): one
    variant of :func:`measure_many`."""
    variant = (method, tuple(shape), drafter)
    return measure_many(pair, prompts, config, [variant], budget, repeats, ignore_eos)[0]


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
    """Target-only, then per drafter the chain (γ = ``config.gamma``) and each tree shape,
    timed interleaved (:func:`measure_many`)."""
    variants: list[Variant] = [("target-only", (), "model")]
    for name in drafters:
        variants.append(("chain", (), name))
        variants += [("tree", tuple(shape), name) for shape in shapes]
    return measure_many(pair, prompts, config, variants, budget, repeats, ignore_eos)


def chain_vs_tree(
    pair: ModelPair,
    prompt: str,
    config: SessionConfig,
    drafter: str,
    shape: Sequence[int],
    budget: int = 12,
    tokens: int = 32,
    repeats: int = 3,
) -> tuple[TreeBenchRow, TreeBenchRow]:
    """The tree panel's "chain vs tree on this prompt": the chain (γ = the tree's depth)
    and the tree ``shape``, both greedy (top-k / top-p off), ``tokens`` new tokens each
    (end-of-text ignored), on the fast paths with ``drafter``: :func:`measure_many`'s
    interleaved timing (one warm-up run of each, then ``repeats`` timed runs of each;
    median, spread, how; a run that made no token or ran no forward gives 0, never a
    division by zero). Returns ``(chain row, tree row)``.

    Raises:
        PromptError, ConfigError: from the generators.
    """
    cfg = replace(
        config, gamma=len(shape), temperature=0.0, top_k=0, top_p=1.0, max_new_tokens=tokens
    )
    variants: list[Variant] = [("chain", (), drafter), ("tree", tuple(shape), drafter)]
    chain, tree = measure_many(pair, [prompt], cfg, variants, budget, repeats)
    return chain, tree
