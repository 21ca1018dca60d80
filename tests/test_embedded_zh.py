"""The shipped Chinese pair ``embedded-zh`` (Tang poems, one token per character): its
tokenizer keeps characters whole, greedy speculative output equals the target alone's for
every drafter, a greedy line is Chinese, the draft agrees with the target on held-out
lines, and a Chinese screen opens the app on it."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import torch
from conftest import REPO, open_app, run_json
from transformers import AutoTokenizer

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.core.models import EMBEDDED_ZH_DIR
from specdec_core.core.settings import SessionConfig
from specdec_core.core.trace import byte_groups, token_lookup
from specdec_core.drafters.registry import DRAFTER_NAMES, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.records import summarize

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # batch-1 forwards of small models
POEMS = REPO / "data" / "poetry_zh.txt"
HAN = re.compile(r"[\u4e00-\u9fff]")
PUNCT = "，。？！；：、"
LINE = "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。"


def test_files_are_safetensors_and_small():
    total = 0
    for part in ("target", "draft", "eagle"):
        folder = EMBEDDED_ZH_DIR / part
        assert (folder / "model.safetensors").is_file(), folder
        assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
        total += sum(f.stat().st_size for f in folder.iterdir())
    assert total <= 20 * 2**20
    report = json.loads((EMBEDDED_ZH_DIR / "training_report.json").read_text())
    assert report["vocab_size"] == 5120 and report["seed"] == 0
    assert report["corpus"] == "data/poetry_zh.txt"


def test_tokenizer_keeps_common_characters_whole_and_round_trips(zh_pair):
    tok = AutoTokenizer.from_pretrained(EMBEDDED_ZH_DIR / "target", local_files_only=True)
    draft = AutoTokenizer.from_pretrained(EMBEDDED_ZH_DIR / "draft", local_files_only=True)
    assert tok.get_vocab() == draft.get_vocab() == zh_pair.tokenizer.get_vocab()
    ids = tok.encode(LINE)
    assert len(ids) == len(LINE) and [tok.decode([i]) for i in ids] == list(LINE)
    assert tok.decode(ids) == LINE and zh_pair.eos_token_id == 0
    counts = Counter(POEMS.read_text(encoding="utf-8").replace("\n", ""))
    common = "".join(ch for ch, _ in counts.most_common(4000))
    assert len(tok.encode(common)) == len(common)  # no common character in bytes
    mixed = "春眠𤞇 ok!\n"  # a character outside the vocabulary, Latin letters
    assert tok.decode(tok.encode(mixed)) == mixed


def test_strip_shows_a_rare_character_whole_not_byte_pieces(zh_pair):
    info = token_lookup(zh_pair.tokenizer)
    tokens = [info(i) for i in zh_pair.tokenizer.encode("月𤞇光")]
    assert [t.text for t in tokens][0] == "月" and len(tokens) == 6
    assert [t.partial for t in tokens] == [False, True, True, True, True, False]
    assert byte_groups(tokens) == {1: (5, "𤞇")}  # the strip joins the four bytes


PROMPTS = ["床前明月光，", "白日依山尽，黄河入海流。\n"]


@pytest.mark.slow  # 2 prompts × 2 runs × 24 tokens per drafter
@pytest.mark.parametrize("drafter", DRAFTER_NAMES)
def test_greedy_speculative_equals_target_alone_for_every_drafter(zh_pair, drafter):
    if drafter not in drafters_for(zh_pair):
        pytest.skip(f"{drafter} is not trained for embedded-zh")
    config = SessionConfig(gamma=4, max_new_tokens=24)
    accepted = 0
    for prompt in PROMPTS:
        alone = generate(zh_pair, prompt, config, mode="autoregressive")
        spec = generate(zh_pair, prompt, config, drafter=make_named_drafter(zh_pair, drafter))
        assert spec.output_ids == alone.output_ids, (drafter, prompt)
        accepted += sum(r.accepted for r in spec.records)
    assert accepted > 0  # the drafter was really used


def test_greedy_equals_transformers_generate(zh_pair):
    prompt = PROMPTS[0]
    run = generate(zh_pair, prompt, SessionConfig(gamma=3, max_new_tokens=20))
    ids = torch.tensor([zh_pair.tokenizer.encode(prompt)])
    want = zh_pair.target.generate(
        ids,
        do_sample=False,
        max_new_tokens=len(run.output_ids),
        pad_token_id=0,
        attention_mask=torch.ones_like(ids),
    )[0, ids.shape[1] :]
    assert run.output_ids == want.tolist()


def test_greedy_continuation_is_a_chinese_line(zh_pair):
    run = generate(zh_pair, "床前明月光，", SessionConfig(max_new_tokens=12), "autoregressive")
    line = run.text.split("\n")[0]
    assert "\ufffd" not in run.text and not re.search(r"[A-Za-z]", run.text)
    assert len(line) >= 2 and line[-1] in PUNCT, run.text
    assert all(HAN.match(ch) for ch in line[:-1]), run.text


@pytest.mark.slow
def test_draft_greedy_acceptance_on_held_out_lines(zh_pair):
    """α of the draft model (greedy, γ = 4) over 12 held-out first lines: ≥ 0.5."""
    config = SessionConfig(gamma=4, max_new_tokens=20)
    records = []
    for prompt in held_out_prompts(12, "embedded-zh"):
        assert prompt.endswith("。\n") and HAN.match(prompt[0])
        records += generate(zh_pair, prompt, config).records
    stats = summarize(records)
    assert stats.checked > 60 and stats.acceptance_rate >= 0.5, stats


def test_cli_runs_on_the_chinese_pair(capsys):
    args = ["run", "--pair", "embedded-zh", "--prompt", "春眠不觉晓，", "--temperature", "0"]
    out = run_json(capsys, *args, "--max-new-tokens", "8", "--json")
    alone = run_json(capsys, *args, "--max-new-tokens", "8", "--mode", "autoregressive", "--json")
    assert out["output_ids"] == alone["output_ids"] and len(out["output_ids"]) == 8
    assert HAN.search(out["text"]) and "\ufffd" not in out["text"]


@pytest.mark.parametrize(
    ("params", "state", "pair", "prompt"),
    [
        ({"lang": "zh"}, {}, "embedded-zh", "床前明月光，"),  # a Chinese screen
        ({"lang": "en"}, {}, "embedded", "ROMEO:\nBut soft"),
        ({}, {}, "embedded", "ROMEO:\nBut soft"),  # a bare URL (the browser's language: en)
    ],
)
def test_first_visit_lands_on_the_pair_of_the_screen(params, state, pair, prompt):
    at = open_app(params, state=state)
    assert at.session_state["pair_name"] == pair
    assert at.text_area[0].value.startswith(prompt)


def test_the_pair_caption_stays_true_after_switching_to_english():
    """The caption's reason for the Chinese pair is about how the app was opened, so it
    is still true once the teacher switches the screen to English."""
    at = open_app({"lang": "zh"})
    zh = " ".join(c.value for c in at.sidebar.caption)
    assert "应用以中文界面打开" in zh, zh
    at.sidebar.radio(key="lang").set_value("en").run()
    en = " ".join(c.value for c in at.sidebar.caption)
    assert at.session_state["pair_name"] == "embedded-zh"
    assert "was opened on a Chinese screen" in en and "is in Chinese" not in en, en


def test_the_pair_is_in_the_lesson_link():
    from specdec_core.lessons.link import LessonState, decode, encode

    state = LessonState(pair="embedded-zh", lang="en", prompt="春眠不觉晓，", gamma=3)
    params = encode(state)
    back, problems = decode(params, ["embedded", "embedded-zh"])
    assert problems == [] and back.pair == "embedded-zh" and back.prompt == "春眠不觉晓，"
    at = open_app(params)  # an English screen opening a link to the Chinese pair
    assert at.session_state["pair_name"] == "embedded-zh" and at.session_state["lang"] == "en"
    assert at.text_area[0].value == "春眠不觉晓，"


@pytest.mark.slow
def test_scenarios_are_found_on_the_chinese_pair_with_its_own_prompts(zh_pair):
    from specdec_core.lessons.scenarios import find_scenarios

    found = {f.key: f.state for f in find_scenarios(zh_pair)}
    assert {"first_error_3", "first_error_1", "lookup_run"} <= {k for k, s in found.items() if s}
    assert all(HAN.match(s.prompt) and s.pair == "embedded-zh" for s in found.values() if s)


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [
        "pages/lessons.py",
        "pages/acceptance_lab.py",
        "pages/speed.py",
        "pages/drafters.py",
        "pages/lossless.py",
    ],
)
def test_every_page_opens_on_the_chinese_pair(page):
    at = open_app({"lang": "zh"})
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.session_state["pair_name"] == "embedded-zh"
    shown = " ".join(str(a.value) for a in at.text_area)
    assert "ROMEO" not in shown  # the prompt boxes hold the pair's own text
