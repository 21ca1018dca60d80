"""The step page's state table with the recurrent drafter (``ui/step/state_view.py``):
after Propose the checkpoints the proposal saved, after an edit at position 1 and Verify
the same, after Commit the checkpoint at the committed text restored and the ones that had
read rejected drafts discarded; both languages; no table with a KV-cache drafter."""

from __future__ import annotations

import pytest
from conftest import click, html_tables, open_app

from specdec_core.ui.figures.common import visible_token

LABELS = {
    "en": {
        "propose": "① Propose",
        "verify": "② Verify",
        "commit": "③ Commit / reject",
        "wrong": "Use the target's 2nd choice at position 1",
        "saved": "saved this round",
        "kept": "kept",
        "restored": "restored (the live state again)",
        "discarded": "discarded (it read a rejected draft)",
    },
    "zh": {
        "propose": "① 提议",
        "verify": "② 验证",
        "commit": "③ 提交 / 拒绝",
        "wrong": "位置 1 改用目标模型的第二选择",
        "saved": "本轮保存",
        "kept": "保留",
        "restored": "已恢复（重新成为当前状态）",
        "discarded": "已丢弃（它读过被拒绝的草稿）",
    },
}


def _table(at) -> list[tuple[int | None, str]]:
    """``(length the checkpoint read, status)``: the table shows the 0-based position of
    the last token read (as the KV table numbers rows), "—" for the zero state."""
    [df] = html_tables(at, "state-table")
    rows = zip(df[df.columns[0]], df[df.columns[-1]], strict=True)
    return [(0 if a == "—" else int(a) + 1, s) for a, s in rows]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_state_table_through_one_round(embedded_pair, lang):
    lab = LABELS[lang]
    at = open_app(lang=lang, state={"cfg_drafter": "recurrent", "edit_keep_open": True})
    assert not at.exception
    p = len(embedded_pair.tokenizer.encode(at.text_area[0].value))
    assert _table(at) == [(0, lab["kept"])]  # the zero state, nothing read yet
    click(at, lab["propose"])  # γ = 4: a checkpoint after the prompt and after y_1..y_3
    assert _table(at) == [(0, lab["kept"])] + [(p + i, lab["saved"]) for i in range(4)]
    click(at, lab["wrong"])  # back to the checkpoint after the prompt, y_1..y_3 read again
    click(at, lab["verify"])
    assert _table(at) == [(p, lab["kept"])] + [(p + i, lab["saved"]) for i in (1, 2, 3)]
    click(at, lab["commit"])  # rejected at 1: the state after the prompt is live again
    assert _table(at) == [(p, lab["restored"])] + [(p + i, lab["discarded"]) for i in (1, 2, 3)]
    [df] = html_tables(at, "state-table")
    [kv] = html_tables(at, "kv-table")
    kv_tokens = dict(zip(kv[kv.columns[0]], kv[kv.columns[1]], strict=True))
    assert df.iloc[0, 0] == str(p - 1) and df.iloc[0, 1] == kv_tokens[str(p - 1)]  # one numbering
    session = at.session_state["step_session"]
    read = [visible_token(session.token(i)) for i in session.history[0].record.drafted[:3]]
    assert list(df[df.columns[1]])[1:] == read  # each discarded checkpoint's rejected draft
    # the counters and the rollback lines speak of a restored state, not a cut cache
    state_len = {"en": "draft state: tokens read", "zh": "草稿状态已读入的 token 数"}[lang]
    assert [m.label for m in at.metric][2] == state_len
    restored = {"en": "restored from its checkpoint", "zh": "从已提交文本处的检查点恢复"}[lang]
    assert any(restored in c.value for c in at.caption), [c.value for c in at.caption]
    cut = {"en": "draft cache", "zh": "草稿模型缓存"}[lang]
    shown = [m.value for m in [*at.caption, *at.warning]]
    assert not any(cut in v for v in shown), shown


def test_no_state_table_with_a_kv_cache_drafter(embedded_pair):
    at = open_app(lang="en")
    click(at, LABELS["en"]["propose"])
    assert html_tables(at, "state-table") == [] and html_tables(at, "kv-table")
    assert [m.label for m in at.metric][2] == "draft KV length"


def test_a_lesson_link_opens_the_step_page_with_the_recurrent_drafter(embedded_pair):
    from specdec_core.lessons.link import LessonState, decode, encode

    params = encode(LessonState(page="step_through", drafter="recurrent"))
    state, problems = decode(params, ["embedded"])
    assert state.drafter == "recurrent" and not problems
    at = open_app(params, lang="en")
    assert at.session_state["step_session"].drafter.name == "recurrent"
    click(at, LABELS["en"]["propose"])
    assert [s for _, s in _table(at)].count(LABELS["en"]["saved"]) == 4
