"""AppTest drives the "Where drafts come from" page on the embedded pair: run the three
drafters on a preset prompt and check the numbers shown, in both languages."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.drafters.draft_vocab import describe
from specdec_core.drafters.registry import drafters_for, make_named_drafter
from specdec_core.ui.i18n import plural

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
STRINGS = json.loads((REPO / "assets/strings/drafters.json").read_text("utf-8"))


def s(key: str, lang: str) -> str:
    return STRINGS[key][lang]


def start(lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page("pages/drafters.py").run()
    assert not at.exception, at.exception
    return at


def run_button(at: AppTest, lang: str):
    [button] = [b for b in at.button if b.label == s("dr_run", lang)]
    return button


def click_run(at: AppTest, lang: str) -> list:
    run_button(at, lang).click().run()
    assert not at.exception, at.exception
    return at.session_state["dr_results"][1]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_drafters_side_by_side(embedded_pair, lang):
    at = start(lang)
    assert at.text_area(key="dr_prompt").value == s("dr_prompt_repetitive", lang)
    n_layer = embedded_pair.target.config.n_layer
    at.number_input(key="cfg_max_new").set_value(16)  # the sidebar's
    at.select_slider(key="dr_knob_early").set_value(n_layer)  # all layers: the target
    names = drafters_for(embedded_pair)
    assert names[:4] == ("model", "ngram", "early-exit", "eagle")
    assert [c.label for c in at.checkbox if c.key.startswith("dr_use_")] == [
        s("dr_name_" + n, lang) for n in names
    ]
    results = click_run(at, lang)
    knobs = {"ngram": 3, "early-exit": n_layer}
    assert [(r.name, r.knob) for r in results] == [(n, knobs.get(n)) for n in names]
    assert all(r.new_tokens == 16 and r.same_as_target for r in results)
    assert results[2].acceptance_rate == 1.0
    caps = {n: make_named_drafter(embedded_pair, n).max_gamma for n in names}
    assert [r.gamma for r in results] == [min(4, caps[n] or 4) for n in names]

    # three metric cards: speed-up, α, mean accepted length — the engine's values
    shown = [(m.label, m.value) for m in at.metric]
    expected = []
    for r in results:
        expected += [
            (s("dr_metric_speedup", lang), f"{r.speedup:.2f}×"),
            (s("dr_metric_alpha", lang), f"{r.acceptance_rate:.2f}"),
            (s("dr_metric_mean", lang), f"{r.mean_accepted:.2f}"),
        ]
    assert shown == expected

    # the table: target alone first, then one row per drafter
    df = at.dataframe[0].value
    assert len(df) == len(names) + 1
    assert df["speedup"].iloc[0] == "1.00×" and df["alpha"].iloc[0] == "—"
    assert list(df["speedup"].iloc[1:]) == [f"{r.speedup:.2f}×" for r in results]
    assert list(df["alpha"].iloc[1:]) == [f"{r.acceptance_rate:.2f}" for r in results]
    assert list(df["mean"].iloc[1:]) == [f"{r.mean_accepted:.2f}" for r in results]
    assert list(df["empty"].iloc[1:]) == [str(r.empty_rounds) for r in results]
    assert list(df["rounds"]) == ["16"] + [str(r.rounds) for r in results]
    assert list(df["draft_ms"].iloc[1:]) == [f"{r.draft_ms_per_round:.2f}" for r in results]
    assert list(df["same"]) == ["✓"] * (len(names) + 1)
    assert any(c.value == s("dr_greedy_note", lang) for c in at.caption)

    # one token strip per drafter: accepted spans = accepted drafts
    strips = [h.proto.body for h in at.html if 'class="tok ' in h.proto.body]
    assert len(strips) == len(names)
    for body, r in zip(strips, results, strict=True):
        assert body.count("tok-accepted") == r.accepted
        assert body.count("tok-rejected") == sum(
            a < d for a, d in zip(r.accepted_per_round, r.drafted_per_round, strict=True)
        )
        assert "tok-discarded" not in body  # hidden until the toggle is on
    assert strips[2].count("tok-rejected") == 0  # all layers: nothing rejected

    # the "other drafters" table is rendered from the strings file
    assert any(s("dr_oth_eagle_method", lang) in m.value for m in at.markdown)
    # seven sources run on this page: the intro describes all seven (the recurrent drafter
    # was missing), and the "not run" table no longer lists the Medusa heads (the MTP heads
    # run) as a method not run here
    intro = s("dr_intro", lang)
    assert ("all seven on the embedded pair" if lang == "en" else "内置模型对上共七种") in intro
    assert intro.count("\n- ") == 7 and intro in [m.value for m in at.markdown]
    assert ("Recurrent drafter" if lang == "en" else "递归草稿器") in intro
    table = next(m.value for m in at.markdown if s("dr_oth_eagle_method", lang) in m.value)
    assert s("dr_oth_medusa_method", lang) not in table
    assert s("dr_oth_block_method", lang) in table and "Jacobi" in table


def test_novel_preset_prompt_lookup_only_and_errors(embedded_pair):
    at = start("en")
    at.radio(key="dr_preset").set_value("novel").run()
    assert at.text_area(key="dr_prompt").value == s("dr_prompt_novel", "en")
    for name in drafters_for(embedded_pair):
        if name != "ngram":
            at.checkbox(key=f"dr_use_{name}").uncheck()
    at.select_slider(key="dr_knob_ngram").set_value(1)
    at.number_input(key="cfg_max_new").set_value(24)
    [r] = click_run(at, "en")
    assert (r.name, r.knob) == ("ngram", 1)
    assert r.drafted_per_round[0] == 0 and r.empty_rounds > 0  # nothing to copy at first
    assert [m.value for m in at.metric] == [
        f"{r.speedup:.2f}×",
        f"{r.acceptance_rate:.2f}",
        f"{r.mean_accepted:.2f}",
    ]
    at.toggle(key="dr_show_discarded").set_value(True).run()
    assert not at.exception

    # an empty prompt: a clear message, the last results stay
    at.text_area(key="dr_prompt").set_value("").run()
    assert at.info[0].value == s("dr_stale", "en")
    run_button(at, "en").click().run()
    assert at.error and at.error[0].value.startswith("Nothing was changed:")
    assert at.session_state["dr_results"][1] == [r]

    # no drafter chosen: the run button is disabled and says why
    at.checkbox(key="dr_use_ngram").uncheck().run()
    assert run_button(at, "en").disabled
    assert at.warning[0].value == s("dr_none_selected", "en")


def test_language_switch_keeps_the_preset_working(embedded_pair):
    """A radio keeps its value as its label: a label that changed with the language used
    to raise KeyError on the next click."""
    at = start("en")
    at.radio(key="dr_preset").set_value("novel").run()
    at.sidebar.radio(key="lang").set_value("zh").run()
    assert not at.exception, at.exception
    assert at.radio(key="dr_preset").value == "novel"
    at.radio(key="dr_preset").set_value("repetitive").run()
    assert not at.exception, at.exception
    assert "To-morrow" in at.text_area(key="dr_prompt").value


# ------------------------------------------------------------------ every source
SOURCES = json.loads((REPO / "assets/strings/sources.json").read_text("utf-8"))
SPEED = json.loads((REPO / "assets/strings/speed.json").read_text("utf-8"))
STRINGS_STEP = json.loads((REPO / "assets/strings/step_through.json").read_text("utf-8"))


def src(key: str, lang: str, **fmt) -> str:
    text = SOURCES[key][lang]
    return plural(text, fmt).format(**fmt) if fmt else text


def source_tables(at: AppTest) -> list:
    return [d.value for d in at.dataframe if "draft_fwd" in d.value.columns]


def check_tables(at: AppTest, comp, temperature: float, lang: str) -> None:
    """One table per prompt, one row per source, each cell the comparison's value."""
    tables = source_tables(at)
    assert len(tables) == len(comp.prompts)
    for table, (prompt, _) in zip(tables, comp.prompts, strict=True):
        rows = comp.rows_for(prompt, temperature)
        assert list(table["source"]) == [src("src_name_" + r.name, lang) for r in rows]
        assert list(table["draft_fwd"]) == [f"{r.draft_forwards_per_round:.2f}" for r in rows]
        assert list(table["extra_target"]) == [
            f"{r.extra_target_forwards_per_round:.2f}" for r in rows
        ]
        assert list(table["alpha"]) == [f"{r.acceptance_rate:.2f}" for r in rows]
        assert list(table["accepted"]) == [f"{r.accepted_per_round:.2f}" for r in rows]
        assert list(table["tokens_pred"]) == [f"{r.predicted_tokens_per_round:.2f}" for r in rows]
        assert list(table["speedup_pred"]) == [f"{r.predicted_speedup:.2f}×" for r in rows]
        assert list(table["heads"]) == [
            "—" if r.head_evaluations_per_round is None else f"{r.head_evaluations_per_round:.2f}"
            for r in rows
        ]
        by_name = dict(zip((r.name for r in rows), table["draft_fwd"], strict=True))
        if "block" in by_name:  # one forward for the whole block, every round
            assert by_name["block"] == "1.00"
        if "mtp" in by_name:  # no model forward; its head evaluations in their own column
            assert by_name["mtp"] == "0.00"
            mtp = next(r for r in rows if r.name == "mtp")
            assert mtp.draft_forwards_per_round == 0.0 and mtp.head_evaluations_per_round > 0
        if "ngram" in by_name:
            assert by_name["ngram"] == "0.00"
    charts = [c for c in at.get("plotly_chart") if "src_fig" in str(c.proto.id)]
    if not comp.conclusive:  # too busy or one pass: no ranking drawn
        assert charts == []
        return
    [chart] = charts
    figure = json.loads(chart.proto.spec)
    bars = [d for d in figure["data"] if d["type"] == "bar"]
    assert len(bars) == len(comp.prompts)
    shown = [x.replace("<br>", " ") for x in bars[0]["x"]]  # long names break in two
    assert shown == [src("src_name_" + n, lang) for n in comp.sources]


