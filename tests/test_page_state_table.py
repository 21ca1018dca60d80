"""The step page's state table with the recurrent drafter (``ui/step/state_view.py``):
after Propose the checkpoints the proposal saved, after an edit at position 1 and Verify
the same, after Commit the checkpoint at the committed text restored and the ones that had
read rejected drafts discarded; both languages; no table with a KV-cache drafter."""

from __future__ import annotations

import pytest
from conftest import click, html_tables, open_app

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


def _table(at) -> list[tuple[int, str]]:
    [df] = html_tables(at, "state-table")
    return [(int(a), s) for a, s in zip(df[df.columns[0]], df[df.columns[-1]], strict=True)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_state_table_through_one_round(embedded_pair, lang):
    lab = LABELS[lang]
    at = open_app(lang=lang, state={"cfg_drafter": "recurrent"})
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
    assert list(df[df.columns[1]])[1:] != ["—"] * 3  # the rejected drafts' tokens are named


def test_no_state_table_with_a_kv_cache_drafter(embedded_pair):
    at = open_app(lang="en")
    click(at, LABELS["en"]["propose"])
    assert html_tables(at, "state-table") == [] and html_tables(at, "kv-table")
