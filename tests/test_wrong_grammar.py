"""A grammar matcher done wrong, on the pair (lessons/wrong_grammar.py): the matcher left
un-rolled-back after a rejected round (the drafted end of text it accepted terminates it),
and the engine's own rollback of caches, matcher and penalty counts together."""

from __future__ import annotations

from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec, GrammarState, compile_grammar
from specdec_core.lessons.wrong_grammar import grammar_no_rollback, rollback_moment


def test_no_rollback_short_answer_terminates_the_stale_matcher(embedded_pair):
    """Greedy, γ = 4: the draft proposes ' no', '.', EOS, EOS; the target rejects ' no'
    and commits ' y'. The stale matcher accepted the drafted EOS: at the first position
    after the round it allows 0 tokens where the rolled-back one allows 2 ('e', 'es')."""
    pair = embedded_pair
    res = grammar_no_rollback(pair, "short_answer")
    assert res is not None
    decode = pair.tokenizer.decode
    assert [decode([i]) for i in res.drafts] == [" no", ".", "<|endoftext|>", "<|endoftext|>"]
    assert (res.round_index, res.accepted, decode([res.correction])) == (0, 0, " y")
    assert res.start == 1 and res.first_diff == 1
    assert (res.correct_allowed, res.stale_allowed) == (2, 0)
    assert sorted(decode([i]) for i in res.only_correct) == ["e", "es"]
    assert res.stale_terminated and res.fresh_equal
    assert decode(list(res.generated)) == " yes!<|endoftext|>"
    # the rolled-back matcher at the first differing position is a fresh one fed the text
    spec = GrammarSpec(*GRAMMAR_PRESETS["short_answer"])
    fresh = GrammarState(compile_grammar(pair.tokenizer, pair.vocab_size, spec), pair.vocab_size)
    fresh.sync_to(list(res.generated[: res.first_diff]))
    assert int(fresh.allowed().sum()) == res.correct_allowed


def test_no_rollback_json_differs_at_once(embedded_pair):
    """json_person: the target keeps 3 of '{', '"', 'n', 'a' and commits 'am'; the stale
    matcher (after 'a') refuses 'am' and allows 'm'/'me' where the correct one allows 'e'."""
    res = grammar_no_rollback(embedded_pair, "json_person")
    assert res is not None
    decode = embedded_pair.tokenizer.decode
    assert (res.accepted, decode([res.correction]), res.first_diff) == (3, "am", 4)
    assert (res.correct_allowed, res.stale_allowed) == (1, 2)
    assert res.stale_refused[0] == 3 and not res.stale_terminated and res.fresh_equal


def test_the_engine_rolls_back_every_state_together(embedded_pair):
    """Speaker-line grammar and a presence penalty, greedy: round 2 rejects draft 2 of 4.
    The verify forward advances the target's cache, the matcher and the penalty counts
    through all 4 drafts; the commit brings all of them back to the committed text."""
    m = rollback_moment(embedded_pair, "speaker_line")
    assert m is not None
    assert (m.round_index, m.gamma, m.accepted) == (1, 4, 1)
    b, v, c = m.before, m.verified, m.committed
    gb, gv, gc = b.processors.grammar, v.processors.grammar, c.processors.grammar
    assert (gb.accepted_tokens, gv.accepted_tokens, gc.accepted_tokens) == (5, 9, 7)
    assert gv.accepted_tokens == gb.accepted_tokens + m.gamma
    assert gc.accepted_tokens == gb.accepted_tokens + m.accepted + 1
    assert (b.committed_len, c.committed_len) == (20, 22)
    assert v.target_kv_len == b.committed_len + m.gamma  # fed the committed rest + drafts
    assert c.target_kv_len == c.committed_len - 1 and c.draft_kv_len == c.committed_len - 1
    assert v.processors.length == b.committed_len + m.gamma
    assert c.processors.length == c.committed_len
    assert c.processors.penalty.distinct == b.processors.penalty.distinct  # drafts gone
