"""A question stays with the run of the step lesson it was asked in (``server/room_runs``):
the round, phase, edits and language move within a run; the tree shape, the carried
tokens, a setting or the prompt make a new one; off the step page nothing is stamped."""

from __future__ import annotations

from dataclasses import replace

from specdec_core.lessons.link import LessonState, encode
from specdec_core.server.room_runs import in_run, run_key, with_run
from specdec_core.server.room_types import Question, RoomView

BASE = LessonState(prompt="ROMEO:", round=1, phase="verify")


def view(state: LessonState, question: Question | None, page: str = "step") -> RoomView:
    return RoomView("ABCDEF", 3, page, encode(state), question, (1, 0), 1, 2, 0.0)


def test_the_run_key_ignores_what_moves_within_a_run():
    key = run_key("step", encode(BASE))
    assert key is not None and len(key) == 16
    moved = replace(BASE, round=4, phase="commit", edits=((1, 1, 7),), presenter=True)
    assert run_key("step", encode(moved)) == key
    assert run_key("step", encode(replace(BASE, lang="zh", pair="embedded"))) == key
    for other in (
        replace(BASE, tree=(2, 2)),
        replace(BASE, cont=(5, 6)),
        replace(BASE, gamma=3),
        replace(BASE, prompt="JULIET:"),
    ):
        assert run_key("step", encode(other)) != key
    assert run_key("lessons", encode(BASE)) is None and run_key("step", {}) is None


def test_a_stamped_question_leaves_a_view_of_another_run_only():
    asked = Question("q1", "accept", (("r", "0"), ("k", "1")), ("Yes", "No"))
    q = with_run(asked, view(BASE, None))
    assert dict(q.params)["run"] == run_key("step", encode(BASE))
    same = view(replace(BASE, round=2, phase="propose"), q)
    assert in_run(same) == same
    switched = in_run(view(replace(BASE, tree=(2, 2), cont=(5,)), q))
    assert (switched.question, switched.counts, switched.answered) == (None, (), 0)
    assert in_run(view(BASE, q, page="lessons")).question == q  # the Lessons page keeps it
    chapter = Question("q2", "chapter", (("cid", "c4"), ("chapter", "4")), ("a", "b"))
    assert with_run(chapter, view(BASE, None, page="lessons")) == chapter
