"""AppTest of the step-through page with logits processors: the sidebar's processors reach the
session, the state beyond the KV cache (grammar matcher, penalty counts) is shown before
verify / after the verify forward / after commit with the engine's own values, the chart
of p before / after the processors, lesson links, and bad settings in en and zh."""

from __future__ import annotations

import pytest
from conftest import click, html_tables, open_app

from specdec_core.core.grammar import GRAMMAR_PRESETS, GrammarSpec
from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.penalties import penalty_counts
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.link import LessonState, decode, encode
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.step_slices import masked_mass

PROMPT = "First Citizen:\nWe are accounted poor citizens.\n\n"
SPEAKER = GrammarSpec(*GRAMMAR_PRESETS["speaker_line"])
BUTTONS = {
    "en": ("① Propose", "② Verify", "③ Commit / reject", "Reset"),
    "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝", "重置"),
}
MOMENT_COL = {"en": "moment", "zh": "时刻"}
YES = {"en": ("yes", "no"), "zh": ("是", "否")}


def _grammar_rows(at, lang: str) -> list[list[str]]:
    [df] = html_tables(at, "processor-table")
    assert list(df.columns)[0] == MOMENT_COL[lang]
    return df.values.tolist()


def _expected_grammar_row(state, prompt_len: int, lang: str) -> list[str]:
    """The processors' table row the engine's KVState says (``—`` not reached yet)."""
    if state is None:
        return ["—"] * 5
    view, g = state.processors, state.processors.grammar
    yes, no = YES[lang]
    return [
        str(view.length - prompt_len),
        str(g.accepted_tokens),
        yes if g.terminated else no,
        yes if g.completed else no,
        str(g.allowed_next),
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sidebar_processors_reach_the_session(embedded_pair, lang):
    at = open_app(lang=lang, prompt=PROMPT)
    assert at.session_state["config"] == SessionConfig(max_new_tokens=80)  # all off
    assert not html_tables(at, "processor-table")  # nothing to show without a processor
    at.sidebar.number_input(key="cfg_rep_penalty").set_value(1.3).run()
    at.sidebar.number_input(key="cfg_freq_penalty").set_value(0.5).run()
    at.sidebar.number_input(key="cfg_pres_penalty").set_value(0.2).run()
    at.sidebar.number_input(key="cfg_no_repeat_ngram").set_value(3).run()
    at.sidebar.selectbox(key="cfg_grammar").set_value("speaker_line").run()
    assert not at.exception and not at.error
    config = at.session_state["config"]
    assert (config.repetition_penalty, config.frequency_penalty) == (1.3, 0.5)
    assert (config.presence_penalty, config.no_repeat_ngram_size) == (0.2, 3)
    assert config.grammar == SPEAKER
    click(at, BUTTONS[lang][0])
    session = at.session_state["step_session"]
    assert session.config == config and session.processors.active
    # custom regex: the box starts from the speaker-line example, then takes typed text
    at.sidebar.selectbox(key="cfg_grammar").set_value("regex").run()
    assert at.sidebar.text_area(key="cfg_grammar_text").value == SPEAKER.source
    at.sidebar.text_area(key="cfg_grammar_text").set_value(r" (yes|no)[.!]").run()
    assert at.session_state["config"].grammar == GrammarSpec("regex", r" (yes|no)[.!]")
    assert not at.error


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_state_rows_are_the_engines_at_the_three_moments(embedded_pair, lang):
    """A seeded greedy run under the speaker-line grammar and a repetition penalty: the
    table rows equal the traces of the page's session and of a session run directly."""
    propose, verify, commit, _ = BUTTONS[lang]
    state = {"cfg_grammar": "speaker_line", "cfg_rep_penalty": 1.3, "cfg_gamma": 3}
    at = open_app(lang=lang, prompt=PROMPT, state=state)
    config = at.session_state["config"]
    direct = SpeculativeSession(embedded_pair, PROMPT, config)
    plen = direct.prompt_len
    rows = _grammar_rows(at, lang)  # before any round: the state now
    assert len(rows) == 1 and rows[0][1:] == ["0", "0", YES[lang][1], YES[lang][1], "7"]

    for round_index in range(2):
        direct.propose()
        click(at, propose)
        now = direct.kv_state()
        want = [_expected_grammar_row(s, plen, lang) for s in (now, None, None)]
        assert [r[1:] for r in _grammar_rows(at, lang)] == want

        trace = direct.verify()
        click(at, verify)
        assert trace.kv_before.processors == now.processors
        want = [_expected_grammar_row(s, plen, lang) for s in (now, trace.kv_after, None)]
        assert [r[1:] for r in _grammar_rows(at, lang)] == want
        before_g, after_g = now.processors.grammar, trace.kv_after.processors.grammar
        assert after_g.accepted_tokens == before_g.accepted_tokens + 3  # through the drafts

        done = direct.commit()
        click(at, commit)
        last = at.session_state["step_session"].history[-1]
        assert last.commit.kv_after == done.kv_after and last.verify.kv_after == trace.kv_after
        want = [
            _expected_grammar_row(s, plen, lang)
            for s in (trace.kv_before, trace.kv_after, done.kv_after)
        ]
        assert [r[1:] for r in _grammar_rows(at, lang)] == want
        # rolled back: the matcher accepted exactly the committed generated tokens
        assert done.kv_after.processors.grammar.accepted_tokens == len(direct.ids) - plen
        # the penalty counts: every token of the prefix each moment stands on
        [pen] = html_tables(at, "penalty-table")
        for i, kv in enumerate((trace.kv_before, trace.kv_after, done.kv_after)):
            ids = [r.token_id for r in kv.rows[: kv.processors.length]]
            counts = penalty_counts(ids, plen)
            for col in pen.columns[1:-1]:
                [tid] = [t for t in counts if visible_token(direct.token(t)) == col] or [None]
                shown = int(pen[col].iloc[i])
                assert shown == (counts[tid][0] if tid is not None else 0), (round_index, col)
            assert int(pen[pen.columns[-1]].iloc[i]) == kv.processors.penalty.distinct
    text = embedded_pair.tokenizer.decode(direct.ids[plen:])
    assert text.split(":")[0] in ("ROMEO", "JULIET", "NURSE")


def test_p_before_after_chart_shows_the_masked_mass(embedded_pair):
    at = open_app(
        lang="en", prompt=PROMPT, state={"cfg_grammar": "speaker_line", "cfg_temperature": 1.0}
    )
    click(at, "① Propose")
    click(at, "② Verify")
    verify = at.session_state["step_session"].steps.current_verify
    assert len(verify.unprocessed_dists) == len(verify.checks) + 1
    at.toggle(key="st_before_after").set_value(True).run()
    assert not at.exception
    [positions] = [s for s in at.get("segmented_control") if (s.key or "").startswith("st_pos_")]
    i = int(positions.value) - 1  # the position drawn (the rejected one by default)
    after = verify.checks[i].dist if i < len(verify.checks) else verify.next_dist
    mass, exact = masked_mass(after, verify.unprocessed_dists[i])
    assert exact and 0.5 < mass < 1.0  # the grammar removes most of the target's mass
    [line] = [c.value for c in at.caption if c.value.startswith("Mass the processors")]
    assert f"**{fmt_prob(mass)}**" in line


@pytest.mark.parametrize(
    ("lang", "words"),
    [("en", "the grammar does not compile"), ("zh", "该语法无法编译")],
)
def test_a_bad_grammar_is_one_translated_message_and_changes_nothing(embedded_pair, lang, words):
    at = open_app(lang=lang, prompt=PROMPT, state={"cfg_grammar": "speaker_line"})
    at.sidebar.selectbox(key="cfg_grammar").set_value("json_schema").run()  # an example
    person = GrammarSpec(*GRAMMAR_PRESETS["json_person"])
    assert at.session_state["config"].grammar == person and not at.error
    click(at, BUTTONS[lang][0])
    session = at.session_state["step_session"]
    at.sidebar.text_area(key="cfg_grammar_text").set_value('{"type": "object"').run()
    [error] = at.error
    assert words in error.value
    assert at.session_state["config"].grammar == person  # the last grammar that compiled
    assert at.session_state["step_session"] is session and session.phase == "verify"
    # a regex that does not parse: the library's reason inside the translated message
    at.sidebar.selectbox(key="cfg_grammar").set_value("regex").run()
    at.sidebar.text_area(key="cfg_grammar_text").set_value("(ROMEO").run()
    [error] = at.error
    assert words in error.value and "parenthesis" in error.value
    assert at.session_state["step_session"] is session


BOMB = "(.?)" * 250  # 74 characters of lesson link; over an hour of compiling unbounded


@pytest.mark.parametrize(
    ("lang", "words"), [("en", "250 optional parts"), ("zh", "250 个可选部分")]
)
def test_a_compile_bomb_is_one_translated_message_at_once(embedded_pair, lang, words):
    """Pasted in the sidebar: refused before compiling, the session keeps its grammar; in a
    lesson link: the grammar alone is dropped."""
    at = open_app(lang=lang, prompt=PROMPT, state={"cfg_grammar": "speaker_line"})
    speaker = at.session_state["config"].grammar
    at.sidebar.selectbox(key="cfg_grammar").set_value("regex").run()
    at.sidebar.text_area(key="cfg_grammar_text").set_value(BOMB).run()
    [error] = at.error
    assert words in error.value
    assert at.session_state["config"].grammar == speaker
    linked = open_app(encode(LessonState(lang=lang, grammar=("regex", BOMB))))
    assert linked.session_state["config"].grammar is None


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        ("en", "the text generated so far does not match this grammar"),
        ("zh", "目前已生成的文本不符合该语法"),
    ],
)
def test_a_grammar_the_text_breaks_blocks_until_reset(embedded_pair, lang, words):
    propose, verify, commit, reset = BUTTONS[lang]
    at = open_app(lang=lang, prompt=PROMPT)
    for label in (propose, verify, commit):
        click(at, label)
    session = at.session_state["step_session"]
    at.sidebar.selectbox(key="cfg_grammar").set_value("short_answer").run()
    [error] = at.error
    assert words in error.value
    assert at.session_state["step_session"] is session  # unchanged
    click(at, reset)
    fresh = at.session_state["step_session"]
    assert fresh is not session and fresh.config.grammar == GrammarSpec(
        *GRAMMAR_PRESETS["short_answer"]
    )
    assert not at.error


