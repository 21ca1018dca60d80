"""Adaptive γ: transformers' heuristic schedule as a pure function, the
confidence stop on real drafter rows, greedy equality under both schedules, the refusals
(engine and CLI), the JSON contract, lesson links, and the history's γ sequence."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import open_app, run_json, shown_error

from specdec_core.__main__ import main
from specdec_core.core.errors import ConfigError
from specdec_core.core.settings import MAX_GAMMA, SessionConfig
from specdec_core.drafters.model import ModelDrafter
from specdec_core.drafters.ngram import NgramDrafter
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.engine.rounds import gamma_for_round
from specdec_core.engine.schedule import gamma_cap, heuristic_step, round_gamma, scheduled_gamma
from specdec_core.engine.tree.generate import generate_tree
from specdec_core.engine.tree.session import TreeSession
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.lessons.replay import replay, replay_forwards

PROMPTS = ("ROMEO:\nBut soft, what light", "KING HENRY:\nOnce more unto the breach", "The ")


def sequence(start: int, cap: int, accepted: list[int]) -> list[int]:
    """The heuristic's γ before each round and after the last."""
    return [
        scheduled_gamma("heuristic", start, cap, accepted[:i]) for i in range(len(accepted) + 1)
    ]


# ---------------------------------------------------------------- the pure schedule
@pytest.mark.parametrize(
    ("start", "cap", "accepted", "expected"),
    [
        (4, 16, [4, 6, 8, 0, 0], [4, 6, 8, 10, 9, 8]),  # all accepted: +2; none: −1
        (2, 16, [0, 0, 0], [2, 1, 1, 1]),  # never below 1
        (4, 16, [3, 2, 1], [4, 3, 2, 1]),  # all but one accepted is not all accepted
        (4, 16, [3, 3, 2], [4, 3, 5, 4]),  # the shorter γ fully accepted grows again
        (3, 4, [3, 4, 4, 2], [3, 4, 4, 4, 3]),  # capped by the drafter's max_gamma (4)
        (15, MAX_GAMMA, [15, 16, 16], [15, 16, 16, 16]),  # capped by MAX_GAMMA
        (1, 16, [1, 3, 0, 4], [1, 3, 5, 4, 6]),  # a 0 after +2 steps back one
        (6, 4, [4], [4, 4]),  # a start above the cap starts at the cap
    ],
)
def test_heuristic_sequence_case_table(start, cap, accepted, expected):
    assert sequence(start, cap, accepted) == expected


def test_heuristic_step_and_other_schedules():
    assert heuristic_step(5, 5, 16) == 7 and heuristic_step(5, 4, 16) == 4
    assert heuristic_step(1, 0, 16) == 1 and heuristic_step(15, 15, 16) == 16
    for schedule in ("constant", "confidence"):  # γ never moves
        assert scheduled_gamma(schedule, 4, 16, [4, 4, 0, 0]) == 4
    assert gamma_cap(None) == MAX_GAMMA and gamma_cap(4) == 4 and gamma_cap(99) == MAX_GAMMA


def test_round_gamma_is_cut_by_the_budget():
    config = SessionConfig(gamma=4, max_new_tokens=10, gamma_schedule="heuristic")
    drafter = NgramDrafter(16)
    # scheduled 4 → 6 after a fully accepted round; 10 − 8 − 1 = 1 left; context: 5 left
    assert round_gamma(config, drafter, [4], now=(0, 5, 1024)) == 6
    assert round_gamma(config, drafter, [4], now=(8, 13, 1024)) == 1
    assert round_gamma(config, drafter, [4], now=(0, 1020, 1024)) == 3


# ---------------------------------------------------------------- the confidence stop
def _rows(pair, drafter_name: str, config: SessionConfig, prompt: str):
    session = SpeculativeSession(pair, prompt, config, make_named_drafter(pair, drafter_name))
    session.propose()
    return session.steps.drafts, session.steps.pending.q_rows


