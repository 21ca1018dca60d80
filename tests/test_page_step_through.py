"""AppTest drives the step-through page: propose → edit → verify → commit, in both
languages, on the embedded pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import click, html_tables, open_app, strip_parts
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


LABELS = {
    "en": {
        "propose": "① Propose",
        "verify": "② Verify",
        "commit": "③ Commit / reject",
        "wrong": "Use the target's 2nd choice at position 1",
        "agree": "Use the target's top token at every position",
        "discarded": "tentative → discarded (rolled back)",
        "committed": "committed length",
        "target": "target KV length",
        "draft": "draft KV length",
        "apply_text": "Use typed token",
        "reset": "Reset",
    },
    "zh": {
        "propose": "① 提议",
        "verify": "② 验证",
        "commit": "③ 提交 / 拒绝",
        "wrong": "位置 1 改用目标模型的第二选择",
        "agree": "每个位置都改用目标模型的首选 token",
        "discarded": "暂定 → 被丢弃（回滚）",
        "committed": "已提交长度",
        "target": "目标模型 KV 长度",
        "draft": "草稿模型 KV 长度",
        "apply_text": "使用输入的 token",
        "reset": "重置",
    },
}


def start(lang: str) -> AppTest:
    return open_app(lang=lang, state={"edit_keep_open": True})  # the edit box open


def metrics(at: AppTest, lab: dict) -> tuple[int, int, int]:
    values = {m.label: int(m.value) for m in at.metric}
    return values[lab["committed"]], values[lab["target"]], values[lab["draft"]]


def states(at: AppTest) -> list[str]:
    [df] = html_tables(at, "kv-table")
    return list(df[df.columns[-1]])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_round_with_position_one_wrong(embedded_pair, lang):
    lab = LABELS[lang]
    at = start(lang)
    gamma = 4
    prompt_len = len(embedded_pair.tokenizer.encode(at.text_area[0].value))
    assert metrics(at, lab) == (prompt_len, 0, 0)
    assert [b.disabled for b in at.button if b.label in (lab["verify"], lab["commit"])] == [
        True,
        True,
    ]

    click(at, lab["propose"])
    assert metrics(at, lab) == (prompt_len, 0, prompt_len + gamma - 1)  # y_γ is not fed
    [positions] = [  # one chart per drafted position, chosen here (not the chain/tree mode)
        s for s in at.get("segmented_control") if not (s.key or "").startswith("step_mode")
    ]
    assert positions.options == [str(i) for i in range(1, gamma + 1)]

    click(at, lab["wrong"])
    click(at, lab["verify"])
    assert metrics(at, lab) == (prompt_len, prompt_len + gamma, prompt_len + gamma - 1)
    assert states(at).count(lab["discarded"]) == gamma - 1  # greedy: rejected at 1
    checks = html_tables(at, "checks-table")[0]
    verdicts = list(checks[checks.columns[-1]])
    assert len(verdicts) == gamma and len(set(verdicts[1:])) == 1 and verdicts[0] != verdicts[1]

    click(at, lab["commit"])
    committed, target_kv, draft_kv = metrics(at, lab)
    assert committed == prompt_len + 1  # only the correction token
    assert target_kv == prompt_len  # the correction has no KV yet
    assert draft_kv <= prompt_len
    assert at.session_state["step_session"].history[0].verify.accepted == 0


def test_agree_then_all_accepted(embedded_pair):
    lab = LABELS["en"]
    at = start("en")
    prompt_len = metrics(at, lab)[0]
    click(at, lab["propose"])
    click(at, lab["agree"])
    click(at, lab["verify"])
    session = at.session_state["step_session"]
    assert (
        session.steps.current_verify.accepted == 4 and session.steps.current_verify.kind == "bonus"
    )
    click(at, lab["commit"])
    assert metrics(at, lab)[:2] == (prompt_len + 5, prompt_len + 4)


def test_bad_edit_text_and_empty_prompt_leave_session_unchanged(embedded_pair):
    lab = LABELS["en"]
    at = start("en")
    click(at, lab["propose"])
    session = at.session_state["step_session"]
    drafts = session.steps.drafts
    at.text_input(key="edit_text").set_value(" wherefore art thou").run()
    click(at, lab["apply_text"])
    assert at.error and "not exactly one" in at.error[0].value
    assert at.session_state["step_session"].steps.drafts == drafts
    assert at.session_state["step_session"].phase == "verify"

    at.text_area(key="st_prompt").set_value("").run()
    assert at.error and "empty" in at.error[0].value
    assert at.session_state["step_session"] is session and session.steps.drafts == drafts


def test_settings_change_resets_with_notice(embedded_pair):
    at = start("en")
    click(at, LABELS["en"]["propose"])
    at.sidebar.slider(key="cfg_gamma").set_value(6).run()
    # nothing committed yet: start over, and say which round in flight was dropped
    assert any("round 1 in flight was dropped" in i.value for i in at.info)
    session = at.session_state["step_session"]
    assert session.phase == "propose" and session.config.gamma == 6


def test_settings_change_after_rounds_continues_from_committed_text(embedded_pair):
    at = start("en")
    click(at, "Run one round")
    click(at, LABELS["en"]["propose"])  # a round in flight
    committed = list(at.session_state["step_session"].ids)
    at.sidebar.slider(key="cfg_gamma").set_value(2).run()
    assert any("round 2 in flight was dropped; committed text kept" in i.value for i in at.info)
    session = at.session_state["step_session"]
    assert session.ids == committed and session.phase == "propose"
    assert session.config.gamma == 2 and not session.history


def test_bad_prompt_blocks_actions_until_fixed(embedded_pair):
    lab = LABELS["en"]
    at = start("en")
    click(at, lab["propose"])
    at.text_area(key="st_prompt").set_value("").run()
    actions = [lab["propose"], lab["verify"], lab["commit"], "Run one round", "Run N rounds"]
    for _ in range(2):  # the message stays and nothing can run on the old prompt
        assert at.error and "empty" in at.error[0].value
        assert all(b.disabled for b in at.button if b.label in actions)
        at.run()
    at.text_area(key="st_prompt").set_value("KING:\nWe").run()
    assert not at.error and at.session_state["step_session"].phase == "propose"


def test_run_n_rounds_to_the_end_disables_the_steps(embedded_pair):
    at = start("en")
    at.sidebar.number_input(key="cfg_max_new").set_value(4).run()
    click(at, "Run N rounds")
    session = at.session_state["step_session"]
    assert session.phase == "finished" and len(session.generated_ids) == 4
    assert all(
        b.disabled for b in at.button if b.label in (LABELS["en"]["propose"], "Run one round")
    )


def test_end_of_text_inside_a_round_is_explained(embedded_pair):
    """Greedy "ROMEO:\\n" with γ = 3: a drafted end-of-text is accepted, so the commit stops
    before the correction token; the page says so instead of explaining a correction."""
    at = start("en")
    at.sidebar.slider(key="cfg_gamma").set_value(3).run()
    at.text_area(key="st_prompt").set_value("ROMEO:\n").run()
    while at.session_state["step_session"].phase != "finished":
        click(at, "Run one round")
    session = at.session_state["step_session"]
    assert session.stop_reason == "eos" and session.history[-1].commit.kind == "stopped"
    [box] = strip_parts(at, "sd-alert sd-info")  # the stop's message, above the strip
    assert box.startswith("Stopped inside the round (end of text)")
    assert not any("Rejected at position" in w.value for w in at.warning)


def test_first_click_after_a_prompt_edit_proposes_on_the_new_prompt(embedded_pair):
    """The prompt box edited without Ctrl+Enter, then ① Propose: the browser sends both in
    one rerun. The click acts on the edited prompt at once and says the history was
    cleared (it did nothing and wiped the history silently before)."""
    at = start("en")
    click(at, "Run one round")
    at.text_area(key="st_prompt").set_value("KING:\nWe")  # no .run(): same rerun as the click
    click(at, LABELS["en"]["propose"])
    session = at.session_state["step_session"]
    assert session.ids[: session.prompt_len] == embedded_pair.tokenizer.encode("KING:\nWe")
    assert session.phase == "verify" and len(session.steps.drafts) == 4 and not session.history
    assert any("Prompt changed" in i.value and "1 earlier round" in i.value for i in at.info)


def test_click_on_verify_after_a_prompt_edit_runs_on_the_new_prompt(embedded_pair):
    at = start("en")
    click(at, LABELS["en"]["propose"])
    at.text_area(key="st_prompt").set_value("KING:\nWe")
    click(at, LABELS["en"]["verify"])
    session = at.session_state["step_session"]
    assert session.ids[: session.prompt_len] == embedded_pair.tokenizer.encode("KING:\nWe")
    assert session.phase == "commit"


def test_sampling_tables_never_print_zero_for_a_nonzero_probability(embedded_pair):
    """T = 1, seed 0, round 6 of the default prompt printed ``p(y)=0.0000``; unchecked ``u``
    printed ``None``; an edit at T > 0 did not say that the outcome is random."""
    at = start("en")
    at.sidebar.slider(key="cfg_temperature").set_value(1.0).run()
    for _ in range(5):
        click(at, "Run one round")
    click(at, LABELS["en"]["propose"])
    click(at, LABELS["en"]["wrong"])
    [note] = [w.value for w in at.warning if "random" in w.value]
    assert "a1 = " in note and "0.0000" not in note
    click(at, LABELS["en"]["verify"])
    checks = html_tables(at, "checks-table")[0]
    cells = [str(x) for col in checks.columns for x in checks[col]]
    assert "0.0000" not in cells and "None" not in cells
    statuses = list(checks[checks.columns[-1]])
    u = list(checks["u"])
    assert all(x == "—" for x, st in zip(u, statuses, strict=True) if st.startswith("discarded"))
    assert not any("0.0000" in m.value for m in at.markdown)


def test_greedy_marks_the_argmax_at_discarded_positions(embedded_pair):
    at = start("en")
    click(at, LABELS["en"]["propose"])
    click(at, LABELS["en"]["wrong"])
    click(at, LABELS["en"]["verify"])
    checks = html_tables(at, "checks-table")[0]
    argmax = list(checks[checks.columns[2]])
    assert not argmax[0].endswith("†") and all(a.endswith("†") for a in argmax[1:])
    notes = strip_parts(at, "sd-note")  # under the checks table, in the strip's element
    assert any("computed by the same forward after the rejected token" in n for n in notes)


def test_presenter_mode_from_the_url_and_compact_kv_table(embedded_pair):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["presenter"] = "1"
    at.run()
    assert not at.exception and at.session_state["presenter"] is True
    at.sidebar.number_input(key="cfg_max_new").set_value(60).run()
    click(at, "Run N rounds")
    click(at, LABELS["en"]["propose"])
    session = at.session_state["step_session"]
    [kv] = html_tables(at, "kv-table")
    rows = list(kv[kv.columns[-1]])
    assert rows.count("tentative") == len(session.steps.drafts)  # the round in flight: all shown
    assert len(rows) <= len(session.steps.drafts) + 3  # and only a few settled rows before it
    at2 = AppTest.from_file(APP, default_timeout=120)
    at2.query_params["presenter"] = "maybe"
    at2.run()
    assert at2.session_state["presenter"] is False


@pytest.mark.parametrize(("lang", "empty"), [("en", "prompt is empty"), ("zh", "提示词为空")])
def test_a_prompt_of_only_spaces_gets_the_empty_prompt_message(embedded_pair, lang, empty):
    at = start(lang)
    click(at, LABELS[lang]["propose"])
    session = at.session_state["step_session"]
    drafts = session.steps.drafts
    at.text_area(key="st_prompt").set_value("   \n  ").run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert empty in error
    assert at.session_state["step_session"] is session and session.steps.drafts == drafts
    buttons = {b.label: b for b in at.button}
    assert buttons[LABELS[lang]["verify"]].disabled  # nothing runs on the old prompt


def test_the_replace_with_box_shows_the_token_an_edit_put_there(embedded_pair):
    lab = LABELS["en"]
    at = start("en")
    click(at, lab["propose"])
    before = at.selectbox(key="edit_choice").value
    assert before == at.session_state["step_session"].steps.drafts[0]  # greedy: q's top token
    click(at, lab["wrong"])
    now = at.session_state["step_session"].steps.drafts[0]
    assert now != before  # the target's 2nd choice replaced it
    assert at.selectbox(key="edit_choice").value == now
    # a later position, then "agree": the box follows the position's token each time
    at.selectbox(key="edit_pos").set_value(2).run()
    click(at, lab["agree"])
    session = at.session_state["step_session"]
    assert at.selectbox(key="edit_choice").value == session.steps.drafts[1]


def test_agree_that_redrafts_fewer_tokens_than_the_position_is_no_error(embedded_pair):
    """Prompt lookup drafts 4 tokens from this prompt; "agree" at position 2 replaces the
    first with the target's token, after which lookup finds no match and the draft is 1
    token long: the edit succeeds and the box shows the one token left."""
    lab = LABELS["en"]
    at = open_app(
        lang="en",
        prompt="the king the king the king",
        state={"cfg_drafter": "ngram", "edit_keep_open": True},
    )
    click(at, lab["propose"])
    assert len(at.session_state["step_session"].steps.drafts) == 4
    at.selectbox(key="edit_pos").set_value(2).run()
    click(at, lab["agree"])
    session = at.session_state["step_session"]
    assert not at.error, [e.value for e in at.error]
    assert len(session.steps.drafts) == 1 and session.phase == "verify"
    assert at.selectbox(key="edit_choice").value == session.steps.drafts[0]


def test_a_refused_grammar_stays_typed_after_a_step_back(embedded_pair):
    """A custom regex that does not compile is shown with its error while the session
    keeps the last grammar that did; step back replays that session and must not put the
    kept grammar over the typed text."""
    from specdec_core.core import grammar_compile

    grammar_compile.reset()  # this process's compile budget: earlier tests may have spent it
    at = start("en")
    at.selectbox(key="cfg_grammar").set_value("regex").run()
    at.text_area(key="cfg_grammar_text").set_value("([a-z").run()
    [refused] = [e.value for e in at.sidebar.error]
    assert "does not compile" in refused
    kept = at.session_state["step_session"].config.grammar
    click(at, LABELS["en"]["propose"])
    next(b for b in at.button if b.key == "btn_step_back").click().run()
    assert not at.exception
    session = at.session_state["step_session"]
    assert session.phase == "propose" and session.config.grammar == kept
    assert at.selectbox(key="cfg_grammar").value == "regex"
    assert at.text_area(key="cfg_grammar_text").value == "([a-z"
    assert [e.value for e in at.sidebar.error] == [refused]


@pytest.mark.parametrize(
    ("lang", "limit"),
    [
        ("en", "At most 20,000 characters: the browser does not take a longer paste"),
        ("zh", "最多 20,000 个字符：浏览器不会接收更长的粘贴"),
    ],
)
def test_the_prompt_box_says_its_limit_beside_it(embedded_pair, lang, limit):
    """Streamlit's text area drops a change past ``max_chars`` in the browser (the app
    never sees a 240,000-character paste), so the caption under the box names the limit
    the box enforces."""
    at = open_app(lang=lang)
    box = at.text_area(key="st_prompt")
    assert box.proto.max_chars == 20_000
    [caption] = [c.value for c in at.caption if limit in c.value]
    assert caption.endswith(("rare byte tokens.", "罕见的字节 token。"))  # the embedded note
