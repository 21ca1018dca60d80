"""One-click scenarios: lesson states that stop at the moment a lesson talks about.

Nothing here is a hard-coded token id: each scenario is *found* on the loaded pair by
running candidate prompts (and seeds) through the engine until the described outcome
happens, so the same scenarios work on the embedded pair and on the GPT-2 presets. The
searches are bounded (prompts × seeds × tokens); a scenario that is not found on a pair is
reported as missing, not faked. Results are plain :class:`LessonState` values that the
caller caches per pair.

Pure module: no Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from .drafters import make_named_drafter
from .generate import generate
from .lesson_link import LessonState
from .models import ModelPair
from .records import RoundRecord
from .session import SpeculativeSession

A, R, D, C = "accepted", "rejected", "discarded", "cut"

#: Prompts tried in order (content, not UI text: the models read them).
PROMPTS = (
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?",
    "KING RICHARD III:\nNow is the winter of our discontent",
    "HAMLET:\nTo be, or not to be, that is the question:",
    "MENENIUS:\nI tell you, friends, most charitable care",
)
REPETITIVE = (
    "To be, or not to be. To be, or not to be. To be, or not to be. To be,",
    "ha ha ha ha ha ha ha ha ha ha ha ha",
    "ROMEO:\nGood night, good night! Good night, good night! Good night,",
)
SCENARIOS = ("first_error_3", "first_error_1", "all_accepted", "sampled_rejection",
             "one_hot_edit", "eos_cut", "lookup_run")  # fmt: skip
SEEDS = range(40)
TOKENS = 48


@dataclass(frozen=True)
class Found:
    """A scenario's state on a pair (``None`` when the bounded search found none)."""

    key: str
    state: LessonState | None


def _first_round(records: tuple[RoundRecord, ...], want: Callable[[RoundRecord], bool]) -> int:
    return next((i for i, r in enumerate(records) if want(r)), -1)


def _search_records(
    pair: ModelPair, base: LessonState, prompts: tuple[str, ...], seeds: range,
    want: Callable[[RoundRecord], bool],
) -> LessonState | None:  # fmt: skip
    """The first (prompt, seed, round) whose fast-path record matches ``want``, as a state
    stopped after Verify of that round (the fast path makes the step machine's records)."""
    for prompt in prompts:
        for seed in seeds:
            state = replace(base, prompt=prompt, seed=seed)
            drafter = make_named_drafter(pair, state.drafter)
            try:
                run = generate(pair, prompt, state.config(), drafter=drafter)
            except Exception:  # noqa: BLE001 - a prompt this pair cannot take: try the next
                break
            r = _first_round(run.records, want)
            if r >= 0:
                return replace(state, round=r, phase="commit")
            if base.temperature == 0.0:
                break  # greedy: every seed gives the same run
    return None


def _one_hot_edit(pair: ModelPair, base: LessonState) -> LessonState | None:
    """Round 1, position 1 replaced by the target's own top choice (a one-hot proposal,
    accepted with probability p(y)), at a seed where it is accepted."""
    for prompt in PROMPTS:
        for seed in SEEDS:
            state = replace(base, prompt=prompt, seed=seed)
            try:
                session = SpeculativeSession(pair, prompt, state.config())
            except Exception:  # noqa: BLE001
                break
            session.propose()
            if not session.drafts:
                break
            top = session.target_preview(top_n=2)[0]
            token = top[0].id if top[0].id != session.drafts[0] else top[1].id
            session.edit_draft(1, token)
            check = session.verify().checks[0]
            if check.status == A and check.accept_prob < 1.0:
                return replace(state, round=0, phase="commit", edits=((0, 1, token),))
    return None


def find_scenarios(pair: ModelPair, base: LessonState | None = None) -> Iterator[Found]:
    """Each scenario of :data:`SCENARIOS`, found on ``pair`` (a generator, so a caller can
    show progress). ``base`` gives the page, language and pair the states carry."""
    base = replace(base or LessonState(), pair=pair.name, round=0, phase="propose", edits=(),
                   cont=(), max_new_tokens=TOKENS, drafter="model", top_k=0, top_p=1.0,
                   draft_method="probabilistic", page="step_through")  # fmt: skip
    greedy = replace(base, gamma=4, temperature=0.0)
    sampled = replace(base, gamma=4, temperature=1.0)
    yield Found("first_error_3", _search_records(
        pair, greedy, PROMPTS, SEEDS, lambda r: r.statuses == (A, A, R, D)))  # fmt: skip
    yield Found("first_error_1", _search_records(
        pair, greedy, PROMPTS, SEEDS, lambda r: r.statuses == (R, D, D, D)))  # fmt: skip
    yield Found("all_accepted", _search_records(
        pair, greedy, PROMPTS, SEEDS,
        lambda r: r.statuses == (A, A, A, A) and r.kind == "bonus"))  # fmt: skip
    yield Found("sampled_rejection", _search_records(
        pair, sampled, PROMPTS, SEEDS, lambda r: r.statuses == (A, R, D, D)))  # fmt: skip
    yield Found("one_hot_edit", _one_hot_edit(pair, sampled))
    yield Found("eos_cut", _search_records(
        pair, replace(sampled, gamma=6), PROMPTS, SEEDS,
        lambda r: C in r.statuses and r.accepted >= 1))  # fmt: skip
    yield Found("lookup_run", _search_records(
        pair, replace(greedy, gamma=6, drafter="ngram"), REPETITIVE, SEEDS,
        lambda r: r.accepted >= 4))  # fmt: skip
