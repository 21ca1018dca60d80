"""The live-class room store: the same cases on both backends, SQLite in a temp
folder and Redis on a ``redis-server`` the fixture starts on a free loopback port.

Create, join, publish (the version bumps), the version poll, answer, change an answer,
counts, reveal (answers closed after), a second question clears the counts, expiry (an
injected clock), bounds, wrong keys, one message for unknown / malformed / expired codes,
a student who has not joined, two rooms that never see each other's state or answers, two
store objects on one storage (two replicas), 60 threads answering at once."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specdec_core.lessons.link import LessonState, encode
from specdec_core.server import room_store
from specdec_core.server.room_types import (
    CODE_ALPHABET,
    MAX_STATE_BYTES,
    MESSAGES,
    Question,
    RoomError,
    question_error,
)
from specdec_core.server.rooms import RoomStore
from specdec_core.server.rooms_sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[1]
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
T0 = 1_900_000_000.0


class Clock:
    """An injected clock: Unix seconds that move only when told."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url():
    """A throw-away ``redis-server`` (no persistence) on a free loopback port."""
    if not os.path.exists(REDIS_SERVER):
        pytest.skip(
            "redis-server is not installed (Debian: apt-get install redis-server): "
            "the Redis room store is not tested"
        )
    import redis

    port = _free_port()
    proc = subprocess.Popen(
        [
            REDIS_SERVER,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    client.close()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(params=["sqlite", "redis"])
def make(request, tmp_path):
    """``make(**kwargs)``: a new store object of the backend; every object made by one
    ``make`` shares one storage (one SQLite file / one Redis database), like replicas."""
    if request.param == "sqlite":
        path = tmp_path / "rooms.sqlite3"
        factory = lambda **kw: SQLiteStore(path, **kw)  # noqa: E731
        factory.target = ("SQLiteStore", str(path))
        return factory
    import redis

    from specdec_core.server.rooms_redis import RedisStore

    url = request.getfixturevalue("redis_url")
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    factory = lambda **kw: RedisStore(url, **kw)  # noqa: E731
    factory.target = ("RedisStore", url)
    return factory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(make, clock) -> RoomStore:
    return make(clock=clock, ttl_s=3600)


def _code(exc: pytest.ExceptionInfo) -> str:
    return exc.value.code


def _state(**fields) -> dict[str, str]:
    return encode(LessonState(**fields))


def _question(qid="q1", n=2, kind="accept") -> Question:
    return Question(
        qid=qid,
        kind=kind,
        params=(("position", "2"),),
        choices=tuple(f"choice {i}" for i in range(n)),
    )


def _stored_text(store: RoomStore) -> str:
    """Everything the backend holds, as text."""
    if isinstance(store, SQLiteStore):
        with store.file.connection() as db:
            return "\n".join(db.iterdump())
    client = store.client
    parts = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        value = {
            "hash": client.hgetall,
            "set": client.smembers,
            "zset": lambda k: client.zrange(k, 0, -1),
            "string": client.get,
        }[kind](key)
        parts.append(f"{key} {value}")
    return "\n".join(parts)


# ---------------------------------------------------------------- the round trip
def test_create_gives_a_short_code_a_secret_key_and_an_empty_room(store, clock):
    code, key = store.create()
    assert len(code) == 6 and set(code) <= set(CODE_ALPHABET)
    assert len(key) == 32  # token_urlsafe(24)
    view = store.view(code)
    assert (view.code, view.version, view.page, view.state) == (code, 1, "step", {})
    assert (view.question, view.counts, view.answered, view.students) == (None, (), 0, 0)
    assert view.expires_at == T0 + 3600
    assert store.version(code) == 1
    stored = _stored_text(store)
    assert code in stored and key not in stored  # only the key's hash is kept
    codes = {store.create()[0] for _ in range(5)}
    assert len(codes | {code}) == 6


def test_publish_bumps_the_version_and_followers_read_the_state(store):
    code, key = store.create()
    state = _state(prompt="Once upon", round=2, phase="verify", gamma=3)
    assert store.publish(code, key, "step", state) == 2
    assert store.version(code) == 2
    view = store.view(code)
    assert (view.version, view.page, view.state) == (2, "step", state)
    assert store.publish(code, key, "step", state) == 2  # nothing changed: no bump
    lessons = {**_state(page="lessons", round=1), "chapter": "3"}
    assert store.publish(code, key, "lessons", lessons) == 3
    assert store.view(code).state == lessons and store.view(code).page == "lessons"
    assert store.version(code) == store.view(code).version == 3


def test_a_state_is_stored_verbatim_through_parameters(store):
    """Quotes, SQL, Redis-looking and Chinese text come back exactly as published."""
    code, key = store.create()
    hostile = {
        "s": "x'); DROP TABLE rooms;--",
        "lang": 'zh"\\',
        "note": "specdec:room:*:meta 投机解码 %s {0} $1",
    }
    store.publish(code, key, "step", hostile)
    assert store.view(code).state == hostile
    assert store.version(code) == 2


def test_join_is_idempotent_and_counts_students(store):
    code, _ = store.create()
    store.join(code, "s-1")
    assert store.version(code) == 2 and store.view(code).students == 1
    store.join(code, "s-1")  # a reload of the same browser session: no change
    assert store.version(code) == 2 and store.view(code).students == 1
    store.join(code.lower(), "s_2")  # the code as a student may type it
    assert store.version(code) == 3 and store.view(code).students == 2


def test_answers_change_until_the_reveal_and_are_counted_per_choice(store):
    code, key = store.create()
    for s in ("a", "b", "c"):
        store.join(code, s)
    v = store.ask(code, key, _question("q1", 3))
    assert v == 5
    view = store.view(code)
    assert view.question == _question("q1", 3) and view.counts == (0, 0, 0)
    store.answer(code, "a", "q1", 0)
    store.answer(code, "b", "q1", 2)
    store.answer(code, "c", "q1", 0)
    view = store.view(code)
    assert (view.counts, view.answered, view.version) == ((2, 0, 1), 3, 8)
    store.answer(code, "a", "q1", 1)  # changed
    assert store.view(code).counts == (1, 1, 1) and store.version(code) == 9
    store.answer(code, "a", "q1", 1)  # the same again: nothing changed
    assert store.version(code) == 9
    assert store.reveal(code, key, "q1", 2) == 10
    view = store.view(code)
    assert view.question.revealed and view.question.correct == 2
    assert view.question.choices == ("choice 0", "choice 1", "choice 2")
    assert view.counts == (1, 1, 1)
    with pytest.raises(RoomError) as exc:  # answers are closed after the reveal
        store.answer(code, "b", "q1", 0)
    assert _code(exc) == "room_answer"
    assert store.view(code).counts == (1, 1, 1) and store.version(code) == 10
    assert store.reveal(code, key, "q1", 2) == 10  # a second click: no change
    with pytest.raises(RoomError) as exc:
        store.reveal(code, key, "q1", 0)
    assert _code(exc) == "room_question"


def test_asking_hides_the_answer_and_a_second_question_clears_the_counts(store):
    code, key = store.create()
    store.join(code, "a")
    leaked = Question("q1", "correction", (("position", "3"),), ("the", "a"), 1, True)
    store.ask(code, key, leaked)
    shown = store.view(code).question
    assert (shown.correct, shown.revealed) == (None, False)  # nothing before the reveal
    store.answer(code, "a", "q1", 1)
    assert store.view(code).counts == (0, 1)
    store.ask(code, key, _question("q2", 4, kind="commit_count"))
    view = store.view(code)
    assert view.question.qid == "q2" and view.counts == (0, 0, 0, 0) and view.answered == 0
    with pytest.raises(RoomError) as exc:  # the old question is gone
        store.answer(code, "a", "q1", 0)
    assert _code(exc) == "room_answer"
    store.answer(code, "a", "q2", 3)
    assert store.view(code).counts == (0, 0, 0, 1)
    with pytest.raises(RoomError) as exc:
        store.reveal(code, key, "q1", 0)  # not the open question
    assert _code(exc) == "room_question"
    with pytest.raises(RoomError) as exc:
        store.reveal(code, key, "q2", 4)  # not one of its choices
    assert _code(exc) == "room_question"
    assert store.reveal(code, key, "q2", None) == store.version(code)  # no right answer
    assert store.view(code).question.revealed


def test_answer_of_reads_back_a_students_own_answer_after_a_reload(store):
    code, key = store.create()
    store.join(code, "a")
    store.join(code, "b")
    store.ask(code, key, _question("q1", 3))
    assert store.answer_of(code, "a", "q1") is None  # not answered yet
    store.answer(code, "a", "q1", 2)
    assert store.answer_of(code, "a", "q1") == 2
    assert store.answer_of(code, "b", "q1") is None  # another student's stays theirs
    store.answer(code, "a", "q1", 0)  # changed
    assert store.answer_of(code, "a", "q1") == 0
    store.reveal(code, key, "q1", 0)
    assert store.answer_of(code, "a", "q1") == 0  # still there after the reveal
    assert store.answer_of(code, "a", "q9") is None  # not the room's question
    store.ask(code, key, _question("q2", 2))
    assert store.answer_of(code, "a", "q1") is None  # the old question's answers are gone
    assert store.answer_of(code, "a", "q2") is None
    for student, qid, want in (
        ("stranger", "q2", "room_student"),
        ("a b", "q2", "room_student"),
        ("a", "q 2", "room_answer"),
        ("a", None, "room_answer"),
    ):
        with pytest.raises(RoomError) as exc:
            store.answer_of(code, student, qid)
        assert _code(exc) == want
    with pytest.raises(RoomError) as exc:
        store.answer_of("ZZZZZZ", "a", "q2")
    assert _code(exc) == "room_unknown"


@pytest.mark.parametrize("choice", [2, -1, 8, True, "0", 1.0, None])
def test_an_answer_must_be_one_of_the_questions_own_choices(store, choice):
    code, key = store.create()
    store.join(code, "a")
    store.ask(code, key, _question("q1", 2))
    with pytest.raises(RoomError) as exc:
        store.answer(code, "a", "q1", choice)
    assert _code(exc) == "room_answer"
    assert store.view(code).counts == (0, 0)


def test_no_answer_before_a_question_or_to_a_malformed_qid(store):
    code, key = store.create()
    store.join(code, "a")
    for qid in ("q1", "", "x" * 41, "q 1", None):
        with pytest.raises(RoomError) as exc:
            store.answer(code, "a", qid, 0)
        assert _code(exc) == "room_answer"


def test_a_student_must_join_before_answering_and_ids_are_checked(store):
    code, key = store.create()
    store.ask(code, key, _question())
    with pytest.raises(RoomError) as exc:
        store.answer(code, "stranger", "q1", 0)
    assert _code(exc) == "room_student"
    for bad in ("", "a" * 65, "a b", "x'); DROP TABLE students;--", "specdec:*", None, 7):
        with pytest.raises(RoomError) as exc:
            store.join(code, bad)
        assert _code(exc) == "room_student"
    view = store.view(code)
    assert (view.students, view.answered) == (0, 0)


# ---------------------------------------------------------------- expiry
def test_a_room_expires_after_the_teachers_last_change(make, clock):
    store = make(clock=clock, ttl_s=60)
    code, key = store.create()
    store.join(code, "a")
    clock.advance(50)
    store.publish(code, key, "step", _state(round=1))  # teacher activity: 60 s more
    assert store.view(code).expires_at == clock.now + 60
    clock.advance(50)
    store.join(code, "b")  # a student's join does not keep the room alive
    assert store.version(code) == 4
    clock.advance(10)
    for call in (
        lambda: store.version(code),
        lambda: store.view(code),
        lambda: store.join(code, "c"),
        lambda: store.publish(code, key, "step", {}),
    ):
        with pytest.raises(RoomError) as exc:
            call()
        assert _code(exc) == "room_unknown"
    other, _ = store.create()  # create purges first
    assert store.purge() == 0
    clock.advance(61)
    assert store.purge() == 1
    with pytest.raises(RoomError):
        store.version(other)


def test_purge_removes_only_expired_rooms(make, clock):
    store = make(clock=clock, ttl_s=100)
    old, _ = store.create()
    clock.advance(50)
    young, _ = store.create()
    assert store.purge(now=T0 + 120) == 1
    assert store.version(young) == 1
    assert store.purge(now=T0 + 120) == 0
    assert store.purge(now=T0 + 151) == 1


# ---------------------------------------------------------------- bounds
def test_the_number_of_rooms_is_bounded(make, clock):
    store = make(clock=clock, ttl_s=60, max_rooms=2)
    store.create()
    clock.advance(30)
    store.create()
    with pytest.raises(RoomError) as exc:
        store.create()
    assert _code(exc) == "rooms_full" and exc.value.params == {"limit": 2}
    clock.advance(31)  # the first one has expired: its place is free again
    store.create()


def test_the_number_of_students_is_bounded(make, clock):
    store = make(clock=clock, max_students=2)
    code, _ = store.create()
    store.join(code, "a")
    store.join(code, "b")
    with pytest.raises(RoomError) as exc:
        store.join(code, "c")
    assert _code(exc) == "room_full" and exc.value.params == {"limit": 2}
    store.join(code, "a")  # a student already in may reload
    assert store.view(code).students == 2


@pytest.mark.parametrize(
    "page, state",
    [
        ("step", {"s": "x" * (MAX_STATE_BYTES + 1)}),
        ("step", {f"k{i}": "x" * 600 for i in range(15)}),  # 9 KB in all
        ("speed", {"v": "2"}),  # not a page the class follows
        ("step", {"v": {"nested": "1"}}),
        ("step", {"v": 2}),
        ("step", {"bad key": "1"}),
        ("step", {"s": "line\nbreak"}),
        ("step", {"s": "\u202eevil"}),  # a bidi override
        ("step", [("v", "2")]),
        ("step", {f"k{i}": "1" for i in range(17)}),
    ],
)
def test_a_state_out_of_bounds_is_refused_and_the_room_unchanged(store, page, state):
    code, key = store.create()
    with pytest.raises(RoomError) as exc:
        store.publish(code, key, page, state)
    assert _code(exc) == "room_state" and exc.value.params == {"limit": MAX_STATE_BYTES}
    assert store.version(code) == 1 and store.view(code).state == {}


def test_a_state_just_under_the_bound_is_taken(store):
    code, key = store.create()
    state = {"s": "x" * (MAX_STATE_BYTES - len('{"s":""}'))}
    assert store.publish(code, key, "step", state) == 2
    assert store.view(code).state == state


@pytest.mark.parametrize(
    "fields",
    [
        {"choices": ("only one",)},
        {"choices": tuple(str(i) for i in range(9))},
        {"choices": ("x" * 41, "b")},
        {"choices": ("", "b")},
        {"choices": ("a\nb", "c")},
        {"choices": ("a\x00", "c")},
        {"kind": "free_text"},
        {"qid": "q 1"},
        {"qid": "q" * 41},
        {"params": (("position", "x" * 81),)},
        {"params": (("not a name", "1"),)},
        {"params": tuple((f"p{i}", "1") for i in range(9))},
        {"params": (("position", 2),)},
        {"correct": 2},
        {"correct": True},
        {"choices": "ab"},
        {"params": "ab"},
    ],
)
def test_a_bad_question_is_refused(fields):
    base = {"qid": "q1", "kind": "accept", "params": (), "choices": ("yes", "no")}
    with pytest.raises(RoomError) as exc:
        Question(**{**base, **fields})
    assert _code(exc) == "room_question"
    assert exc.value.params == {"low": 2, "high": 8, "chars": 40}


def test_a_question_takes_lists_and_a_mapping_and_ask_refuses_other_objects(store):
    q = Question("q1", "chapter", {"chapter": "2"}, ["a", "b", "投机"])
    assert q.params == (("chapter", "2"),) and q.choices == ("a", "b", "投机")
    code, key = store.create()
    store.ask(code, key, q)
    assert store.view(code).question == q
    with pytest.raises(RoomError) as exc:
        store.ask(code, key, {"qid": "q2"})
    assert _code(exc) == "room_question"


# ---------------------------------------------------------------- keys and codes
@pytest.mark.parametrize("bad_key", ["wrong", None, "", "x" * 200, "ключ"])
def test_only_the_teacher_key_changes_the_room(store, bad_key):
    code, key = store.create()
    store.join(code, "a")
    store.ask(code, key, _question())
    calls = [
        lambda k: store.publish(code, k, "step", _state(round=3)),
        lambda k: store.ask(code, k, _question("q9")),
        lambda k: store.reveal(code, k, "q1", 0),
        lambda k: store.close(code, k),
    ]
    for call in calls:
        with pytest.raises(RoomError) as exc:
            call(bad_key)
        assert _code(exc) == "room_key"
    view = store.view(code)
    assert view.version == 3 and view.state == {} and view.question == _question()
    store.close(code, key)
    with pytest.raises(RoomError) as exc:
        store.version(code)
    assert _code(exc) == "room_unknown"


def test_unknown_malformed_closed_and_expired_codes_give_one_message(make, clock):
    store = make(clock=clock, ttl_s=60)
    code, key = store.create()
    closed, closed_key = store.create()
    store.close(closed, closed_key)
    expired, _ = store.create()
    unknown = next(c for c in ("ZZZZZZ", "YYYYYY", "XXXXXX") if c not in (code, closed, expired))
    clock.advance(30)
    store.publish(code, key, "step", {"v": "2"})  # keeps this one alive
    clock.advance(31)
    errors = []
    bad_codes = [unknown, closed, expired, "ABCDE1", "ABCDEFG", "", None, 123, "A" * 1000,
                 "ABC*EF", "../../x"]  # fmt: skip
    for bad in bad_codes:
        for call in (
            lambda c: store.version(c),
            lambda c: store.view(c),
            lambda c: store.join(c, "a"),
            lambda c: store.answer(c, "a", "q1", 0),
            lambda c: store.publish(c, key, "step", {}),
            lambda c: store.close(c, key),
        ):
            with pytest.raises(RoomError) as exc:
                call(bad)
            errors.append((exc.value.code, str(exc.value), exc.value.params))
    assert {(c, m) for c, m, _ in errors} == {("room_unknown", MESSAGES["room_unknown"])}
    assert all(p == {} for _, _, p in errors)
    assert store.version(code) == 2  # the live room is untouched


# ---------------------------------------------------------------- isolation
def test_two_rooms_never_see_each_others_state_or_answers(store):
    a, key_a = store.create()
    b, key_b = store.create()
    store.publish(a, key_a, "step", _state(prompt="room A"))
    store.publish(b, key_b, "lessons", _state(prompt="room B", page="lessons"))
    store.join(a, "s1")
    store.join(b, "s2")
    store.ask(a, key_a, _question("q1", 2))
    store.ask(b, key_b, _question("q1", 3))  # the same qid in both
    store.answer(a, "s1", "q1", 1)
    store.answer(b, "s2", "q1", 2)
    with pytest.raises(RoomError) as exc:
        store.answer(b, "s1", "q1", 0)  # joined A, not B
    assert _code(exc) == "room_student"
    with pytest.raises(RoomError) as exc:
        store.publish(b, key_a, "step", {})  # A's key does not open B
    assert _code(exc) == "room_key"
    va, vb = store.view(a), store.view(b)
    assert va.state == _state(prompt="room A") and vb.state == _state(
        prompt="room B", page="lessons"
    )
    assert (va.counts, va.students) == ((0, 1), 1)
    assert (vb.counts, vb.students) == ((0, 0, 1), 1)
    store.reveal(a, key_a, "q1", 1)
    assert not store.view(b).question.revealed
    store.close(a, key_a)
    assert store.view(b).counts == (0, 0, 1)


def test_two_store_objects_on_one_storage_share_the_room(make, clock):
    """Two replicas: the teacher on one, students on the other, a teacher reload on a
    third (a new object: only the code and the key survive)."""
    one, two = make(clock=clock), make(clock=clock)
    code, key = one.create()
    two.join(code, "s1")
    one.ask(code, key, _question())
    two.answer(code, "s1", "q1", 1)
    assert one.view(code).counts == (0, 1)
    three = make(clock=clock)
    assert three.publish(code, key, "step", _state(round=4)) == 5
    assert two.version(code) == 5 and two.view(code).state == _state(round=4)


# ---------------------------------------------------------------- concurrency
def test_sixty_students_answering_at_once_are_all_counted(store):
    code, key = store.create()
    students = [f"student-{i}" for i in range(60)]
    _together(lambda s: store.join(code, s), students)
    assert store.view(code).students == 60
    v = store.ask(code, key, _question("q1", 4))
    _together(lambda s: store.answer(code, s, "q1", int(s.split("-")[1]) % 4), students)
    view = store.view(code)
    assert view.counts == (15, 15, 15, 15) and view.answered == 60
    assert view.version == v + 60  # every answer bumped it once
    _together(lambda s: store.answer(code, s, "q1", 0), students)  # everyone changes
    assert store.view(code).counts == (60, 0, 0, 0)


def test_concurrent_joins_stop_exactly_at_the_bound(make, clock):
    store = make(clock=clock, max_students=50)
    code, _ = store.create()
    results = _together(lambda s: store.join(code, s), [f"s{i}" for i in range(60)])
    refused = [r for r in results if isinstance(r, RoomError)]
    assert len(refused) == 10 and {r.code for r in refused} == {"room_full"}
    assert store.view(code).students == 50


_REPLICA = """
import sys
from specdec_core.server.rooms_redis import RedisStore
from specdec_core.server.rooms_sqlite import SQLiteStore
kind, target, code = sys.argv[1:]
store = {"SQLiteStore": SQLiteStore, "RedisStore": RedisStore}[kind](target)
for i in range(40):
    store.join(code, f"p-{i}")
    store.answer(code, f"p-{i}", "q1", i % 2)
"""


def test_two_processes_write_one_room_at_once(make):
    """Two replica processes on one store: each joins 40 students and answers for them
    while the other does the same; nothing is lost."""
    store = make()
    code, key = store.create()
    store.ask(code, key, _question("q1", 2))
    kind, target = make.target
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REPLICA.replace("p-", f"p{n}-"), kind, target, code],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    view = store.view(code)
    assert (view.students, view.counts, view.version) == (80, (40, 40), 2 + 160)


def test_redis_keys_carry_the_rooms_lifetime(redis_url, clock):
    """Abandoned rooms leave Redis by themselves: every key of a room has a TTL, pushed on
    by a teacher change (the clock here is real: Redis counts its own)."""
    from specdec_core.server.rooms_redis import RedisStore

    store = RedisStore(redis_url, prefix="ttl-test", ttl_s=100)
    code, key = store.create()
    store.join(code, "a")
    store.ask(code, key, _question())
    store.answer(code, "a", "q1", 0)
    meta, students, answers, index, *_ = store._keys(code)
    for name in (meta, students, answers):
        assert 95_000 < store.client.pttl(name) <= 100_000, name
    assert store.client.pttl(index) == -1  # the index is kept; purge trims it
    store.client.pexpire(meta, 1_000)
    store.client.pexpire(students, 1_000)
    store.publish(code, key, "step", {"v": "2"})
    assert store.client.pttl(meta) > 95_000 and store.client.pttl(students) > 95_000
    short = RedisStore(redis_url, prefix="ttl-test", ttl_s=0.2)
    gone, _ = short.create()
    time.sleep(0.3)
    assert not store.client.exists(*short._keys(gone)[:3])
    with pytest.raises(RoomError) as exc:
        store.version(gone)
    assert _code(exc) == "room_unknown"
    assert short.purge() == 0 and store.client.zscore(index, gone) is None
    store.close(code, key)
    assert not store.client.exists(meta, students, answers)


def _together(work, items) -> list:
    """``work(item)`` for each item on its own thread, all released at once; the results
    (or the exceptions) in order."""
    barrier = threading.Barrier(len(items))
    results: list = [None] * len(items)

    def run(i, item):
        barrier.wait()
        try:
            results[i] = work(item)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, x)) for i, x in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RoomError)]
    assert errors == []
    return results


