"""A grammar matcher **not rolled back**, done wrong on purpose on the live pair — as a
lesson, never as the app's behaviour (the engine rolls the grammar back with the caches:
``engine/rounds.py``).

* :func:`grammar_no_rollback` — a real round on the pair under a grammar preset where a
  draft is rejected; the matcher that verification advanced through the drafts is *not*
  rolled back (it is fed the committed tokens after it, as a buggy engine would), and its
  masks are compared position by position with the correctly rolled-back matcher and with
  a fresh matcher fed the committed text.
* :func:`rollback_moment` — the same moment in the engine's own chain session: the
  processors' state before verify, after the verify forward and after commit.

It drives the engine's own ``propose`` / ``verify`` / ``rollback``. Pure: no
streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec, GrammarState, compile_grammar
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import ModelPair
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.core.processors import make_processors
from specdec_core.core.sampling import SamplingConfig
from specdec_core.drafters.model import ModelDrafter
from specdec_core.engine.chain.round import (
    ChainContext,
    apply_round,
    decide_round,
    propose,
    verify,
)
from specdec_core.engine.rounds import StopRule, round_stream

#: The grammar lesson's prompt: the generated text must be a speaker line.
GRAMMAR_PROMPT = "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\n\n"


@dataclass(frozen=True)
class NoRollback:
    """One round on the pair under a grammar where a draft was rejected, and what a matcher
    left un-rolled-back does afterwards.

    Attributes:
        round_index: the round (0-based). drafts: ``[γ]`` drafted ids; accepted: how many
        the target kept; correction: the token it committed instead.
        generated: the committed generated ids (after the round and ``horizon`` more).
        start: generated tokens committed when the round ended (first compared position).
        first_diff: the first position ``j ≥ start`` (generated tokens before it) where the
        stale matcher's mask differs from the rolled-back one (``None``: never within
        ``generated``). correct_allowed / stale_allowed: the two masks' allowed counts
        there. stale_refused: positions whose committed token the stale matcher refused
        ("failed to advance"). stale_terminated: it ended before the text did.
        fresh_equal: the rolled-back matcher's mask equals a fresh matcher fed the
        committed text at every compared position.
        only_correct / only_stale: up to 5 ids allowed by one mask and not the other at
        ``first_diff``.
    """

    preset: str
    round_index: int
    drafts: tuple[int, ...]
    accepted: int
    correction: int
    generated: tuple[int, ...]
    start: int
    first_diff: int | None
    correct_allowed: int
    stale_allowed: int
    stale_refused: tuple[int, ...]
    stale_terminated: bool
    fresh_equal: bool
    only_correct: tuple[int, ...]
    only_stale: tuple[int, ...]


def _feed(state: GrammarState, token: int) -> bool:
    """A buggy engine's step: accept ``token`` without any rollback (``False``: refused)."""
    if state.matcher.is_terminated() or not state.matcher.accept_token(int(token)):
        return False
    state.ids.append(int(token))
    return True


def grammar_no_rollback(
    pair: ModelPair,
    preset: str = "speaker_line",
    prompt: str = GRAMMAR_PROMPT,
    gamma: int = 4,
    max_rounds: int = 12,
    horizon: int = 8,
) -> NoRollback | None:
    """Greedy rounds (the chain round's ``propose`` / ``verify`` / ``apply_round``, with the
    grammar) until one rejects a draft, then ``horizon`` more committed tokens; the masks of
    the stale matcher (advanced through the round's drafts, never rolled back, then fed the
    correction and the later tokens) against the rolled-back one. ``None`` if no round in
    ``max_rounds`` rejected a draft.

    Raises:
        ConfigError: the preset does not compile or the prompt cannot start it.
    """
    spec = GrammarSpec(*GRAMMAR_PRESETS[preset])
    ids = list(pair.tokenizer.encode(prompt))
    L, V = len(ids), pair.vocab_size
    processors = make_processors(pair.tokenizer, V, PenaltyConfig(), spec, L, ids)
    compiled = compile_grammar(pair.tokenizer, V, spec)
    target, drafter = ModelCache(pair.target), ModelDrafter(pair.draft)
    drafter.attach(target)
    n = pair.context_length  # no budget: end of text (or the context) stops the run
    stop = StopRule(pair.eos_token_id, n, n)
    greedy = SamplingConfig(temperature=0.0)
    ctx = ChainContext(target, drafter, greedy, processors, stop=stop, prompt_len=L)
    committed = list(ids)
    found: tuple[int, list[int], int, int, int] | None = None
    for r in range(max_rounds):
        if processors.grammar is not None and processors.grammar.matcher.is_terminated():
            break
        draft = propose(ctx, committed, gamma, round_stream(0, r, "draft"))
        drafts = draft.ids.tolist()
        checked = verify(ctx, committed, drafts, draft.probs, round_stream(0, r, "verify"))
        record, reason = decide_round(ctx, committed, gamma, drafts, checked)
        verdict = checked.verdict
        if found is None and verdict.accepted < len(drafts):
            found = (r, drafts, verdict.accepted, verdict.next_token, len(committed) - L)
        committed, _ = apply_round(ctx, committed, record)  # the matcher, both caches back
        if reason is not None:
            break
        if found is not None and len(committed) - L - found[4] >= horizon:
            break
    if found is None:
        return None
    return _compare(compiled, V, preset, found, committed[L:])


