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

from specdec_core.core.models import ModelPair
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import RoundRecord
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.prompts import ENGLISH, prompts_for

A, R, D, C = "accepted", "rejected", "discarded", "cut"

#: The English pair's prompts tried in order, and its repetitive ones (prompt lookup); a
#: pair reads its own (:func:`specdec_core.lessons.prompts.prompts_for`).
PROMPTS = ENGLISH.scenarios
REPETITIVE = ENGLISH.repetitive
SCENARIOS = (
    "first_error_3",
    "first_error_1",
    "all_accepted",
    "sampled_rejection",
    "one_hot_edit",
    "eos_cut",
    "lookup_run",
)
SEEDS = range(40)
TOKENS = 48
#: Rounds screened per seed at temperature > 0: another seed is as likely a try as a later
#: round, and a moment in an early round replays sooner when the link is opened.
SAMPLED_ROUNDS = 6


@dataclass(frozen=True)
class Found:
    """A scenario's state on a pair (``None`` when the bounded search found none)."""

    key: str
    state: LessonState | None


Want = Callable[[RoundRecord], bool]


class _Matcher:
    """The ``until`` of one candidate run (:func:`generate.generate`): notes, for every
    scenario still missing, the first round whose record matches, and stops the run once
    none is missing (or after ``max_rounds`` rounds)."""

    def __init__(
        self, state: LessonState, wants: dict[str, Want], found: dict, max_rounds: int | None
    ) -> None:
        self.state, self.found, self.rounds, self.max_rounds = state, found, 0, max_rounds
        self.left = {k: want for k, want in wants.items() if found[k] is None}

    def __call__(self, record: RoundRecord) -> bool:
        for key, want in self.left.items():
            if self.found[key] is None and want(record):
                self.found[key] = replace(self.state, round=self.rounds, phase="commit")
        self.rounds += 1
        if self.max_rounds is not None and self.rounds >= self.max_rounds:
            return True
        return all(self.found[k] is not None for k in self.left)


def _search_records(
    pair: ModelPair,
    base: LessonState,
    prompts: tuple[str, ...],
    seeds: range,
    wants: dict[str, Want],
) -> dict[str, LessonState | None]:
    """For each of ``wants``: the first (prompt, seed, round) whose fast-path record
    matches, as a state stopped after Verify of that round (the fast path makes the step
    machine's records). The wants share ``base``'s settings, so one run serves them all,
    and a run stops at the round where the last one still missing is found; at
    temperature > 0 a seed's run stops after :data:`SAMPLED_ROUNDS` rounds."""
    max_rounds = None if base.temperature == 0.0 else SAMPLED_ROUNDS
    found: dict[str, LessonState | None] = dict.fromkeys(wants)
    for prompt in prompts:
        for seed in seeds:
            if all(v is not None for v in found.values()):
                return found
            state = replace(base, prompt=prompt, seed=seed)
            drafter = make_named_drafter(pair, state.drafter)
            until = _Matcher(state, wants, found, max_rounds)
            try:
                generate(pair, prompt, state.config(), drafter=drafter, until=until)
            except Exception:  # noqa: BLE001 - a prompt this pair cannot take: try the next
                break
            if base.temperature == 0.0:
                break  # greedy: every seed gives the same run
    return found


def _one(
    pair: ModelPair, base: LessonState, prompts: tuple[str, ...], key: str, want: Want
) -> Found:
    return Found(key, _search_records(pair, base, prompts, SEEDS, {key: want})[key])


def _one_hot_edit(
    pair: ModelPair, base: LessonState, prompts: tuple[str, ...]
) -> LessonState | None:
    """Round 1, position 1 replaced by the target's own top choice (a one-hot proposal,
    accepted with probability p(y)), at a seed where it is accepted."""
    for prompt in prompts:
        for seed in SEEDS:
            state = replace(base, prompt=prompt, seed=seed)
            try:
                session = SpeculativeSession(pair, prompt, state.config())
            except Exception:  # noqa: BLE001
                break
            session.propose()
            if not session.steps.drafts:
                break
            top = session.steps.target_preview(top_n=2)[0]
            token = top[0].id if top[0].id != session.steps.drafts[0] else top[1].id
            session.steps.edit_draft(1, token)
            check = session.verify().checks[0]
            if check.status == A and check.accept_prob < 1.0:
                return replace(state, round=0, phase="commit", edits=((0, 1, token),))
    return None


def find_scenarios(pair: ModelPair, base: LessonState | None = None) -> Iterator[Found]:
    """Each scenario of :data:`SCENARIOS`, found on ``pair`` (a generator, so a caller can
    show progress). ``base`` gives the page, language and pair the states carry; the
    prompts are the pair's own (:func:`~specdec_core.lessons.prompts.prompts_for`)."""
    texts = prompts_for(pair.name)
    base = replace(
        base or LessonState(),
        pair=pair.name,
        round=0,
        phase="propose",
        edits=(),
        cont=(),
        max_new_tokens=TOKENS,
        drafter="model",
        top_k=0,
        top_p=1.0,
        draft_method="probabilistic",
        page="step_through",
    )
    greedy = replace(base, gamma=4, temperature=0.0)
    sampled = replace(base, gamma=4, temperature=1.0)
    greedy_found = _search_records(
        pair,
        greedy,
        texts.scenarios,
        SEEDS,
        {
            "first_error_3": lambda r: r.statuses == (A, A, R, D),
            "first_error_1": lambda r: r.statuses == (R, D, D, D),
            "all_accepted": lambda r: r.statuses == (A, A, A, A) and r.kind == "bonus",
        },
    )
    for key, state in greedy_found.items():
        yield Found(key, state)
    yield _one(
        pair, sampled, texts.scenarios, "sampled_rejection", lambda r: r.statuses == (A, R, D, D)
    )
    yield Found("one_hot_edit", _one_hot_edit(pair, sampled, texts.scenarios))
    yield _one(
        pair,
        replace(sampled, gamma=6),
        texts.scenarios,
        "eos_cut",
        lambda r: C in r.statuses and r.accepted >= 1,
    )
    yield _one(
        pair,
        replace(greedy, gamma=6, drafter="ngram"),
        texts.repetitive,
        "lookup_run",
        lambda r: r.accepted >= 4,
    )
