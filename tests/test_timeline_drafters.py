"""Every drafter's round timeline (``generate(..., trace_timeline=True)``) and the speed
page's caption of it (``ui/speed/why.drafting_text``): the drafter's timed steps are the
lane's draft bars, so its time is not counted as loop overhead, and the caption says what
it ran in its own terms, en and zh."""

from __future__ import annotations

import pytest

from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.ui.i18n import in_language
from specdec_core.ui.speed.why import drafting_text

PROMPT = "ROMEO: But soft, what light through yonder window breaks? It is the east, and"
NAMES = ("model", "ngram", "early-exit", "eagle", "mtp", "block", "recurrent")


def _run(pair, name):
    drafter = make_named_drafter(pair, name)
    config = SessionConfig(gamma=4, max_new_tokens=24)
    return generate(pair, PROMPT, config, "speculative", drafter, trace_timeline=True)


@pytest.mark.parametrize("name", NAMES)
def test_the_draft_bars_are_the_drafters_timed_steps(embedded_pair, name):
    run = _run(embedded_pair, name)
    line, stats = run.timeline, run.stats
    bars = [s for s in line.forwards if s.kind == "draft"]
    assert (line.drafter, line.draft_forwards) == (name, stats.draft_forwards)
    # the bars add up to the drafter's own time, so the overhead is the loop's alone
    assert sum(s.ms for s in bars) == pytest.approx(stats.draft_forward_ms, abs=1e-6)
    rounds = len(line.rounds)
    if name == "ngram":  # a string match: no model, no bar
        assert (stats.draft_forwards, len(bars), stats.draft_forward_ms) == (0, 0, 0.0)
    elif name == "mtp":  # no forward of its own: one pass of the heads per drafting round
        assert stats.draft_forwards == 0 and 0 < len(bars) <= rounds
    elif name == "eagle":  # head forwards, and the LM head rows each feature needs
        assert 0 < stats.draft_forwards < len(bars)
    else:  # a bar per forward (recurrent: per GRU step)
        assert len(bars) == stats.draft_forwards > 0


@pytest.mark.parametrize(
    ("name", "en", "zh"),
    [
        ("model", "{n} draft-model forwards ({pn} a round)", "{n} 次草稿模型前向（每轮 {pn} 次）"),
        (
            "recurrent",
            "{n} GRU steps of the recurrent drafter ({pn} a round: one per token its state reads)",
            "递归草稿器的 {n} 步 GRU（每轮 {pn} 步：状态每读一个 token 走一步）",
        ),
        (
            "mtp",
            "{b} MTP head passes on the target's last hidden state ({pb} a round; "
            "no model forward)",
            "{b} 次 MTP 多头计算，读取目标模型的最后一个隐藏状态（每轮 {pb} 次；没有模型前向）",
        ),
        (
            "ngram",
            "no draft forward (prompt lookup copies what followed the last n-gram earlier in "
            "the text)",
            "没有草稿前向（提示词查找照抄文本前面同一个 n-gram 之后的内容）",
        ),
    ],
)
def test_the_caption_says_what_the_drafter_ran(embedded_pair, name, en, zh):
    line = _run(embedded_pair, name).timeline
    n, rounds = line.draft_forwards, len(line.rounds)
    b = sum(1 for s in line.forwards if s.kind == "draft")
    values = {"n": n, "b": b, "pn": f"{n / rounds:.1f}", "pb": f"{b / rounds:.1f}"}
    for code, text in (("en", en), ("zh", zh)):
        with in_language(code):
            assert drafting_text(line) == text.format(**values), code
    if name == "recurrent":  # before: "0 draft forwards" and the GRU's time as overhead
        assert n == b > rounds


def test_every_drafter_has_its_caption_and_bar_name():
    from specdec_core.ui.i18n import strings

    for name in NAMES:
        for key in ("sp_tl_drafting_", "sp_tl_draft_"):
            assert set(strings()[key + name]) == {"en", "zh"}, key + name
