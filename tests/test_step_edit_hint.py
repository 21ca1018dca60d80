"""The step page's edit box (AppTest, embedded pair, both languages): after ② Verify it
says where editing went (step back first, or the next round), and an edit's message
shows the tokens as code spans, so a "." never merges with the arrow ("→ ..")."""

from __future__ import annotations

import pytest
from conftest import click, open_app

from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import tr

STEP = {
    "en": ("① Propose", "② Verify", "③ Commit / reject"),
    "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝"),
}


def hint(lang: str) -> str:
    return tr("st_edit_after_verify", lang).format(
        propose=tr("st_propose", lang),
        verify=tr("st_verify", lang),
        back=tr("lt_step_back", lang),
        commit=tr("st_commit", lang),
    )


def edit_boxes(at, lang: str) -> int:
    return sum(e.label == tr("st_edit", lang) for e in at.expander)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_after_verify_the_edit_box_says_step_back_first(embedded_pair, lang):
    propose, verify, commit = STEP[lang]
    at = open_app(lang=lang, state={"edit_keep_open": True})
    click(at, propose)
    assert edit_boxes(at, lang) == 1 and hint(lang) not in [i.value for i in at.info]
    click(at, verify)
    assert edit_boxes(at, lang) == 0
    assert hint(lang) in [i.value for i in at.info]
    assert tr("lt_step_back", lang) in hint(lang)
    click(at, commit)  # the next round has no drafts yet: nothing to say about editing
    assert hint(lang) not in [i.value for i in at.info]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_edit_to_a_full_stop_is_not_read_as_an_ellipsis(embedded_pair, lang):
    propose = STEP[lang][0]
    at = open_app(lang=lang, state={"edit_keep_open": True})
    click(at, propose)
    session = at.session_state["step_session"]
    old = session.token(session.steps.drafts[0])
    at.text_input(key="edit_text").set_value(".")
    [button] = [b for b in at.button if b.label == tr("edit_apply_text", lang)]
    button.click().run()
    assert not at.exception
    [notice] = [i.value for i in at.info if "→" in i.value]
    assert "→ “`.`”" in notice and "→ .." not in notice  # quoted as a sentence names a token
    assert notice.startswith(tr("edit_done", lang).split("{old}")[0].format(k=1))
    assert f"“`{visible_token(old)}`” →" in notice


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_edit_box_is_drawn_only_when_opened_and_stays_open_across_rounds(embedded_pair, lang):
    """Closed (the default), Propose draws the box's title and none of its widgets; once a
    student opened it, it is open again in the next round's verify phase (the expander's
    own state is dropped while Commit and Propose do not draw it)."""
    propose, verify, commit = STEP[lang]
    at = open_app(lang=lang)
    click(at, propose)
    assert edit_boxes(at, lang) == 1
    assert [s.key for s in at.selectbox if s.key in ("edit_pos", "edit_choice")] == []
    assert not [b for b in at.button if b.label == tr("edit_apply_text", lang)]
    at.session_state["edit_keep_open"] = True  # what opening the box does (its on_change)
    at.run()
    assert [s.key for s in at.selectbox if s.key in ("edit_pos", "edit_choice")] == [
        "edit_pos",
        "edit_choice",
    ]
    click(at, verify)
    click(at, commit)
    click(at, propose)
    assert at.text_input(key="edit_text").value == ""
    assert len([b for b in at.button if b.label == tr("edit_apply_text", lang)]) == 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_step_click_with_the_box_closed_runs_no_target_preview(embedded_pair, lang, monkeypatch):
    """The preview (a cache-free target forward) is drawn only inside the open box: a
    Propose click with the box closed runs none; opening the box runs it once, the box
    lists the target's top tokens ("(p)"), and a rerun in the same phase keeps them."""
    from specdec_core.engine.chain.session import ChainSteps
    from specdec_core.ui.figures.common import visible_token

    calls: list[int] = []
    real = ChainSteps.target_preview

    def counted(self, top_n: int = 5):
        calls.append(top_n)
        return real(self, top_n)

    monkeypatch.setattr(ChainSteps, "target_preview", counted)
    at = open_app(lang=lang)
    click(at, STEP[lang][0])
    assert edit_boxes(at, lang) == 1 and calls == []
    at.session_state["edit_keep_open"] = True  # what opening the box does (its on_change)
    at.run()
    at.run()  # another rerun in the same phase: the kept preview, no forward
    assert not at.exception and calls == [5]
    session = at.session_state["step_session"]
    q_ids = {tok.id for tok in session.steps.current_draft_dists[0].tokens[:6]}
    top_p = real(session.steps, 5)[0]  # position 1, the box's default
    [choice] = [s for s in at.selectbox if s.key == "edit_choice"]
    p_labels = {label for label in choice.options if label.endswith("(p)")}
    assert p_labels == {f"{visible_token(tok)}  (p)" for tok in top_p if tok.id not in q_ids}


@pytest.mark.parametrize(
    ("lang", "one", "two"),
    [
        ("en", "at the edited position (q is one-hot", "at the edited positions (q is one-hot"),
        ("zh", "被编辑位置的精确接受概率", "被编辑位置的精确接受概率"),
    ],
)
def test_a_sampled_edit_names_its_positions_in_the_singular_or_plural(
    embedded_pair, lang, one, two
):
    """At T = 1 an edit decides nothing: the warning gives each edited position's exact
    acceptance probability, "position" for one edit and "positions" for two."""
    at = open_app(lang=lang, state={"edit_keep_open": True, "cfg_temperature": 1.0})
    click(at, STEP[lang][0])

    def warning(pos: int) -> str:
        at.selectbox(key="edit_pos").set_value(pos).run()
        click(at, tr("edit_wrong", lang).format(k=pos))
        [said] = [w.value for w in at.warning if "a1 = " in w.value]
        return said

    first = warning(1)
    assert sorted(at.session_state["step_session"].steps.edited_positions) == [1]
    assert one in first and "a2 = " not in first and "(s)" not in first
    second = warning(2)
    assert sorted(at.session_state["step_session"].steps.edited_positions) == [1, 2]
    assert two in second and "a2 = " in second