@pytest.mark.parametrize("drafter_name", ["model", "eagle"])
def test_confidence_stop_on_real_rows(embedded_pair, drafter_name):
    """At T = 1 (no top-k / top-p) each ``q_i`` is the softmax of the draft's logits, so
    its maximum is the top probability the stop reads: a threshold just above ``max q_i``
    stops after ``y_i``, one just below every value drafts all γ."""
    gamma, prompt = 5, PROMPTS[0]
    base = SessionConfig(gamma=gamma, temperature=1.0, seed=3)
    ids, q = _rows(embedded_pair, drafter_name, base, prompt)
    tops = q.max(dim=-1).values.tolist()
    assert len(ids) == gamma and all(0.0 < p < 1.0 for p in tops)
    thresholds = sorted({p + d for p in tops[: gamma - 1] for d in (-2e-4, 2e-4)})
    stopped = set()
    for threshold in thresholds:
        expected = next((i + 1 for i, p in enumerate(tops) if p < threshold), gamma)
        config = SessionConfig(
            gamma=gamma, temperature=1.0, seed=3, gamma_schedule="confidence", confidence=threshold
        )
        got, rows = _rows(embedded_pair, drafter_name, config, prompt)
        assert got == ids[:expected], (threshold, tops)
        assert rows.shape[0] == expected
        stopped.add(expected)
    assert min(stopped) < gamma and gamma in stopped  # both a stop and no stop happened


def test_confidence_stop_at_temperature_0_and_the_fast_path(embedded_pair):
    """q is one-hot at T = 0 but the stop reads the logits: it still stops, and the lean
    ``propose_argmax`` stops where ``propose`` does."""
    context = embedded_pair.tokenizer.encode(PROMPTS[1])
    full, _ = make_named_drafter(embedded_pair, "model").propose_argmax(context, 6)
    stops = set()
    for threshold in (0.05, 0.3, 0.6, 0.95):
        lean, _ = make_named_drafter(embedded_pair, "model").propose_argmax(context, 6, threshold)
        config = SessionConfig(gamma=6, gamma_schedule="confidence", confidence=threshold)
        slow, _ = _rows(embedded_pair, "model", config, PROMPTS[1])
        assert lean == slow == full[: len(lean)]
        stops.add(len(lean))
    assert len(stops) > 1  # the threshold changed where drafting stopped


# ---------------------------------------------------------------- lossless
@pytest.fixture(scope="module")
def alone(embedded_pair) -> dict[str, list[int]]:
    """The target's own greedy continuation of each prompt (12 tokens)."""
    config = SessionConfig(max_new_tokens=12)
    return {p: generate(embedded_pair, p, config, "autoregressive").output_ids for p in PROMPTS}


@pytest.mark.parametrize("schedule", ["heuristic", "confidence"])
@pytest.mark.parametrize("drafter_name", ["model", "eagle"])
def test_greedy_equals_the_target_alone(embedded_pair, alone, schedule, drafter_name):
    config = SessionConfig(gamma=3, max_new_tokens=12, gamma_schedule=schedule)
    for prompt in PROMPTS:
        drafter = make_named_drafter(embedded_pair, drafter_name)
        fast = generate(embedded_pair, prompt, config, drafter=drafter)
        assert fast.output_ids == alone[prompt]
    drafter = make_named_drafter(embedded_pair, drafter_name)
    session = SpeculativeSession(embedded_pair, prompt, config, drafter)
    session.run()
    assert session.records == fast.records  # the step machine and the fast path agree