def test_every_source_compared_on_both_pages_in_both_languages(embedded_pair, monkeypatch):
    """The drafters page runs every ``drafters_for`` source on both prompts (greedy and
    T = 1); its tables and chart show the comparison's own values; the same result renders
    in Chinese and on the speed page. The queue's clock stands still, so the 30 s budget
    never cuts the comparison short however busy the machine is (the budget itself:
    ``test_long_measurements.py``, on a fake clock)."""
    from specdec_core.server.jobs import QUEUE

    monkeypatch.setattr(QUEUE, "clock", lambda: 0.0)
    at = start("en")
    at.select_slider(key="dr_src_tokens").set_value(8)
    at.select_slider(key="dr_src_repeats").set_value(1)
    at.button(key="dr_src_run").click().run()
    assert not at.exception, at.exception
    for _ in range(600):  # the comparison runs on the measurement queue: the page polls
        if "dr_src_bg_job" not in at.session_state:
            break
        time.sleep(0.3)
        at.run()
    _, comp = at.session_state["dr_sources"]
    assert comp.sources == drafters_for(embedded_pair)
    assert comp.max_new_tokens == 8 and comp.how.repeats == 1
    assert [temp for _, temp in comp.settings] == [0.0, 1.0, 0.0, 1.0]
    check_tables(at, comp, 0.0, "en")
    at.radio(key="dr_src_temp").set_value(1.0).run()
    check_tables(at, comp, 1.0, "en")
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception, at.exception
    check_tables(at, comp, 1.0, "zh")  # the choice survives a language switch
    assert any(src("src_forwards_note", "zh") == c.value for c in at.caption)
    # the speed page draws the same comparison (its own session key)
    stored = at.session_state["dr_sources"]
    at.switch_page("pages/speed.py")
    at.session_state["sp_sources"] = stored
    at.run()
    assert not at.exception, at.exception
    check_tables(at, comp, 0.0, "zh")
    names = [SPEED["sp_drafter_" + n]["zh"] for n in drafters_for(embedded_pair)]
    assert at.selectbox(key="sp_drafter").options == names  # the single-source measurement


