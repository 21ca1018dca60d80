"""Direct tests of ``lessons/tracefile.py`` on the embedded pair: a seeded session's trace
survives export → import and its lesson state replays the same rounds; the size bound is
exact; every malformed file is refused with its error code and reason; a tree trace is
refused (it is opened by its link)."""

from __future__ import annotations

import json

import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace_json import to_jsonable
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import replay, state_of, timeless_json
from specdec_core.lessons.tracefile import (
    FORMAT,
    MAX_TRACE_BYTES,
    VERSION,
    TraceFileError,
    export_json,
    export_tree_json,
    parse,
)

PROMPT = "ROMEO:\nBut soft, what light"
CONFIG = SessionConfig(gamma=4, temperature=1.0, seed=12, max_new_tokens=60)
BASE = LessonState(gamma=4, temperature=1.0, seed=12, max_new_tokens=60)


@pytest.fixture(scope="module")
def seeded(embedded_pair):
    """A sampled session after three rounds, its lesson state and its trace text."""
    session = SpeculativeSession(embedded_pair, PROMPT, CONFIG)
    session.run(max_rounds=3)
    state = state_of(session, BASE, PROMPT)
    return session, state, export_json(session, state)


def test_export_then_import_gives_the_same_trace_and_a_state_that_replays_it(embedded_pair, seeded):
    session, state, text = seeded
    back = parse(text.encode("utf-8"))
    assert back.pair == "embedded" and back.state == state
    assert (back.state.round, back.state.phase, back.state.seed) == (3, "propose", 12)
    assert back.prompt_ids == tuple(embedded_pair.tokenizer.encode(PROMPT))
    assert back.prompt_len == session.prompt_len == len(back.prompt_ids)
    assert len(back.rounds) == 3
    assert to_jsonable(back.rounds) == to_jsonable(session.history)
    # the imported state replays the very same rounds on the same pair ...
    out = replay(embedded_pair, back.state)
    assert out.problems == [] and out.session.round_index == 3
    assert timeless_json(out.session.history) == timeless_json(session.history)
    assert out.session.ids == session.ids
    # ... and exporting the replay gives the same file up to the wall-clock timings
    again = json.loads(export_json(out.session, back.state))
    assert timeless_json(again) == timeless_json(json.loads(text))


def test_the_size_bound_is_exact(seeded):
    text = seeded[2].encode("utf-8")
    assert len(text) < MAX_TRACE_BYTES == 5_000_000
    padded = text + b" " * (MAX_TRACE_BYTES - len(text))  # JSON allows trailing blanks
    assert len(parse(padded).rounds) == 3
    with pytest.raises(TraceFileError) as err:
        parse(padded + b" ")
    assert err.value.code == "trace_too_large" and err.value.params == {"limit_mb": 5}


def _doc(text: str, **changes) -> bytes:
    doc = {**json.loads(text), **changes}
    return json.dumps(doc).encode("utf-8")


def _without(text: str, name: str) -> bytes:
    doc = json.loads(text)
    del doc[name]
    return json.dumps(doc).encode("utf-8")


# columns: what the file is, its bytes (from the seeded trace), error code, params
BAD_FILES = [
    ("not-json", lambda t: b"{not json", "trace_malformed", {"why": "not_json"}),
    ("empty", lambda t: b"", "trace_malformed", {"why": "not_json"}),
    ("truncated", lambda t: t.encode()[:-1], "trace_malformed", {"why": "not_json"}),
    ("not-utf8", lambda t: b"\xff\xfe{}", "trace_malformed", {"why": "not_utf8"}),
    ("nested", lambda t: b"[" * 40 + b"]" * 40, "trace_malformed", {"why": "nested"}),
    ("a-list", lambda t: b"[1, 2]", "trace_malformed", {"why": "not_trace"}),
    ("other-format", lambda t: _doc(t, format="x"), "trace_malformed", {"why": "not_trace"}),
    (
        "other-version",
        lambda t: _doc(t, version=2),
        "trace_version",
        {"why": "version", "found": "2", "expected": VERSION},
    ),
    (
        "no-rounds",
        lambda t: _without(t, "rounds"),
        "trace_malformed",
        {"why": "missing_field", "field": "rounds"},
    ),
    (
        "bad-round",
        lambda t: _doc(t, rounds=[{"round_index": 0}]),
        "trace_malformed",
        {"why": "bad_field", "field": "rounds"},
    ),
    (
        "bad-prompt-ids",
        lambda t: _doc(t, prompt_ids=["a"]),
        "trace_malformed",
        {"why": "bad_field", "field": "prompt_ids"},
    ),
    (
        "prompt-len-0",
        lambda t: _doc(t, prompt_len=0),
        "trace_malformed",
        {"why": "bad_field", "field": "prompt_len"},
    ),
    (
        "prompt-len-beyond-ids",
        lambda t: _doc(t, prompt_len=10**6),
        "trace_malformed",
        {"why": "bad_field", "field": "prompt_len"},
    ),
]


@pytest.mark.parametrize(
    ("name", "make", "code", "params"), BAD_FILES, ids=[b[0] for b in BAD_FILES]
)
def test_a_malformed_file_is_refused_with_its_code_and_reason(seeded, name, make, code, params):
    with pytest.raises(TraceFileError) as err:
        parse(make(seeded[2]))
    assert err.value.code == code, name
    assert err.value.params == params, name


def test_a_bad_lesson_state_opens_the_trace_read_only(seeded):
    session, _, text = seeded
    back = parse(_doc(text, lesson={"gamma": 999}))
    assert back.state is None  # no state to replay: read-only
    assert to_jsonable(back.rounds) == to_jsonable(session.history)


def test_a_tree_trace_is_refused(embedded_pair):
    session = TreeSession(embedded_pair, PROMPT, CONFIG, None, (2, 2, 1))
    session.run_round()
    state = state_of(session, BASE, PROMPT)
    text = export_tree_json(session, state)
    doc = json.loads(text)
    assert (doc["format"], doc["version"], doc["verify"]) == (FORMAT, VERSION, "tree")
    # a round is flat, each value once: one tree (final states), three KV tables
    [done] = doc["rounds"]
    assert sorted(done) == [
        "compaction",
        "draft_ms",
        "kv_after",
        "kv_before",
        "kv_verified",
        "mask",
        "record",
        "round_index",
        "stop_reason",
        "tree",
        "verify_ms",
    ]
    r = session.history[0]
    record, tree = done["record"], done["tree"]
    assert done["round_index"] == 0 and tree["path"] == record["path"] == list(r.record.path)
    assert [n["state"] for n in tree["nodes"]] == list(r.record.states)  # after verify
    assert record["tokens"] == [n["token"]["id"] for n in tree["nodes"]]
    n, before = len(record["tokens"]), done["kv_before"]["committed_len"]
    # the prompt is fed with the tree: no KV before the round, all of it after verify
    assert (done["kv_before"]["target_kv_len"], done["kv_verified"]["target_kv_len"]) == (0, before)
    assert done["kv_after"]["committed_len"] == before + len(record["appended"])
    slots = done["compaction"]["slots"]
    assert done["compaction"]["applied"] is True and len(slots) == before + n
    assert len(done["mask"]["positions"]) == n and done["stop_reason"] is None
    assert (done["draft_ms"], done["verify_ms"]) == (r.propose.draft_ms, r.verify.verify_ms)
    for data in (text.encode("utf-8"), _doc(text, version=0), _doc(text, version=2)):
        with pytest.raises(TraceFileError) as err:  # any version: open its link instead
            parse(data)
        assert err.value.code == "trace_tree" and err.value.params == {}