@pytest.mark.parametrize("schedule", ["heuristic", "confidence"])
def test_sampled_fast_path_matches_the_step_machine(embedded_pair, schedule):
    """At T = 1 the fast path's general path (rows, draws, the stop read from the
    logits) gives the step machine's records round for round."""
    config = SessionConfig(gamma=3, temperature=1.0, seed=7, max_new_tokens=12)
    config = replace(config, gamma_schedule=schedule, confidence=0.3)
    fast = generate(embedded_pair, PROMPTS[1], config)
    session = SpeculativeSession(embedded_pair, PROMPTS[1], config)
    session.run()
    assert session.records == fast.records and session.generated_ids == fast.output_ids
    if schedule == "confidence":
        assert any(len(r.drafted) < r.gamma for r in fast.records)


def test_history_gamma_follows_the_pure_function(embedded_pair):
    config = SessionConfig(gamma=2, max_new_tokens=40, gamma_schedule="heuristic")
    session = SpeculativeSession(embedded_pair, PROMPTS[0], config)
    session.run()
    records = session.records
    accepted = [r.accepted for r in records]
    generated, expected = 0, []
    for i, r in enumerate(records):
        scheduled = scheduled_gamma("heuristic", 2, MAX_GAMMA, accepted[:i])
        expected.append(gamma_for_round(scheduled, generated, 40, 0, 1 << 20))
        generated += len(r.appended)
    assert [r.gamma for r in records] == expected
    assert len(set(expected)) > 2  # γ really moved
    # a lesson link replays the same γ sequence (from the history, deterministic)
    state = LessonState(prompt=PROMPTS[0], gamma=2, max_new_tokens=40, gamma_schedule="heuristic")
    again = replay(embedded_pair, replace(state, round=5))
    assert again.problems == []
    assert again.session.records == records[:5]
    # the replay's forward bound counts γ up to MAX_GAMMA under the heuristic
    assert replay_forwards(replace(state, round=5)) == 5 * (MAX_GAMMA + 1)
    assert replay_forwards(replace(state, round=5, gamma_schedule="confidence")) == 5 * 3


# ---------------------------------------------------------------- refusals
class Limited(ModelDrafter):
    max_gamma = 2


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"gamma_schedule": "adaptive"}, "bad_gamma_schedule"),
        ({"confidence": 0.0}, "bad_confidence"),
        ({"confidence": 1.0}, "bad_confidence"),
        ({"confidence": float("nan")}, "bad_confidence"),
        ({"confidence": True}, "bad_confidence"),
    ],
)
def test_bad_settings_are_refused(kwargs, code):
    with pytest.raises(ConfigError) as info:
        SessionConfig(**kwargs).validate()
    assert info.value.code == code


def test_engine_refusals(embedded_pair):
    pair, prompt = embedded_pair, PROMPTS[2]
    cases = [
        (SessionConfig(gamma=4), Limited(pair.draft), "gamma_drafter"),
        (
            SessionConfig(gamma_schedule="confidence"),
            NgramDrafter(pair.vocab_size),
            "confidence_ngram",
        ),
    ]
    for config, drafter, code in cases:
        with pytest.raises(ConfigError) as info:
            SpeculativeSession(pair, prompt, config, drafter)
        assert info.value.code == code
        with pytest.raises(ConfigError) as info:
            generate(pair, prompt, config, drafter=drafter)
        assert info.value.code == code
    with pytest.raises(ConfigError) as info:
        SpeculativeSession(pair, prompt, SessionConfig(gamma=4), Limited(pair.draft))
    assert info.value.params["limit"] == 2 and info.value.params["gamma"] == 4
    within = SessionConfig(gamma=2, max_new_tokens=6, gamma_schedule="heuristic")
    records = generate(pair, prompt, within, drafter=Limited(pair.draft)).records
    assert max(r.gamma for r in records) <= 2  # the heuristic never asks for more
    heuristic = SessionConfig(gamma_schedule="heuristic")
    for run in (
        lambda: TreeSession(pair, prompt, heuristic, shape=(2, 1)),
        lambda: generate_tree(pair, prompt, heuristic, (2, 1)),
    ):
        with pytest.raises(ConfigError) as info:
            run()
        assert info.value.code == "gamma_schedule_tree"


