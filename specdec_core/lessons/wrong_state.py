"""A recurrent state **not restored** after a rejection, done wrong on purpose — as a
lesson, never as the app's behaviour (``core/checkpoints.py`` restores).

Two cases with opposite outcomes:

* the **draft's** state not restored (:func:`measure_restore`, on the pair): the next
  round drafts from the state after the rejected drafts. Every draft is still checked by
  the target, so the output stays exactly the target's (greedy: token for token); only
  acceptance drops, measured on held-out prompts;
* the **target's** state not restored (:func:`toy_target`, a hand-made recurrent target
  over two tokens, not the pair): the target's own next-token rows now come from a state
  that read rejected drafts, so the output is no longer the target's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.recurrent import RecurrentDrafter, recurrent_dir
from specdec_core.drafters.recurrent_lm import RecurrentLM
from specdec_core.engine.chain.generate import generate


def heldout_prompts(corpus: Path, n: int) -> list[str]:
    """``n`` prompts from the corpus's last 10 % (the validation split, never trained on):
    the first two lines of evenly spaced speeches with at least three lines (the selection
    of ``benchmarks/measure_acceptance.py``)."""
    text = corpus.read_text(encoding="utf-8")
    tail = text[int(len(text) * 0.9) :]
    speeches = [s for s in tail.split("\n\n")[1:] if s.count("\n") >= 2]
    step = max(1, len(speeches) // max(1, n))
    return ["\n".join(s.split("\n")[:2]) + "\n" for s in speeches[::step][:n]]


@dataclass(frozen=True)
class RestoreRow:
    """One drafter over the prompts, greedy: ``rounds``; ``acceptance_rate`` α (mean
    ``Σ min(p, q)`` over checked positions, at T = 0 the share of checked drafts accepted);
    ``mean_accepted`` committed drafts per round (0..γ); ``exact``: every output equals
    the target alone's."""

    drafter: str
    rounds: int
    acceptance_rate: float
    mean_accepted: float
    exact: bool


def measure_restore(
    pair: ModelPair, model: RecurrentLM, prompts: Sequence[str], gamma: int, tokens: int
) -> dict[str, RestoreRow]:
    """Greedy speculative decoding of ``tokens`` new tokens after each prompt at γ =
    ``gamma``: the recurrent drafter with its state restored (``restored``), not restored
    (``not_restored``), and the pair's draft model (``draft_model``), each checked against
    the target alone. A fresh drafter per prompt. Returns the rows by name."""
    config = SessionConfig(gamma=gamma, max_new_tokens=tokens)
    alone = [generate(pair, p, config, mode="autoregressive").output_ids for p in prompts]
    makers = {
        "restored": lambda: RecurrentDrafter(model),
        "not_restored": lambda: RecurrentDrafter(model, restore=False),
        "draft_model": lambda: None,  # generate's default: the pair's draft model
    }
    rows: dict[str, RestoreRow] = {}
    for name, make in makers.items():
        records, exact = [], True
        for prompt, want in zip(prompts, alone, strict=True):
            run = generate(pair, prompt, config, drafter=make())
            exact &= run.output_ids == want
            records.extend(run.records)
        checked = [o for r in records for o in r.checked_overlaps]
        rows[name] = RestoreRow(
            name,
            len(records),
            round(sum(checked) / max(1, len(checked)), 4),
            round(sum(r.accepted for r in records) / max(1, len(records)), 4),
            exact,
        )
    return rows


@dataclass(frozen=True)
class ShippedFigures:
    """:func:`measure_restore`'s rows as the model card records them (``greedy_acceptance``
    of ``recurrent/training_report.json``): ``prompts`` held-out prompts, ``tokens`` new
    tokens each, γ = ``gamma``."""

    prompts: int
    tokens: int
    gamma: int
    rows: dict[str, RestoreRow]


def shipped_figures(pair: ModelPair) -> ShippedFigures | None:
    """The pair's recurrent model card's measured rows; ``None`` when the pair has no
    recurrent drafter or the card lacks them (read, type-checked, never trusted further)."""
    folder = recurrent_dir(pair)
    if folder is None:
        return None
    try:
        report = json.loads((folder / "training_report.json").read_text("utf-8"))
        acc = report["greedy_acceptance"]
        rows = {
            name: RestoreRow(
                name,
                int(acc[name]["rounds"]),
                float(acc[name]["acceptance_rate"]),
                float(acc[name]["mean_accepted"]),
                bool(acc[name]["exact"]),
            )
            for name in ("restored", "not_restored", "draft_model")
        }
        return ShippedFigures(int(acc["prompts"]), int(acc["new_tokens"]), int(acc["gamma"]), rows)
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ------------------------------------------------------------- a hand-made recurrent target
#: The toy target's rule: its state is the number of tokens read, mod 3; it emits ``b``
#: after every two ``a``: greedy output ``a a b a a b …``.
TOY_PERIOD = 3


def toy_next(state: int) -> str:
    """The toy target's greedy token from its state."""
    return "b" if state == TOY_PERIOD - 1 else "a"


@dataclass(frozen=True)
class ToyRound:
    """One round: ``drafted`` (always ``a``), ``accepted`` drafts, the target's
    ``correction`` (``None``: all accepted, ``bonus`` instead), the state the target
    verified from, after its verification pass and the one kept afterwards."""

    drafted: tuple[str, ...]
    accepted: int
    appended: tuple[str, ...]
    state_before: int
    state_after_verify: int
    state_kept: int


@dataclass(frozen=True)
class ToyRun:
    """The output, its rounds, and the target alone's output of the same length."""

    output: tuple[str, ...]
    rounds: tuple[ToyRound, ...]
    alone: tuple[str, ...]

    @property
    def exact(self) -> bool:
        return self.output == self.alone


def toy_target(restore: bool, gamma: int = 3, tokens: int = 12) -> ToyRun:
    """Greedy speculative decoding with the toy target (state = tokens read mod 3) and a
    drafter that always proposes ``a``. Verification reads the drafts one by one into the
    target's state (a recurrent target's verification pass). ``restore``: afterwards the
    target's state is the checkpoint after the accepted drafts; ``False``: it stays the
    state after *all* drafts, rejected ones included (the wrong way). Either way the
    committed correction/bonus token is then read.

    Raises:
        ValueError: ``gamma`` or ``tokens`` below 1.
    """
    if gamma < 1 or tokens < 1:
        raise ValueError("gamma and tokens must be at least 1")
    alone, s = [], 0
    for _ in range(tokens):
        alone.append(toy_next(s))
        s = (s + 1) % TOY_PERIOD
    out: list[str] = []
    rounds: list[ToyRound] = []
    state = 0
    while len(out) < tokens:
        drafts = ("a",) * gamma
        checkpoints, s = [state], state
        n = None
        for i, y in enumerate(drafts):  # verify: read y_i after checking it
            if n is None and toy_next(s) != y:
                n = i
            s = (s + 1) % TOY_PERIOD
            checkpoints.append(s)
        n = gamma if n is None else n
        last = toy_next(checkpoints[n])  # the correction at n, or the bonus after all
        appended = (drafts[:n] + (last,))[: tokens - len(out)]
        kept = checkpoints[n] if restore else s
        rounds.append(ToyRound(drafts, n, appended, state, s, kept))
        state = (kept + 1) % TOY_PERIOD  # the correction/bonus is read
        out.extend(appended)
    return ToyRun(tuple(out), tuple(rounds), tuple(alone))