STEP = {"en": ("① Propose", "② Verify"), "zh": ("① 提议", "② 验证")}
COMMIT = {"en": "③ Commit / reject", "zh": "③ 提交 / 拒绝"}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_page_shows_each_sources_forwards_and_own_state(embedded_pair, lang):
    """Every source on the step page: the verified round's caption names its draft
    forwards in the drafter's own terms (the block drafter: 1 forward; the MTP heads: no
    model forward; prompt lookup: none), and the KV section says when a drafter keeps no
    state of its own (MTP heads, prompt lookup), the draft-KV count then '—'."""
    from conftest import open_app

    propose, verify = STEP[lang]
    for name in drafters_for(embedded_pair):
        at = open_app(lang=lang, state={"cfg_drafter": name})
        if name == "mtp":  # the heads draft nothing before the target has a hidden state
            for label in (propose, verify, COMMIT[lang]):
                next(b for b in at.button if b.label == label).click().run()
        next(b for b in at.button if b.label == propose).click().run()
        next(b for b in at.button if b.label == verify).click().run()
        assert not at.exception, (name, at.exception)
        session = at.session_state["step_session"]
        assert session.drafter.name == name
        how = STRINGS_STEP["st_intro_how_" + name][lang]  # the header follows the source
        intro = STRINGS_STEP["st_intro"][lang].format(how=how)
        assert intro in [m.value for m in at.markdown], name
        serial = {"en": "one at a time", "zh": "逐个"}[lang]
        assert (serial in intro) == (name in ("model", "early-exit", "eagle", "recurrent")), name
        proposed = session.steps.current_propose
        forwards = proposed.draft_forwards
        captions = "\n".join(c.value for c in at.caption)
        own = session.drafter.cached_ids() is not None
        if own:  # in its own terms: EAGLE head forwards, GRU steps, else draft forwards
            said = {
                "en": {
                    "eagle": f"{forwards} EAGLE head forwards this round",
                    "recurrent": f"{forwards} GRU steps this round (one per token its state reads)",
                },
                "zh": {
                    "eagle": f"本轮 {forwards} 次 EAGLE 特征头前向",
                    "recurrent": f"本轮 GRU 走了 {forwards} 步（状态每读一个 token 走一步）",
                },
            }[lang].get(name, src("st_draft_forwards", lang, f=forwards))
            assert forwards >= 1 and said in captions, name
            assert "forward(s)" not in captions, name
        elif name == "mtp":  # no model forward: one head evaluation per drafted position
            assert forwards == 0 and proposed.gamma == 4
            assert src("st_draft_heads", lang, f=4) in captions, name
        elif forwards:
            assert src("st_draft_forwards", lang, f=forwards) in captions, name
        else:
            assert src("st_draft_no_forward", lang) in captions, name
        if name == "block":
            assert forwards == 1 and own
        if name == "mtp":
            assert not own and session.drafter.head_evaluations == 4  # round 1 drafted none
        recurrent = session.drafter.state_view() is not None  # a state, not a KV cache
        label = STRINGS_STEP["kv_draft_state_len" if recurrent else "kv_draft_len"][lang]
        draft_kv = [m.value for m in at.metric if m.label == label]
        if own:
            assert draft_kv == [str(session.kv_state().draft_kv_len)], name
            assert src("kv_no_state", lang) not in captions
        else:
            assert draft_kv == ["—"], name
            key = f"kv_no_state_{name}" if f"kv_no_state_{name}" in SOURCES else "kv_no_state"
            assert src(key, lang) in captions, name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cards_say_which_drafters_run_int8_weights(embedded_pair, lang, monkeypatch):
    """Under the draft model's card: the int8 note (its q is what the rule checks); EAGLE
    stays float32 unless ``SPECDEC_DRAFT_WEIGHTS=int8`` (then both cards say it); none with
    ``SPECDEC_DRAFT_WEIGHTS=float32``."""
    monkeypatch.delenv("SPECDEC_DRAFT_WEIGHTS", raising=False)
    assert [c.value for c in start(lang).caption].count(s("dr_int8", lang)) == 1
    monkeypatch.setenv("SPECDEC_DRAFT_WEIGHTS", "int8")
    assert [c.value for c in start(lang).caption].count(s("dr_int8", lang)) == 2
    monkeypatch.setenv("SPECDEC_DRAFT_WEIGHTS", "float32")
    assert s("dr_int8", lang) not in [c.value for c in start(lang).caption]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_eagle_card_names_its_sampled_head(embedded_pair, lang):
    """EAGLE drafts greedily on 1,024 ids and samples on 2,048 on the embedded pair: its card
    says both N and each one's held-out share, read from the pair's file; the draft model
    (one N) gets no sampled sentence."""
    eagle, model = describe(embedded_pair, "eagle"), describe(embedded_pair, "model")
    assert (eagle["n"], eagle["n_sampled"], model["n"]) == (1024, 2048, 1024)
    assert "n_sampled" not in model
    assert round(eagle["share"], 4) == 0.8277 and round(eagle["share_sampled"], 4) == 0.9153
    captions = [c.value for c in start(lang).caption]
    sampled = s("dr_draft_vocab_sampled", lang).format(**eagle)
    assert sum(sampled in c for c in captions) == 1
    assert s("dr_draft_vocab", lang).format(**eagle) + " " + sampled in captions


def _cards(n: int) -> None:
    from specdec_core.ui.drafters.results import card_columns

    for i, col in enumerate(card_columns(n)):
        col.markdown(f"card {i}")


@pytest.mark.parametrize(("n", "slots"), [(7, 8), (4, 4), (3, 3)])
def test_source_cards_sit_in_rows_of_at_most_four(n, slots):
    """Seven sources in one row left each card ≈ 45 px at 1024 px (labels and values broken
    letter by letter): rows of four, the last one's cards as wide as the others."""
    at = AppTest.from_function(_cards, args=(n,), default_timeout=60).run()
    assert [c.weight for c in at.columns] == [1 / min(n, 4)] * slots
    shown = [[m.value for m in c.markdown] for c in at.columns]
    assert shown == [[f"card {i}"] for i in range(n)] + [[]] * (slots - n)