class Heads(ModelDrafter):
    name, max_gamma = "mtp", 4


@pytest.mark.parametrize(
    ("lang", "expected"),
    [
        ("en", "the MTP heads can propose at most 4 tokens per round (one per head), and γ is 6"),
        ("zh", "MTP 预测头每轮最多只能提出 4 个 token（每个头一个），而当前 γ 为 6"),
    ],
)
def test_the_limit_message_names_the_drafter(embedded_pair, lang, expected):
    with pytest.raises(ConfigError) as info:
        SpeculativeSession(embedded_pair, "x", SessionConfig(gamma=6), Heads(embedded_pair.draft))
    assert expected in shown_error(info.value, lang)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gamma-schedule", "adaptive"], "γ schedule must be one of"),
        (["--confidence", "1.5"], "strictly between 0 and 1"),
        (["--confidence", "0"], "strictly between 0 and 1"),
        (["--gamma-schedule", "heuristic", "--tree", "2,1"], "a tree keeps its fixed shape"),
        (["--gamma-schedule", "confidence", "--drafter", "ngram"], "prompt lookup has none"),
        (["--gamma-schedule", "heuristic", "--mode", "autoregressive"], "--mode speculative"),
        (["--confidence", "0.5"], "--confidence needs --gamma-schedule confidence"),
        (
            ["--gamma-schedule", "heuristic", "--confidence", "0.5"],
            "--confidence needs --gamma-schedule confidence",
        ),
    ],
)
def test_cli_refusals_exit_2(capsys, args, message):
    assert main(["run", "--prompt", "x", *args, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_cli_gamma_above_the_drafter_limit_exits_2(capsys, monkeypatch):
    monkeypatch.setattr(ModelDrafter, "max_gamma", 2)
    assert main(["run", "--prompt", "x", "--gamma", "3", "--json"]) == 2
    err = capsys.readouterr().err
    assert err == "error: the model drafter can propose at most 2 tokens, γ = 3\n"


# ---------------------------------------------------------------- JSON and links
def test_default_json_unchanged_and_schedule_json(capsys):
    args = ["run", "--prompt", PROMPTS[0], "--gamma", "2", "--max-new-tokens", "12", "--json"]
    default = run_json(capsys, *args)
    explicit = run_json(capsys, *args, "--gamma-schedule", "constant")  # + --confidence: exit 2
    assert json.dumps(default) == json.dumps(explicit)
    assert "gamma_schedule" not in default
    assert all("gamma" not in r and "drafted_count" not in r for r in default["rounds"])
    out = run_json(capsys, *args, "--gamma-schedule", "heuristic")
    assert out["gamma_schedule"] == {"name": "heuristic"}
    assert out["output_ids"] == default["output_ids"]
    accepted = [r["accepted"] for r in out["rounds"]]
    generated, expected = 0, []
    for scheduled, r in zip(sequence(2, MAX_GAMMA, accepted), out["rounds"], strict=False):
        expected.append(min(scheduled, 12 - generated - 1))
        generated += len(r["appended"])
    assert [r["gamma"] for r in out["rounds"]] == expected
    assert all(r["drafted_count"] == len(r["drafted"]) for r in out["rounds"])
    conf = run_json(capsys, *args, "--gamma-schedule", "confidence", "--confidence", "0.5")
    assert conf["gamma_schedule"] == {"name": "confidence", "confidence": 0.5}
    assert any(r["drafted_count"] < r["gamma"] for r in conf["rounds"])


def test_link_round_trip_with_a_schedule():
    state = LessonState(prompt="KING:", gamma_schedule="confidence", confidence=0.25, round=2)
    back, problems = decode(encode(state), ["embedded"])
    assert problems == [] and back == state
    assert back.config().gamma_schedule == "confidence" and back.config().confidence == 0.25
    assert LessonState().with_config(state.config()).confidence == 0.25
    assert encode(LessonState(prompt="KING:")) == encode(
        LessonState(prompt="KING:", gamma_schedule="constant")
    )  # the default adds nothing to a link
    for bad in (
        LessonState(prompt="KING:", confidence=1.0),
        LessonState(prompt="KING:", gamma_schedule="heuristic", tree=(2, 1)),
        LessonState(prompt="KING:", gamma_schedule="confidence", drafter="ngram"),
    ):
        back, problems = decode(encode(bad), ["embedded"])
        name = "confidence" if bad.confidence == 1.0 else "gamma_schedule"
        assert [p.params["name"] for p in problems] == [name]
        assert back.gamma_schedule == "constant" or back.confidence == 0.4


# ---------------------------------------------------------------- the app
def test_sidebar_schedule_and_history_gamma(embedded_pair):
    """The sidebar's γ schedule reaches the session; the confidence slider shows only for
    the confidence stop; the history labels each round with its γ (zh too)."""
    at = open_app(lang="zh")
    assert not [s for s in at.sidebar.slider if s.key == "cfg_confidence"]
    at.sidebar.selectbox(key="cfg_gamma_schedule").set_value("confidence").run()
    [slider] = [s for s in at.sidebar.slider if s.key == "cfg_confidence"]
    assert slider.value == 0.4 and slider.label == "置信度阈值"
    at.sidebar.selectbox(key="cfg_gamma_schedule").set_value("heuristic").run()
    assert at.session_state["config"].gamma_schedule == "heuristic"
    for _ in range(3):
        next(b for b in at.button if b.key == "btn_round").click().run()
    assert not at.exception
    session = at.session_state["lesson"].session
    assert session.config.gamma_schedule == "heuristic" and len(session.history) == 3
    html = " ".join(h.value for h in at.get("html"))
    for r in session.history:
        assert f"第 {r.round_index + 1} 轮（γ = {r.record.gamma}）" in html


def test_app_refuses_the_confidence_stop_with_prompt_lookup(embedded_pair):
    """One translated message; the lesson keeps its session and settings."""
    at = open_app()
    next(b for b in at.button if b.key == "btn_round").click().run()
    before = at.session_state["lesson"].session
    at.sidebar.selectbox(key="cfg_drafter").set_value("ngram").run()
    at.sidebar.selectbox(key="cfg_gamma_schedule").set_value("confidence").run()
    shown = " ".join(e.value for e in at.error)
    assert "prompt lookup (n-gram) has none" in shown, shown
    session = at.session_state["lesson"].session
    assert session.config.gamma_schedule == "constant" and session.drafter.name == "ngram"
    assert before.drafter.name == "model"


def test_a_link_with_a_schedule_opens_it_in_the_app(embedded_pair):
    state = LessonState(prompt="KING:", gamma_schedule="confidence", confidence=0.3, round=2)
    at = open_app(params=encode(state))
    session = at.session_state["lesson"].session
    assert (session.config.gamma_schedule, session.config.confidence) == ("confidence", 0.3)
    assert len(session.history) == 2
    [slider] = [s for s in at.sidebar.slider if s.key == "cfg_confidence"]
    assert slider.value == 0.3
    back, problems = decode(dict(at.query_params), ["embedded"])
    assert problems == [] and (back.gamma_schedule, back.confidence, back.round) == (
        "confidence",
        0.3,
        2,
    )


def test_tree_mode_refuses_a_schedule_in_the_app(embedded_pair):
    """The tree keeps its fixed shape: a schedule there is one translated message."""
    at = open_app(lang="zh")
    at.sidebar.selectbox(key="cfg_gamma_schedule").set_value("heuristic").run()
    at.segmented_control(key="step_mode_zh").set_value("tree").run()
    assert not at.exception
    shown = " ".join(e.value for e in at.error)
    assert "heuristic γ 调度会逐轮改变链的长度" in shown, shown
    assert at.session_state.get("tree_lesson") is None