def _compare(compiled, V, preset, found, generated) -> NoRollback:
    """Replay both matchers along ``generated`` from the end of the rejected round: the
    stale one stands where verification left it (after every draft), then is fed the
    correction and each later committed token; the correct one is synced to the text."""
    r, drafts, accepted, correction, before = found
    start = before + accepted + 1
    stale = GrammarState(compiled, V)
    stale.sync_to(generated[:before] + drafts)
    refused = [] if _feed(stale, correction) else [start - 1]
    correct = GrammarState(compiled, V)
    correct.sync_to(generated[:start])
    first_diff, fresh_equal, allowed = None, True, (0, 0, (), ())
    for j in range(start, len(generated) + 1):
        fresh = GrammarState(compiled, V)
        fresh.sync_to(generated[:j])
        ok_mask, stale_mask = correct.allowed(), stale.allowed()
        fresh_equal = fresh_equal and bool(torch.equal(ok_mask, fresh.allowed()))
        if first_diff is None and not torch.equal(ok_mask, stale_mask):
            first_diff = j
            only_ok = torch.nonzero(ok_mask & ~stale_mask)[:5, 0].tolist()
            only_stale = torch.nonzero(stale_mask & ~ok_mask)[:5, 0].tolist()
            allowed = (int(ok_mask.sum()), int(stale_mask.sum()), only_ok, only_stale)
        if j < len(generated):
            correct.sync_to(generated[: j + 1])
            if not _feed(stale, generated[j]):
                refused.append(j)
    return NoRollback(
        preset=preset,
        round_index=r,
        drafts=tuple(drafts),
        accepted=accepted,
        correction=correction,
        generated=tuple(generated),
        start=start,
        first_diff=first_diff,
        correct_allowed=allowed[0],
        stale_allowed=allowed[1],
        stale_refused=tuple(refused),
        stale_terminated=bool(stale.matcher.is_terminated()),
        fresh_equal=fresh_equal,
        only_correct=tuple(allowed[2]),
        only_stale=tuple(allowed[3]),
    )


# ---------------------------------------------------------------- the rollback, live
@dataclass(frozen=True)
class RollbackMoment:
    """One real round of the engine (chain session, greedy, a grammar and a presence
    penalty) whose target rejected a draft: the state before verify, after the verify
    forward (advanced through the drafts) and after commit (rolled back).

    Attributes:
        gamma: drafts proposed. accepted: drafts kept; the rejection is at ``accepted + 1``.
        before / verified / committed: :class:`specdec_core.core.trace.KVState` with
        ``processors`` (grammar view, penalty view).
    """

    round_index: int
    gamma: int
    accepted: int
    before: object
    verified: object
    committed: object


def rollback_moment(
    pair: ModelPair,
    preset: str = "speaker_line",
    prompt: str = GRAMMAR_PROMPT,
    presence: float = 1.0,
    max_rounds: int = 12,
) -> RollbackMoment | None:
    """The first round (of at most ``max_rounds``) of a greedy chain session with the
    grammar ``preset`` and a presence penalty whose target rejects a draft; ``None`` when
    none does. The engine's own session (``engine/chain/session.py``), nothing faked."""
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.session import SpeculativeSession

    config = SessionConfig(
        gamma=4,
        temperature=0.0,
        max_new_tokens=48,
        presence_penalty=presence,
        grammar=GrammarSpec(*GRAMMAR_PRESETS[preset]),
    )
    session = SpeculativeSession(pair, prompt, config)
    for _ in range(max_rounds):
        if session.phase == "finished":
            return None
        session.run_round()
        last = session.history[-1]
        drafted = len(last.propose.drafted)
        if last.verify.accepted < drafted:
            return RollbackMoment(
                round_index=last.round_index,
                gamma=drafted,
                accepted=last.verify.accepted,
                before=last.verify.kv_before,
                verified=last.verify.kv_after,
                committed=last.commit.kv_after,
            )
    return None
