"""A live class: a teacher's room, students who follow the teacher's lesson
state on their own screens (replayed, never sent as model output), questions about the
round with a live chart, and the reveal of the real outcome.

* :mod:`~specdec_core.ui.live.room` — this session's seat (teacher / student), the store,
  the room's query parameters (``?room=CODE``; ``&teacher=KEY`` only in the teacher link,
  never kept in the address bar), publishing the teacher's state.
* :mod:`~specdec_core.ui.live.identity` — the client (address) and the browser's seat
  credential (a cookie's secret, never in a URL).
* :mod:`~specdec_core.ui.live.follow` — the student: follow, explore, follow again (widget
  keys in its docstring); :mod:`~specdec_core.ui.live.frames` — the teacher's frame of each
  step state (strip, checks, chart, KV table), :mod:`~specdec_core.ui.live.frame_cache`
  (read once per process and state) and :mod:`~specdec_core.ui.live.frame_view` (a
  follower draws it, no replay); :mod:`~specdec_core.ui.live.push_view` (the frame pushed
  over ``/_specdec/live`` and drawn in the browser), :mod:`~specdec_core.ui.live.push_votes`
  (the teacher's chart rerun by an answer pushed on the same route) and
  :mod:`~specdec_core.ui.live.push_server` (the route and the start-up warm-up that
  ``app.py``'s ``st.App`` serves); :mod:`~specdec_core.ui.live.answer` — the answer box, answers
  kept until the store confirms them.
* :mod:`~specdec_core.ui.live.teacher` — the teacher: start, the projector card, ask,
  the chart, reveal (widget keys in its docstring); :mod:`~specdec_core.ui.live.seats` —
  the seats and "Remove".
* :mod:`~specdec_core.ui.live.questions` — questions built from the engine's views and
  their outcomes read from the verified round; :mod:`~specdec_core.ui.live.chart` — the
  answers' bar chart.
* Peer instruction: :mod:`~specdec_core.ui.live.vote` — a question's vote (countdown,
  close, revote, the first vote beside the revote, the shift of the share right);
  :mod:`~specdec_core.ui.live.drive` — pause and the co-teacher link;
  :mod:`~specdec_core.ui.live.results` — the results' CSV, during and after the class.

Hooks: ``app.py`` calls :func:`room.on_load` and :func:`follow.before_sidebar` before the
sidebar and :func:`follow.bar` above every page; ``app.py`` and the step panel pass
:func:`room.publisher` (a teacher's :func:`room.publish`) to ``ui/step/links.write_url``;
the step page's header and the Lessons page draw :func:`teacher.card`; the step page passes
:func:`teacher.start_button` to the Lesson panel (its tab "Live class") and the Lessons
page draws it; :func:`follow.own_actions` reads the step page's "own action" flag;
``ui/lessons/checkpoint.ask`` records each checkpoint drawn (``DRAWN``) so a chapter
question can be asked and read in each browser's own language.
"""
