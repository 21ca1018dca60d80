"""The equality cases of the device check (``python -m specdec_core check``, ``bench/check.py``).

Greedy equality (Leviathan et al. 2023, Thm 1 at temperature 0): every speculative run --
each drafter, a chain and a tree, processors, a quantized target, the heuristic γ
schedule -- gives token for token the output of the target alone under the same settings.
Replay equality: a lesson state replayed twice, opened from its link, or reached by an
incremental advance runs the same forwards with the same shapes in the same order as a
fresh replay, so everything it shows (timings aside) is bit-identical on one device.

Each case returns a :class:`CaseResult`; a case that cannot run here (no xgrammar, a pair
without an EAGLE head) is *skipped* with its reason, never a failure. Pure engine code:
no Streamlit, no plotly.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import quantized_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import DRAFTER_NAMES, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import advance, replay, state_of, timeless_json

#: The prompts of the greedy matrix (a Chinese one too: byte-level tokens on an English pair).
PROMPTS = ("ROMEO:\nBut soft, what light", "First Citizen:\nWe are", "春眠不觉晓，")
TREE_SHAPE = (2, 2, 1, 1)
TREE_DRAFTERS = ("model", "eagle", "mtp")
REPLAY_PROMPT = "ROMEO:\nBut soft, what light"


@dataclass(frozen=True)
class CaseResult:
    """One case: ``ok`` ``True`` (holds), ``False`` (fails: ``detail`` says where) or
    ``None`` (skipped: ``detail`` says why); ``seconds`` of wall time."""

    section: str  # "greedy" | "replay"
    name: str
    ok: bool | None
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class GreedyCase:
    """One row of the greedy matrix: a drafter, a tree shape or ``()`` for a chain, the
    settings (temperature 0) and the target precision (``none`` / ``int8`` / ``int4``)."""

    name: str
    drafter: str = "model"
    tree: tuple[int, ...] = ()
    settings: tuple[tuple[str, object], ...] = ()
    quant: str = "none"
    needs_xgrammar: bool = False


def greedy_matrix() -> tuple[GreedyCase, ...]:
    """Every drafter as a chain; trees with the drafters that draft one; a repetition
    penalty, a regex grammar, int8 and int4 targets, the heuristic γ schedule."""
    speaker = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
    return (
        *(GreedyCase(f"chain {d}", d) for d in DRAFTER_NAMES),
        *(GreedyCase(f"tree {d} {TREE_SHAPE}", d, TREE_SHAPE) for d in TREE_DRAFTERS),
        GreedyCase("repetition penalty 1.3", settings=(("repetition_penalty", 1.3),)),
        GreedyCase("regex grammar", settings=(("grammar", speaker),), needs_xgrammar=True),
        GreedyCase("int8 target", quant="int8"),
        GreedyCase("int4 target", quant="int4"),
        GreedyCase("heuristic gamma", settings=(("gamma_schedule", "heuristic"),)),
    )


def _first_difference(a: list[int], b: list[int]) -> int:
    """The first index where ``a`` and ``b`` differ (``min(len)`` if one is a prefix)."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def installed(module: str) -> bool:
    """Whether ``module`` imports here (the GPU image may lack xgrammar)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _skip_reason(case: GreedyCase, pair: ModelPair) -> str | None:
    if case.needs_xgrammar and not installed("xgrammar"):
        return "xgrammar is not installed"
    if case.drafter not in drafters_for(pair):
        return f"the pair {pair.name!r} ships no {case.drafter} drafter"
    return None


def run_greedy_case(
    pair: ModelPair, case: GreedyCase, prompts: tuple[str, ...], max_new_tokens: int, gamma: int
) -> CaseResult:
    """Speculative output == the target alone's, on every prompt (same settings, T = 0).
    A grammar that cannot be compiled here (a ``grammar_*`` ConfigError: the compile
    process busy or slow to start on a loaded machine) skips the case, after one retry;
    any other error fails it, with the error as the detail."""
    started = time.perf_counter()
    why = _skip_reason(case, pair)
    if why is not None:
        return CaseResult("greedy", case.name, None, why)
    for attempt in (1, 2):
        try:
            return _greedy_case(pair, case, prompts, max_new_tokens, gamma, started)
        except ConfigError as exc:
            if not exc.code.startswith("grammar_"):
                return CaseResult("greedy", case.name, False, f"{exc.code}: {exc}")
            if attempt == 2:
                return CaseResult(
                    "greedy", case.name, None, f"the grammar did not compile here: {exc}"
                )
            time.sleep(2.0)
        except Exception as exc:  # noqa: BLE001 - a crash on this device is a failed case
            return CaseResult("greedy", case.name, False, f"{type(exc).__name__}: {exc}")
    raise AssertionError("unreachable")


def _greedy_case(
    pair: ModelPair,
    case: GreedyCase,
    prompts: tuple[str, ...],
    max_new_tokens: int,
    gamma: int,
    started: float,
) -> CaseResult:
    timed = quantized_pair(pair, case.quant)
    config = SessionConfig(gamma=gamma, max_new_tokens=max_new_tokens, **dict(case.settings))
    failures = []
    for prompt in prompts:
        alone = generate(timed, prompt, config, "autoregressive").output_ids
        if case.tree:
            out = generate_tree(timed, prompt, config, case.tree, 12, case.drafter).output_ids
        else:
            drafter = make_named_drafter(timed, case.drafter)
            out = generate(timed, prompt, config, "speculative", drafter).output_ids
        if out != alone:
            at = _first_difference(out, alone)
            failures.append(f"{prompt[:12]!r}: differs at token {at} of {len(alone)}")
    ok = not failures
    detail = "; ".join(failures) if failures else f"{len(prompts)} prompt(s) equal"
    return CaseResult("greedy", case.name, ok, detail, time.perf_counter() - started)


# ------------------------------------------------------------------ replay equality
def snapshot(out) -> dict:
    """Everything a replayed session shows, without wall-clock timings: the state
    reached, problems, ids, phase, the history, the pending round and the KV table."""
    s = out.session
    pending = s.steps.tree_view() if out.state.tree else (s.steps.current_verify, s.steps.drafts)
    return {
        "state": out.state,
        "problems": out.problems,
        "ids": list(s.ids),
        "phase": s.phase,
        "history": timeless_json(s.history),
        "pending": timeless_json(pending),
        "kv": timeless_json(s.kv_state()),
    }


def lesson_states(pair: ModelPair) -> dict[str, tuple[LessonState, LessonState]]:
    """Two lesson states per shape, the second later than the first (T = 1, seeded): a
    chain with an edit in round 0 and one in round 2, and a tree (3, 2, 1)."""
    base = LessonState(pair=pair.name, prompt=REPLAY_PROMPT, temperature=1.0, seed=4)
    chain = replace(base, round=1, phase="verify", edits=((0, 2, 17),))
    later = replace(base, round=2, phase="verify", edits=((0, 2, 17), (2, 1, 42)))
    tree = replace(base, tree=(3, 2, 1), round=1, phase="verify")
    return {"chain": (chain, later), "tree": (tree, replace(tree, round=3, phase="commit"))}


def _compare(name: str, a: dict, b: dict, started: float) -> CaseResult:
    differs = sorted(k for k in a if a[k] != b[k])
    detail = "bit-identical" if not differs else "differs in " + ", ".join(differs)
    return CaseResult("replay", name, not differs, detail, time.perf_counter() - started)


def replay_cases(pair: ModelPair) -> list[CaseResult]:
    """Per shape (chain, tree): replayed twice; link → decode → replay vs a direct replay;
    an incremental advance from the earlier state vs a fresh replay of the later one.
    Plus a seeded T = 1 generation run twice. An error fails the section's last case."""
    out: list[CaseResult] = []
    try:
        _replay_cases(pair, out)
    except Exception as exc:  # noqa: BLE001 - a crash on this device is a failed case
        out.append(CaseResult("replay", "replay cases ran", False, f"{type(exc).__name__}: {exc}"))
    return out