# ---------------------------------------------------------------- the code itself
def test_every_sql_statement_takes_its_values_as_parameters():
    """No f-string, ``%`` or ``.format`` in or near an ``execute`` call, and every SQL
    argument is a string literal (or a name bound to literals)."""
    calls = 0
    for name in ("rooms_sqlite.py", "rooms_sqlite_file.py", "rooms_sqlite_peer.py"):
        calls += _sql_calls_with_literal_statements(REPO / "specdec_core" / "server" / name)
    assert calls >= 20


def _sql_calls_with_literal_statements(path) -> int:
    """The ``execute`` calls in ``path``, each asserted to take a literal statement."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    calls = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
            "execute",
            "executemany",
            "executescript",
        ):
            calls += 1
            sql = node.args[0]
            assert isinstance(sql, ast.Constant | ast.Name), ast.unparse(sql)
            assert not any(isinstance(n, ast.JoinedStr) for n in ast.walk(node))
            near = "\n".join(lines[max(0, node.lineno - 3) : node.end_lineno + 1])
            assert not re.search(r"\bf[\"']|%\s*[(\w]|\.format\(", near), near
    assert "executescript" not in source
    return calls


def test_redis_keys_are_built_from_a_checked_code_only():
    """Every Redis key name comes from one method, ``_keys``, of the (validated) room code
    and the store's prefix; student ids, choices and states travel as values (script
    arguments, hash fields)."""
    path = REPO / "specdec_core" / "server" / "rooms_redis.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    keys = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_keys")
    inside = {id(n) for n in ast.walk(keys)}
    key_strings = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.JoinedStr)
        and any(isinstance(v, ast.Constant) and ":room" in v.value for v in n.values)
    ]
    assert len(key_strings) == 8 and all(id(n) in inside for n in key_strings)
    names = {
        ast.unparse(v.value)
        for n in key_strings
        for v in n.values
        if isinstance(v, ast.FormattedValue)
    }
    assert names == {"self.prefix", "code"}
    assert "+ student" not in path.read_text(encoding="utf-8")


def test_a_new_sqlite_file_is_private_to_its_user(tmp_path):
    path = tmp_path / "new.sqlite3"
    SQLiteStore(path).create()
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_room_file_in_a_missing_folder_is_made_with_its_folder(tmp_path):
    """``SPECDEC_ROOM_DB`` naming a folder not made yet: the first room makes it (private)
    instead of a FileNotFoundError at 'Start a live class'."""
    path = tmp_path / "rooms" / "class" / "rooms.sqlite3"
    store = SQLiteStore(path)
    code, _ = store.create()
    assert store.view(code).students == 0 and path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_room_error_survives_pickle_and_copy():
    import copy
    import pickle

    for exc in (RoomError("room_full", limit=3), RoomError("room_unknown"), question_error()):
        for back in (pickle.loads(pickle.dumps(exc)), copy.copy(exc)):
            assert (type(back), back.code, back.params, str(back)) == (
                RoomError,
                exc.code,
                exc.params,
                str(exc),
            )


def test_every_room_error_has_a_message_in_both_languages():
    strings: dict = {}
    for path in sorted((REPO / "assets" / "strings").glob("*.json")):
        strings.update(json.loads(path.read_text(encoding="utf-8")))
    for code, message in MESSAGES.items():
        entry = strings[f"err_{code}"]
        fields = set(re.findall(r"{(\w+)}", message))
        for lang in ("en", "zh"):
            assert entry[lang].strip()
            assert set(re.findall(r"{(\w+)}", entry[lang])) == fields, (code, lang)


def test_make_store_is_one_per_process_and_follows_the_environment(monkeypatch, tmp_path, request):
    monkeypatch.setattr(room_store, "_store", None)
    monkeypatch.delenv("SPECDEC_REDIS_URL", raising=False)
    monkeypatch.setenv("SPECDEC_ROOM_DB", str(tmp_path / "r.sqlite3"))
    monkeypatch.setenv("SPECDEC_ROOM_TTL_H", "0.5")
    store = room_store.make_store()
    assert isinstance(store, SQLiteStore) and store.path == str(tmp_path / "r.sqlite3")
    assert store.ttl_s == 1800 and room_store.make_store() is store
    code, _ = store.create()
    assert SQLiteStore(tmp_path / "r.sqlite3").version(code) == 1
    monkeypatch.setattr(room_store, "_store", None)
    monkeypatch.setenv("SPECDEC_REDIS_URL", request.getfixturevalue("redis_url"))
    from specdec_core.server.rooms_redis import RedisStore

    redis_store = room_store.make_store()
    assert isinstance(redis_store, RedisStore) and room_store.make_store() is redis_store
    redis_store.version(redis_store.create()[0])


# ---------------------------------------------------------------- one client cannot exhaust
def test_one_client_holds_three_live_rooms_and_a_teacher_always_starts_one(make, clock):
    store = make(clock=clock, ttl_s=600, max_rooms=5)
    for _ in range(3):
        store.create("addr:10.0.0.9")
    with pytest.raises(RoomError) as exc:
        store.create("addr:10.0.0.9")  # the fourth of one student
    assert _code(exc) == "rooms_client" and exc.value.params == {"limit": 3}
    store.create("addr:10.0.0.8")  # another client is not held back
    store.create("addr:10.0.0.7")
    with pytest.raises(RoomError) as exc:
        store.create("addr:10.0.0.6")  # 5 live rooms: the server-wide bound
    assert _code(exc) == "rooms_full" and exc.value.params == {"limit": 5}
    store.create("addr:127.0.0.1", exempt=True)  # the teacher's address passes every bound
    clock.advance(601)  # the student's rooms expired: their places are free again
    assert store.version(store.create("addr:10.0.0.9")[0]) == 1
    assert "10.0.0.9" not in _stored_text(store)  # the address is kept as a hash only


def test_one_client_makes_at_most_ten_rooms_an_hour(make, clock):
    store = make(clock=clock, ttl_s=600)
    for _ in range(10):
        code, key = store.create("addr:10.0.0.9")
        store.close(code, key)  # ended at once: never more than one live
        clock.advance(60)
    with pytest.raises(RoomError) as exc:
        store.create("addr:10.0.0.9")
    assert _code(exc) == "rooms_hour" and exc.value.params == {"limit": 10}
    store.create("addr:10.0.0.8")
    clock.advance(3600 - 600 + 1)  # the first creation is more than an hour old
    store.create("addr:10.0.0.9")
    with pytest.raises(RoomError):
        store.create("addr:10.0.0.9")  # the second one is not (yet)


# ---------------------------------------------------------------- seats
def test_a_seat_not_seen_for_the_seat_ttl_stops_counting_and_frees_its_place(make, clock):
    store = make(clock=clock, max_students=3, seat_ttl_s=90)
    code, key = store.create()
    for s in ("a", "b", "c"):
        store.join(code, s)
    with pytest.raises(RoomError) as exc:
        store.join(code, "d")
    assert _code(exc) == "room_full"
    store.ask(code, key, _question("q1", 2))
    store.answer(code, "b", "q1", 1)  # b answered: counts while the question is open
    clock.advance(60)
    store.join(code, "c")  # c's follower polls: its heartbeat
    clock.advance(40)  # a: 100 s unseen; b: 100 s, but answered; c: 40 s
    view = store.view(code)
    assert (view.students, view.answered, view.counts) == (2, 1, (0, 1))
    store.join(code, "d")  # a's place is taken: a full room frees the seats gone quiet
    assert store.view(code).students == 3
    seats = {s.student: s for s in store.seats(code, key)}
    assert set(seats) == {"b", "c", "d"} and seats["b"].answered and not seats["c"].answered
    assert seats["d"].seen_at == T0 + 100 and all(s.counts for s in seats.values())
    with pytest.raises(RoomError) as exc:
        store.join(code, "a")  # a came back to a full room
    assert _code(exc) == "room_full"


def test_the_teacher_removes_a_seat_and_it_cannot_join_again(make, clock):
    store = make(clock=clock)
    code, key = store.create()
    store.join(code, "a")
    store.join(code, "b")
    store.ask(code, key, _question("q1", 2))
    store.answer(code, "a", "q1", 0)
    v = store.version(code)
    with pytest.raises(RoomError) as exc:
        store.remove(code, "not-the-key", "a")
    assert _code(exc) == "room_key"
    assert store.remove(code, key, "a") == v + 1
    view = store.view(code)
    assert (view.students, view.counts) == (1, (0, 0))  # its answer left with it
    for call in (lambda: store.join(code, "a"), lambda: store.answer(code, "a", "q1", 1)):
        with pytest.raises(RoomError) as exc:
            call()
        assert _code(exc) in ("room_removed", "room_student")
    with pytest.raises(RoomError) as exc:
        store.join(code, "a")
    assert _code(exc) == "room_removed"
    with pytest.raises(RoomError) as exc:
        store.remove(code, key, "nobody")
    assert _code(exc) == "room_student"
    assert [s.student for s in store.seats(code, key)] == ["b"]


def test_heartbeats_refresh_many_seats_at_once_and_name_the_refused(make, clock):
    store = make(clock=clock, max_students=3, seat_ttl_s=90)
    code, key = store.create()
    for s in ("a", "b"):
        store.join(code, s)
    store.remove(code, key, "b")
    v = store.version(code)
    clock.advance(60)
    assert store.heartbeats(code, ["a", "b"]) == {"b": "room_removed"}
    assert store.version(code) == v  # a heartbeat of a seat already there: no bump
    clock.advance(60)  # a: 60 s since the batch, still counts (120 s since its join)
    assert store.view(code).students == 1
    assert store.heartbeats(code, ["c", "d", "e"]) == {"e": "room_full"}  # new: joins
    assert store.view(code).students == 3
    with pytest.raises(RoomError) as exc:
        store.heartbeats(code, ["not a seat!"])
    assert _code(exc) == "room_student"
    store.close(code, key)
    with pytest.raises(RoomError) as exc:
        store.heartbeats(code, ["a"])
    assert _code(exc) == "room_unknown"


# ---------------------------------------------------------------- store faults
def test_a_locked_sqlite_file_gives_room_store_and_keeps_what_was_confirmed(tmp_path):
    import sqlite3

    path = tmp_path / "rooms.sqlite3"
    store = SQLiteStore(path)
    code, key = store.create()
    store.join(code, "a")
    store.ask(code, key, _question("q1", 2))
    store.answer(code, "a", "q1", 1)  # confirmed
    store.close_connections()  # pooled connections would hold the file open
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA locking_mode = EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")  # another process holds the file
    started = time.monotonic()
    try:
        with pytest.raises(RoomError) as exc:
            store.join(code, "b")
        assert _code(exc) == "room_store"
        assert isinstance(exc.value.__cause__, sqlite3.OperationalError)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert time.monotonic() - started < 12  # 3 tries of 2 s + the back-off, not forever
    store.join(code, "b")  # the store answers again: the join goes through
    view = store.view(code)
    assert (view.students, view.counts) == (2, (0, 1))


def test_redis_down_gives_room_store_then_works_again(redis_url):
    import redis as redis_lib

    from specdec_core.server.rooms_redis import RedisStore

    store = RedisStore(redis_url, prefix="fault-test")
    code, _ = store.create()
    dead = RedisStore("redis://127.0.0.1:1/0", prefix="fault-test")  # nothing listens
    for call in (lambda: dead.version(code), lambda: dead.join(code, "a"), dead.create):
        with pytest.raises(RoomError) as exc:
            call()
        assert _code(exc) == "room_store"
        assert isinstance(exc.value.__cause__, redis_lib.RedisError)
    store.join(code, "a")
    assert store.view(code).students == 1


def test_a_deleted_or_replaced_sqlite_file_is_detected_and_made_again(tmp_path):
    path = tmp_path / "rooms.sqlite3"
    store = SQLiteStore(path)
    code, _ = store.create()
    fresh = tmp_path / "fresh.sqlite3"

    def replaced() -> None:  # another file moved over it (a new inode), e.g. a restore
        fresh.write_bytes(b"")
        os.replace(fresh, path)

    for gone in (path.unlink, replaced):
        gone()
        with pytest.raises(RoomError) as exc:
            store.version(code)
        assert _code(exc) == "room_store_reset"
        assert path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(RoomError) as exc:
            store.version(code)  # the old rooms are gone with their file
        assert _code(exc) == "room_unknown"
        code, _ = store.create()  # and the new file works
        assert store.version(code) == 1


def test_the_default_database_sits_in_a_private_directory(monkeypatch, tmp_path):
    from specdec_core.server.room_store import default_db_path

    monkeypatch.delenv("SPECDEC_ROOM_DB", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = Path(default_db_path())
    assert path == tmp_path / "state" / "specdec" / "rooms.sqlite3"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.parent.chmod(0o777)  # loosened by someone: set back
    default_db_path()
    assert path.parent.stat().st_mode & 0o777 == 0o700
    SQLiteStore(path).create()
    assert path.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("SPECDEC_ROOM_DB", str(tmp_path / "mine.sqlite3"))
    assert default_db_path() == str(tmp_path / "mine.sqlite3")  # still overrides
    import tempfile

    monkeypatch.delenv("SPECDEC_ROOM_DB")
    assert not default_db_path().startswith(tempfile.gettempdir() + os.sep + "specdec-rooms")


def test_an_old_sqlite_file_gains_the_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE rooms (code TEXT PRIMARY KEY, key_hash TEXT NOT NULL, version INTEGER"
        " NOT NULL, page TEXT NOT NULL, state TEXT NOT NULL, question TEXT, created_at REAL"
        " NOT NULL, expires_at REAL NOT NULL)"
    )
    db.execute(
        "CREATE TABLE students (code TEXT NOT NULL, student TEXT NOT NULL,"
        " PRIMARY KEY (code, student)) WITHOUT ROWID"
    )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    code, _ = store.create("addr:10.0.0.1")
    store.join(code, "a")
    assert store.view(code).students == 1


# ---------------------------------------------------------------- rates per client
def test_token_buckets_give_a_burst_then_the_rate():
    from specdec_core.server.room_limits import Buckets, Rate

    clock = Clock()
    buckets = Buckets({"guess": Rate(3, 0.5)}, clock=clock)
    assert [buckets.take("guess", "addr:a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("guess", "addr:a") == pytest.approx(2.0)  # refused: 2 s to a token
    assert buckets.take("guess", "addr:b") == 0.0  # another address has its own
    clock.advance(1.0)
    assert buckets.wait("guess", "addr:a") == pytest.approx(1.0)  # wait() takes nothing
    clock.advance(1.0)
    assert buckets.take("guess", "addr:a") == 0.0
    assert buckets.take("guess", "addr:a") > 0


def test_one_fast_follower_per_seat_and_a_bound_per_address():
    from specdec_core.server import room_limits

    clock = Clock()
    tabs = room_limits.Tabs(limit=2, clock=clock)
    assert tabs.poll("seat1", "tab1", "addr:a")  # the first tab polls fast
    assert not tabs.poll("seat1", "tab2", "addr:a")  # the same browser's second tab: slow
    assert tabs.claim("seat1", "tab2", "addr:a") and not tabs.poll("seat1", "tab1", "addr:a")
    assert tabs.poll("seat2", "t", "addr:a")
    assert not tabs.poll("seat3", "t", "addr:a")  # the address holds 2 fast seats
    assert tabs.poll("seat3", "t", "addr:b")
    clock.advance(room_limits.QUIET_S + 1)  # tab2 closed: another tab takes over
    assert tabs.poll("seat1", "tab1", "addr:a") and tabs.poll("seat3", "t", "addr:a")


def test_the_browser_secret_is_the_xsrf_token_whatever_its_mask():
    from specdec_core.ui.live.identity import seat_id, xsrf_token

    token = bytes(range(32))
    cookies = []
    for mask in (b"\x01\x02\x03\x04", b"\xff\x00\xaa\x55"):
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(token))
        cookies.append(f"2|{mask.hex()}|{masked.hex()}|1700000000")
    assert cookies[0] != cookies[1]
    assert xsrf_token(cookies[0]) == xsrf_token(cookies[1]) == token.hex()
    for bad in ("", "1|00|00|0", "2|zz|00|0", "2|01020304|0102|0", "2|0102|" + "00" * 16 + "|0"):
        assert xsrf_token(bad) is None
    a, b = seat_id("ABCDEF", "xsrf:" + token.hex()), seat_id("ABCDEG", "xsrf:" + token.hex())
    assert re.fullmatch(r"[0-9a-f]{16}", a) and a != b  # another room, another seat id
    assert token.hex()[:16] not in a


def test_redis_as_compose_runs_it_keeps_confirmed_answers_across_a_kill(tmp_path):
    """Redis with the compose file's own persistence flags, killed (SIGKILL) and started
    again on its folder: every room, seat and answer the store confirmed is still there."""
    yaml = pytest.importorskip("yaml")
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("redis-server is not installed")
    import redis

    from specdec_core.server.rooms_redis import RedisStore

    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text(encoding="utf-8"))
    flags = compose["services"]["redis"]["command"][1:]
    port = _free_port()

    def start() -> subprocess.Popen:
        args = [REDIS_SERVER, *flags, "--bind", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(
            [*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=port, socket_timeout=1)
        for _ in range(200):
            try:
                client.ping()
                return proc
            except redis.ConnectionError:
                time.sleep(0.05)
        proc.kill()
        pytest.fail("redis-server did not start")

    proc = start()
    try:
        store = RedisStore(f"redis://127.0.0.1:{port}/0")
        code, key = store.create()
        store.ask(code, key, _question("q1", 2))
        for i in range(30):
            store.join(code, f"s{i}")
            store.answer(code, f"s{i}", "q1", i % 2)
        proc.kill()  # SIGKILL right after the last confirmed answer
        proc.wait(timeout=10)
        with pytest.raises(RoomError) as exc:
            store.view(code)  # while it is down: the store's one message
        assert _code(exc) == "room_store"
        proc = start()
        view = store.view(code)
        assert (view.students, view.counts) == (30, (15, 15))
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_full_disk_gives_room_store_and_the_room_as_it_was(tmp_path):
    """``database or disk is full`` (SQLITE_FULL, made here with ``max_page_count``) is
    the store's one message, and the room keeps its last confirmed state."""
    import sqlite3

    store = SQLiteStore(tmp_path / "rooms.sqlite3")
    code, key = store.create()
    store.publish(code, key, "step", {"v": "2"})
    store.close_connections()
    with store.file.connection() as db:  # the pool's only connection from here on
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
    big = {f"k{i}": "x" * 400 for i in range(16)}  # 6.5 KB: needs new pages
    with pytest.raises(RoomError) as exc:
        store.publish(code, key, "step", big)
    assert _code(exc) == "room_store"
    assert "full" in str(exc.value.__cause__) and isinstance(
        exc.value.__cause__, sqlite3.OperationalError
    )
    assert store.view(code).state == {"v": "2"}