@pytest.mark.parametrize(
    ("lang", "words"), [("en", "prompt-lookup drafter"), ("zh", "提示词查找草稿方式")]
)
def test_a_grammar_with_prompt_lookup_is_refused(embedded_pair, lang, words):
    at = open_app(lang=lang, prompt=PROMPT)
    session = at.session_state["step_session"]
    at.sidebar.selectbox(key="cfg_drafter").set_value("ngram").run()
    ngram = at.session_state["step_session"]
    assert ngram is not session
    at.sidebar.selectbox(key="cfg_grammar").set_value("speaker_line").run()
    [error] = at.error
    assert words in error.value
    assert at.session_state["step_session"] is ngram


def test_a_link_carries_the_processors_both_ways(embedded_pair):
    state = LessonState(
        prompt=PROMPT,
        repetition_penalty=1.25,
        no_repeat_ngram_size=2,
        grammar=("regex", r"(ROMEO|JULIET): [a-z ]{1,20}\n"),
        round=1,
        phase="verify",
    )
    at = open_app(encode(state))
    S = at.session_state
    assert S["cfg_rep_penalty"] == 1.25 and S["cfg_no_repeat_ngram"] == 2
    assert S["cfg_grammar"] == "regex" and S["cfg_grammar_text"] == state.grammar[1]
    session = S["step_session"]
    assert session.config == state.config()
    assert session.config.grammar == GrammarSpec(*state.grammar)
    assert len(session.history) == 1 and session.phase == "verify"
    back, problems = decode(dict(at.query_params), ["embedded"])
    assert problems == [] and back.grammar == state.grammar
    assert (back.repetition_penalty, back.no_repeat_ngram_size) == (1.25, 2)
    # a preset in a link selects the preset
    preset = LessonState(prompt=PROMPT, grammar=(SPEAKER.kind, SPEAKER.source))
    assert open_app(encode(preset)).session_state["cfg_grammar"] == "speaker_line"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tree_mode_shows_the_processors_state(embedded_pair, lang):
    state = {"cfg_grammar": "speaker_line", "cfg_rep_penalty": 1.2}
    at = open_app(lang=lang, prompt=PROMPT, state=state)
    at.segmented_control(key=f"step_mode_{lang}").set_value("tree").run()
    assert not at.exception
    labels = {
        "en": ("① Propose tree", "③ Commit & compact"),
        "zh": ("① 提议一棵树", "③ 提交并压缩"),
    }
    verify = {"en": "② Verify (one target forward)", "zh": "② 验证（一次目标模型前向）"}[lang]
    for label in (labels[lang][0], verify, labels[lang][1]):
        click(at, label)
    session = at.session_state["tree_lesson"].session
    last = session.history[-1]
    plen = session.prompt_len
    want = [
        _expected_grammar_row(s, plen, lang)
        for s in (last.propose.kv_before, last.verify.kv_after, last.commit.kv_after)
    ]
    assert [r[1:] for r in _grammar_rows(at, lang)] == want
    assert last.commit.kv_after.processors.grammar.accepted_tokens == len(session.ids) - plen
    # penalty counts, every token counted: after the walk the processors stand on the
    # committed ids + the accepted path (from the round's tree view)
    before = last.propose.kv_before
    before_ids = [r.token_id for r in before.rows[: before.processors.length]]
    path = [last.verify.tree.nodes[i].token.id for i in last.verify.tree.path]
    walked = before_ids + path[: last.verify.kv_after.processors.length - len(before_ids)]
    after_ids = session.ids
    [pen] = html_tables(at, "penalty-table")
    for i, ids in enumerate((before_ids, walked, after_ids)):
        counts = penalty_counts(ids, plen)
        for col in pen.columns[1:-1]:
            [tid] = [t for t in counts if visible_token(session.token(t)) == col] or [None]
            assert int(pen[col].iloc[i]) == (counts[tid][0] if tid is not None else 0), col
        assert int(pen[pen.columns[-1]].iloc[i]) == len(counts)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_processor_error_code_has_its_message(lang):
    from conftest import shown_error

    from specdec_core.core.errors import ConfigError
    from specdec_core.core.penalties import PenaltyConfig

    with pytest.raises(ConfigError) as info:
        PenaltyConfig(repetition_penalty=11.0).validate()
    cases = [
        (info.value, {"en": "between 0.1 and 10.0 (got “11.0”)", "zh": "必须在 0.1 到 10.0 之间"}),
        (
            ConfigError("x", "grammar_slow", seconds=5.0),
            {"en": "longer than 5.0 s", "zh": "超过 5.0 秒"},
        ),
        (
            ConfigError("x", "grammar_too_long", chars=2001, limit=2000),
            {"en": "2001 characters; at most 2000", "zh": "2001 个字符；最多接受 2000"},
        ),
        (ConfigError("x", "grammar_empty"), {"en": "allows no token", "zh": "不允许任何 token"}),
        (
            ConfigError("x", "grammar_costly", count=250, limit=32),
            {"en": "250 optional parts", "zh": "250 个可选部分"},
        ),
        (ConfigError("x", "grammar_busy"), {"en": "other grammars", "zh": "其他语法"}),
        (
            ConfigError("x", "grammar_busy", reason="you"),
            {"en": "another grammar of yours", "zh": "你的另一个语法"},
        ),
        (ConfigError("x", "grammar_rate", seconds=42), {"en": "in 42 s", "zh": "42 秒后"}),
        (ConfigError("x", "grammar_child"), {"en": "stopped unexpectedly", "zh": "意外停止"}),
        (
            ConfigError("x", "grammar_bad", reason="bad"),
            {"en": "the parser's own message", "zh": "解析器的英文原始报错"},
        ),
    ]
    for exc, words in cases:
        assert words[lang] in shown_error(exc, lang).replace("\\", ""), exc.code