def _replay_cases(pair: ModelPair, out: list[CaseResult]) -> None:
    for shape, (first, later) in lesson_states(pair).items():
        started = time.perf_counter()
        direct = snapshot(replay(pair, later))
        out.append(
            _compare(f"{shape}: replayed twice", direct, snapshot(replay(pair, later)), started)
        )
        started = time.perf_counter()
        opened, problems = decode(encode(later), [pair.name])
        if opened != later or problems:
            out.append(
                CaseResult(
                    "replay",
                    f"{shape}: link vs replay",
                    False,
                    f"link decodes to another state {problems}",
                )
            )
        else:
            out.append(
                _compare(
                    f"{shape}: link vs replay", direct, snapshot(replay(pair, opened)), started
                )
            )
        started = time.perf_counter()
        session = replay(pair, first).session
        reached = state_of(session, first, first.prompt)
        moved = advance(pair, session, reached, later)
        if moved is None:
            out.append(
                CaseResult(
                    "replay",
                    f"{shape}: advance vs fresh replay",
                    False,
                    "advance refused a reachable state",
                )
            )
        else:
            out.append(
                _compare(f"{shape}: advance vs fresh replay", direct, snapshot(moved), started)
            )
    started = time.perf_counter()
    config = SessionConfig(temperature=1.0, seed=7, max_new_tokens=24)
    runs = [generate(pair, REPLAY_PROMPT, config).records for _ in range(2)]
    same = {"records": timeless_json(runs[0])}, {"records": timeless_json(runs[1])}
    out.append(_compare("seeded T=1 generation twice", *same, started))


def all_cases(
    pair: ModelPair,
    prompts: tuple[str, ...],
    max_new_tokens: int,
    gamma: int,
    progress: Callable[[str], None] = lambda _: None,
) -> list[CaseResult]:
    """The greedy matrix, then the replay cases (``progress`` gets a line per section)."""
    matrix = greedy_matrix()
    progress(
        f"greedy equality: {len(matrix)} cases x {len(prompts)} prompt(s), {max_new_tokens} tokens"
    )
    results = [run_greedy_case(pair, c, prompts, max_new_tokens, gamma) for c in matrix]
    progress("replay equality: chain and tree lesson states")
    return results + replay_cases(pair)
