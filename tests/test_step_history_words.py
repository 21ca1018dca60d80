"""The step page's history reads right: a round's counts add up ("2 of 4 drafts accepted
+ 1 correction = +3 tokens"), a history with no checked draft says α is undefined instead
of "0.000 over 0 positions", and English counts of one are singular. AppTest on the
embedded pair, both languages."""

from __future__ import annotations

import pytest
from conftest import click, open_app

from specdec_core.engine.chain.records import summarize
from specdec_core.ui.i18n import plural, tr

STEP = {
    "en": ("① Propose", "② Verify", "③ Commit / reject"),
    "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝"),
}
NO_DRAFTS = {"en": "no drafts checked yet", "zh": "还没有检查过任何草稿"}


def history_text(at) -> tuple[str, str]:
    """(the statistics line, the history's HTML)."""
    stats = [m.value for m in at.markdown if "Σ min(p, q)" in m.value or "α：" in m.value]
    stats += [m.value for m in at.markdown if "α: —" in m.value]
    html = " ".join(h.value for h in at.get("html") if 'class="history-round"' in h.value)
    return (stats[0] if stats else ""), html


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_history_without_a_checked_draft_says_alpha_is_undefined(embedded_pair, lang):
    propose, verify, commit = STEP[lang]
    at = open_app(lang=lang, prompt="ROMEO:", state={"cfg_drafter": "ngram"})
    for label in (propose, verify, commit):
        click(at, label)
    session = at.session_state["step_session"]
    assert summarize(session.records).checked == 0 and len(session.history) == 1
    stats, html = history_text(at)
    assert NO_DRAFTS[lang] in stats and "—" in stats
    assert "0.000" not in stats
    none = tr("history_round_none", lang).split("{head}")[1].split(";")[0].split("；")[0]
    assert none in html  # "no drafts, nothing checked", not "accepted 0/0"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_rounds_counts_add_up_to_the_tokens_it_added(embedded_pair, lang):
    propose, verify, commit = STEP[lang]
    at = open_app(lang=lang)
    for _ in range(3):
        for label in (propose, verify, commit):
            click(at, label)
    session = at.session_state["step_session"]
    stats, html = history_text(at)
    for r in session.history:
        n, g, k = r.record.accepted, len(r.verify.checks), len(r.commit.appended)
        assert r.commit.kind in ("correction", "bonus") and k == n + 1
        kind = tr(f"kind_{r.commit.kind}", lang)
        if lang == "en":
            drafts = "draft" if g == 1 else "drafts"
            tokens = "token" if k == 1 else "tokens"
            want = f"{n} of {g} {drafts} accepted + 1 {kind} = +{k} {tokens}"
        else:
            want = f"{g} 个草稿中接受 {n} 个 + 1 个{kind} = 新增 {k} 个 token"
        assert want in html, (want, html[:400])
    s = summarize(session.records)
    total = len(session.ids) - session.prompt_len
    fmt = {"acc": s.accepted, "drafted": s.drafted, "target": total - s.accepted, "total": total}
    head = tr("history_stats", lang).split(" · ")[1]
    assert plural(head, fmt).format(**fmt) in stats
    assert f"= {s.acceptance_rate:.3f}" in stats


def test_english_counts_of_one_are_singular_and_chinese_has_no_plural():
    en, zh = tr("live_students_line", "en"), tr("live_students_line", "zh")
    assert plural(en, {"n": 1}).format(n=1, code="X").endswith("**1** student in room X")
    assert plural(en, {"n": 3}).format(n=3, code="X").endswith("**3** students in room X")
    assert "|" not in plural(zh, {"n": 1})
    answered = plural(tr("live_answered", "en"), {"m": 1}).format(n=1, m=1)
    assert answered == "**1 of 1** student answered"


def test_no_count_is_written_with_s_in_parentheses():
    """Counts choose singular or plural ({n|one|many}): no "token(s)" and no "1 positions"
    in any page's strings."""
    import json
    import re
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "assets" / "strings"
    checked = 0
    for path in sorted(folder.glob("*.json")):
        for key, entry in json.loads(path.read_text("utf-8")).items():
            en = entry["en"]
            assert not re.search(r"\w\(s\)", en), (key, en)
            counts = set(re.findall(r"\{(\w+)\|", en))
            if not counts:
                continue
            one, many = plural(en, dict.fromkeys(counts, 1)), plural(en, dict.fromkeys(counts, 2))
            assert not re.search(r"\{\w+\|", one + many) and one != many, key
            assert not re.search(r"\{\w+\|", entry["zh"]), key  # Chinese: no plural forms
            checked += 1
    assert checked >= 15
    rolled = plural(tr("kv_rolled_back", "en"), {"t": 1, "d": 1}).format(t=1, d=1)
    assert "dropped 1 position," in rolled