def test_frequency_penalty_alone_counts_generated_tokens(embedded_pair):
    """Without a grammar the table has no matcher columns; with the frequency penalty
    alone the counts are of the generated tokens only (the prompt's are not penalised)."""
    at = open_app(lang="en", prompt=PROMPT, state={"cfg_freq_penalty": 0.8})
    for label in BUTTONS["en"][:3]:
        click(at, label)
    session = at.session_state["step_session"]
    last = session.history[-1]
    [df] = html_tables(at, "processor-table")
    assert list(df.columns) == ["moment", "ids"]
    states = (last.verify.kv_before, last.verify.kv_after, last.commit.kv_after)
    plen = session.prompt_len
    assert [int(x) for x in df["ids"]] == [s.processors.length - plen for s in states]
    assert any("generated" in c.value for c in at.caption)
    [pen] = html_tables(at, "penalty-table")
    for i, kv in enumerate(states):
        counts = penalty_counts([r.token_id for r in kv.rows[: kv.processors.length]], plen)
        for col in pen.columns[1:-1]:
            [tid] = [t for t in counts if visible_token(session.token(t)) == col] or [None]
            want = counts[tid][1] if tid is not None else 0  # the generated count
            assert int(pen[col].iloc[i]) == want, col
    assert max(int(pen[c].iloc[1]) for c in pen.columns[1:-1]) >= 1  # drafts counted
