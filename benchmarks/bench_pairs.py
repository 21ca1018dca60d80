"""Benchmark every model pair available on this machine and print a table.

    python benchmarks/bench_pairs.py [--gamma 4] [--max-new-tokens 128] [--repeats 5]
        [--threads 2] [--sweep] [--random-configs] [--json OUT.json]

For each preset whose weights are present (the shipped ``embedded`` pair always; the
OpenAI GPT-2 pairs when they are in the local Hugging Face cache — nothing is
downloaded), greedy, same prompt and settings, in one run:

* our target-only autoregressive tokens/s, our speculative tokens/s, speed-up, α (mean
  Σ min(p, q)), mean accepted drafts per round, the per-round breakdown (draft / verify /
  everything that is not a model forward) and the cost model's predictions;
* Hugging Face ``generate`` without and with ``assistant_model`` (constant γ), its
  speed-up and mean accepted length, and whether its text equals ours.

``--sweep`` adds a γ = 1..8 sweep for each pair. ``--random-configs`` (default on CUDA)
times single forwards of GPT-2-sized models with random weights (124M, 355M, 774M,
1.5B — no weights need to reach the machine) at decode (1 token) and verify (γ + 1
tokens) sizes, derives ``c`` for the OpenAI pairs (gpt2 ← distilgpt2, gpt2-medium/large/
xl ← gpt2) and prints the cost model's predicted speed-up for a few α.

Figures are printed (and optionally saved as JSON), never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specdec_core.bench.report import run_bench
from specdec_core.bench.results import BenchReport, GammaPoint
from specdec_core.bench.runs import ignoring_eos, measure_pair
from specdec_core.bench.sweeps import gamma_sweep_point
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import PRESETS, is_preset_cached, load_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.rules.costmodel import best_gamma, walltime_improvement

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"

# GPT-2 family shapes (Radford et al. 2019; distilgpt2: 6 layers of gpt2's width).
GPT2_SHAPES = {
    "distilgpt2 (82M)": (6, 768, 12),
    "gpt2 (124M)": (12, 768, 12),
    "gpt2-medium (355M)": (24, 1024, 16),
    "gpt2-large (774M)": (36, 1280, 20),
    "gpt2-xl (1.5B)": (48, 1600, 25),
}
OPENAI_PAIRS = [
    ("gpt2", "gpt2 (124M)", "distilgpt2 (82M)"),
    ("gpt2-medium", "gpt2-medium (355M)", "gpt2 (124M)"),
    ("gpt2-large", "gpt2-large (774M)", "gpt2 (124M)"),
    ("gpt2-xl", "gpt2-xl (1.5B)", "gpt2 (124M)"),
]


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(str(x).rjust(w) for x, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def bench_pairs(args: argparse.Namespace) -> list[tuple[BenchReport, float]]:
    """Each preset on this machine: its report and the seconds it took."""
    results = []
    for name in PRESETS:
        if not is_preset_cached(name):
            print(f"[skip] {name}: weights not on this machine", file=sys.stderr)
            continue
        print(f"[run] {name} …", file=sys.stderr, flush=True)
        started = time.perf_counter()
        r = run_bench(name, args.prompt, args.gamma, args.max_new_tokens, args.repeats)
        results.append((r, time.perf_counter() - started))
    rows = []
    for r, _ in results:
        s = r.summary
        sp, cm, greedy, hf = s.speculative, s.cost_model, r.hf.greedy, r.hf.assisted
        rows.append(
            [
                r.pair,
                r.device,
                f"{s.autoregressive.tokens_per_s:.1f}",
                f"{sp.tokens_per_s:.1f}",
                f"{s.speedup:.2f}x",
                f"{cm.alpha:.3f}",
                f"{sp.mean_accepted:.2f}",
                f"{cm.c:.3f}",
                f"{cm.forward_time_speedup:.2f}x",
                f"{cm.forward_time_speedup_measured_advance:.2f}x",
                f"{cm.leviathan_speedup:.2f}x",
                f"{_or_nan(greedy.tokens_per_s if greedy else None):.1f}",
                f"{_or_nan(hf.tokens_per_s if hf else None):.1f}",
                f"{_or_nan(hf.speedup_over_hf_greedy if hf else None):.2f}x",
                f"{_or_nan(hf.mean_accepted if hf else None):.2f}",
                "yes" if s.greedy_equal and (hf is None or hf.equal_to_target) else "NO",
            ]
        )
    header = [
        "pair",
        "device",
        "AR tok/s",
        "spec tok/s",
        "speed-up",
        "alpha",
        "mean acc",
        "c",
        "pred(fwd)",
        "pred(fwd,adv)",
        "pred(Lev)",
        "HF tok/s",
        "HF asst tok/s",
        "HF speed-up",
        "HF mean acc",
        "equal",
    ]
    print(
        f"\nγ = {args.gamma}, {args.max_new_tokens} new tokens, greedy, median of "
        f"{args.repeats}, {torch.get_num_threads()} threads\n"
    )
    print(table(rows, header))
    print(
        "\npred(fwd): cost model from measured forward times and α; pred(fwd,adv): the same "
        "with the measured tokens per round; pred(Lev): Thm 3.8 from α and c only"
    )
    print(
        "\nper round (ms): draft wall / verify wall / other; model forwards: draft / verify "
        "/ not-a-forward (% of round)"
    )
    for r, _ in results:
        sp, cm = r.summary.speculative, r.summary.cost_model
        print(
            f"  {r.pair:12s} {sp.draft_ms_per_round:.3f} / {sp.verify_ms_per_round:.3f}"
            f" / {sp.overhead_ms_per_round:.3f};  {sp.draft_forward_ms_per_round:.3f} / "
            f"{sp.verify_forward_ms_per_round:.3f} / {sp.non_forward_ms_per_round:.3f} "
            f"({sp.non_forward_pct:.1f} %)  round {sp.round_ms:.3f} ms; target step "
            f"{cm.target_step_ms:.3f} ms, verify/step {cm.verify_over_target_step:.2f}"
        )
        if r.hf_error is not None:
            print(f"  {r.pair}: HF assisted failed: {r.hf_error}")
    return results


def sweep(args: argparse.Namespace, names: list[str]) -> dict[str, list[GammaPoint]]:
    out: dict[str, list[GammaPoint]] = {}
    for name in names:
        pair = ignoring_eos(load_pair(name))
        points = []
        for g in range(1, 9):  # target-only interleaved with each γ's runs
            config = SessionConfig(gamma=g, max_new_tokens=args.max_new_tokens)
            ar, sp = measure_pair(pair, args.prompt, config, args.repeats)
            points.append(gamma_sweep_point(ar, sp, g))
        out[name] = points
        rows = [
            [
                p.gamma,
                f"{p.speculative_tokens_per_s:.1f}",
                f"{p.speedup:.2f}x",
                f"{p.alpha:.3f}",
                f"{p.mean_accepted:.2f}",
                f"{p.forward_time_speedup:.2f}x",
                f"{p.forward_time_speedup_measured_advance:.2f}x",
                f"{p.leviathan_speedup:.2f}x",
                "yes" if p.greedy_equal else "NO",
            ]
            for p in points
        ]
        ar_rates = ", ".join(f"{p.autoregressive_tokens_per_s:.0f}" for p in points)
        print(f"\nγ sweep, {name} (target-only tok/s next to each γ: {ar_rates})\n")
        print(
            table(
                rows,
                [
                    "γ",
                    "spec tok/s",
                    "speed-up",
                    "alpha",
                    "mean acc",
                    "pred(fwd)",
                    "pred(fwd,adv)",
                    "pred(Lev)",
                    "equal",
                ],
            )
        )
    return out


def forward_ms(model: torch.nn.Module, tokens: int, context: int, repeats: int) -> float:
    """Median ms of one cached forward over ``tokens`` positions after ``context``."""
    cache = ModelCache(model)
    cache.extend(list(range(1, context + 1)))
    times = []
    for _ in range(repeats + 2):
        before = cache.forward_ms
        cache.extend(list(range(1, tokens + 1)))
        times.append(cache.forward_ms - before)
        cache.crop(context)
    return statistics.median(times[2:])


def random_configs(args: argparse.Namespace) -> dict:
    """Per-forward latency of GPT-2-sized random models → c and predicted speed-ups."""
    from transformers import GPT2Config, GPT2LMHeadModel

    device = "cuda" if torch.cuda.is_available() else "cpu"
    timing: dict[str, dict[str, float]] = {}
    for label, (layers, width, heads) in GPT2_SHAPES.items():
        config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=50257)
        with torch.device(device):
            model = GPT2LMHeadModel(config).eval().requires_grad_(False)
        timing[label] = {
            "decode_ms": forward_ms(model, 1, 128, args.repeats * 10),
            "verify_ms": forward_ms(model, args.gamma + 1, 128, args.repeats * 10),
        }
        ms = timing[label]
        print(
            f"[random] {label}: decode {ms['decode_ms']:.3f} ms, verify "
            f"({args.gamma + 1} tokens) {ms['verify_ms']:.3f} ms",
            file=sys.stderr,
        )
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    rows, pairs = [], {}
    for preset, target, draft in OPENAI_PAIRS:
        t, d = timing[target], timing[draft]
        c = d["decode_ms"] / t["decode_ms"]
        entry = {"c": c, "target": target, "draft": draft, "predicted": {}}
        for alpha in (0.6, 0.7, 0.8):
            g = best_gamma(alpha, c, 8)
            # measured verify cost instead of Thm 3.8's "verify = one target step"
            advanced = (1 - alpha ** (g + 1)) / (1 - alpha)
            verify_g = forward_ms_scaled(t, g, args.gamma)
            forward_pred = t["decode_ms"] * advanced / (g * d["decode_ms"] + verify_g)
            entry["predicted"][str(alpha)] = {
                "best_gamma": g,
                "leviathan": walltime_improvement(alpha, g, c),
                "with_measured_verify": forward_pred,
            }
            rows.append(
                [
                    preset,
                    f"{target} ← {draft}",
                    f"{t['decode_ms']:.2f}",
                    f"{d['decode_ms']:.2f}",
                    f"{t['verify_ms']:.2f}",
                    f"{c:.3f}",
                    alpha,
                    g,
                    f"{walltime_improvement(alpha, g, c):.2f}x",
                    f"{forward_pred:.2f}x",
                ]
            )
        pairs[preset] = entry
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    print(f"\nGPT-2-sized random-weight models on {device} ({name}), float32\n")
    print(
        table(
            rows,
            [
                "pair",
                "target ← draft",
                "target ms",
                "draft ms",
                f"verify({args.gamma + 1}) ms",
                "c",
                "alpha",
                "best γ",
                "pred(Lev)",
                "pred(verify)",
            ],
        )
    )
    return {"device": device, "timing": timing, "pairs": pairs}


def forward_ms_scaled(t: dict[str, float], gamma: int, measured_gamma: int) -> float:
    """Verify cost for ``γ + 1`` tokens, interpolated linearly between the measured 1-token
    and ``measured_gamma + 1``-token forwards."""
    slope = (t["verify_ms"] - t["decode_ms"]) / max(measured_gamma, 1)
    return t["decode_ms"] + slope * gamma


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sweep", action="store_true", help="γ = 1..8 sweep for each pair")
    ap.add_argument(
        "--random-configs",
        action="store_true",
        default=None,
        help="time GPT-2-sized random models (default: on CUDA only)",
    )
    ap.add_argument("--no-pairs", action="store_true", help="skip the preset pairs")
    ap.add_argument("--json", type=Path, help="also save every figure to this JSON file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        torch.set_num_threads(args.threads)
    out: dict = {"threads": torch.get_num_threads(), "torch": torch.__version__}
    if not args.no_pairs:
        reports = bench_pairs(args)
        out["pairs"] = [{**r.to_json(), "seconds": sec} for r, sec in reports]
        if args.sweep:
            points = sweep(args, [r.pair for r, _ in reports])
            out["gamma_sweep"] = {k: [p.to_json() for p in v] for k, v in points.items()}
    if args.random_configs or (args.random_configs is None and torch.cuda.is_available()):
        out["random_configs"] = random_configs(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
