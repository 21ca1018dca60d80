"""The lossless page's captions read the figures they describe: section ④'s price chart
(its numbers at the largest δ are the chart's own last points) and section ③'s χ² rows
(equal rows explained by the same seeds drawing the same tokens, checked against the
tests' own counts). AppTest on the embedded pair, en and zh."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from specdec_core.bench.lossless import held_out_prompts
from specdec_core.bench.quantized import quant_figures
from specdec_core.bench.same_seed import first_tokens_test
from specdec_core.core.quant import quantized_pair
from specdec_core.server.pairs import get_pair
from specdec_core.ui.i18n import plural
from tests.conftest import like_the_app, open_app

PAGE = "pages/lossless.py"
REPO = Path(__file__).resolve().parents[1]
STRINGS = json.loads((REPO / "assets/strings/lossless.json").read_text("utf-8"))


def s(key: str, lang: str, **fmt) -> str:
    """The string ``key`` as the page shows it with ``fmt`` (plural forms resolved)."""
    text = STRINGS[key][lang]
    return plural(text, fmt).format(**fmt) if fmt else text


def open_page(lang: str):
    at = open_app(lang=lang)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def price_chart(at) -> dict[str, tuple[list[float], list[float]]]:
    """The price chart's traces: name → (x, y)."""
    [chart] = [c for c in at.get("plotly_chart") if "ll_fig_price" in str(c.proto.id)]
    data = json.loads(chart.proto.spec)["data"]
    return {d["name"]: (_values(d["x"]), _values(d["y"])) for d in data if d.get("name")}


def _values(v) -> list[float]:
    """A trace's coordinates: a list, or plotly's typed array ``{dtype, bdata}``."""
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def price_caption(at, lang: str) -> str:
    head = s("ll_price_end", lang).split("{")[0]
    [text] = [m.value for m in at.markdown if m.value.startswith(head)]
    return text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_price_caption_reads_the_charts_last_points(embedded_pair, lang):
    """Default settings (textbook rows, ε = 0.09, top-1): at δ = 1 typical acceptance still
    accepts everything (TV 0.40) and threshold acceptance its top-1 (TV 0.08): the caption
    says so with the chart's numbers, never "almost nothing passes"."""
    at = open_page(lang)
    traces = price_chart(at)
    rule = {r: s(f"ll_rule_{r}", lang) for r in ("typical", "threshold")}
    tv = {r: traces[s("ll_price_tv", lang).format(rule=n)] for r, n in rule.items()}
    acc = {r: traces[s("ll_price_A", lang).format(rule=n)] for r, n in rule.items()}
    assert tv["typical"][0][-1] == 1.0  # the chart's right end
    text = price_caption(at, lang)
    # typical: every draft passes at δ = 1, the output is q
    assert acc["typical"][1][-1] == pytest.approx(1.0)
    typical_end = s("ll_price_end_all", lang).format(
        rule=rule["typical"], tv=f"{tv['typical'][1][-1]:.2f}"
    )
    assert typical_end in text and "0.40" in typical_end
    threshold_end = s("ll_price_end_some", lang).format(
        rule=rule["threshold"],
        acc=f"{acc['threshold'][1][-1]:.2f}",
        tv=f"{tv['threshold'][1][-1]:.2f}",
    )
    assert threshold_end in text and "0.08" in threshold_end and "0.20" in threshold_end
    # why neither rule closes at δ = 1: typical's bar is capped at ε, threshold's top-1
    assert s("ll_price_why_typical", lang).format(bar="0.0900", delta="1", eps="0.09") in text
    assert s("ll_price_why_threshold", lang, k=1) in text
    assert ("top 1 token, whatever δ" if lang == "en" else "最高的 1 个 token") in text
    assert "almost nothing passes" not in text and "几乎没有草稿通过" not in text


def test_price_caption_follows_the_knobs(embedded_pair):
    """Top-k 0 and ε = 1: the threshold rule passes nothing at δ = 1 (p ≥ 1 never holds) —
    now the caption says it is lossless there and slower than the exact rule."""
    at = open_page("en")
    at.selectbox(key="ll_topk").set_value(0).run()
    at.number_input(key="ll_eps").set_value(1.0).run()
    assert not at.exception
    traces = price_chart(at)
    thr = traces["threshold acceptance: P(accept)"]
    assert thr[1][-1] == 0.0
    text = price_caption(at, "en")
    assert "threshold acceptance accepts no draft" in text
    assert s("ll_price_why_threshold", "en", k=0) not in text
    # typical at δ = 1 with ε = 1: the bar is e^(−H(p)) = 0.4072 (H = 0.898 nats): t1 passes
    p = np.array([0.6, 0.3, 0.1])
    bar = float(np.exp((p * np.log(p)).sum()))
    assert f"{bar:.4f}" in text
    typ = traces["typical acceptance: P(accept)"]
    assert f"probability {typ[1][-1]:.2f}" in text and typ[1][-1] == pytest.approx(0.2)


def test_equal_chi_rows_are_explained(embedded_pair):
    """Section ① (float32) and ③ (int8, int4) on one prompt with the same N: float32's and
    int8's tests drew the same first tokens, int4's did not (checked here against
    first_tokens_test's own counts), and the page names exactly the rows that agree and
    why, with each quantized target's measured TV to float32."""
    n = 20
    at = open_page("en")
    at.number_input(key="ll_n_seeds").set_value(n).run()
    at.button(key="ll_run_seed").click().run()
    at.number_input(key="ll_q_prompts").set_value(5).run()
    at.number_input(key="ll_q_seeds").set_value(n).run()
    for kind in ("int8", "int4"):
        at.radio(key="ll_q_kind").set_value(kind).run()
        at.button(key="ll_run_quant").click().run()
        assert not at.exception and not at.error
    prompt = held_out_prompts(12)[0]
    tests = {
        "f32": first_tokens_test(embedded_pair, prompt, n, 1, 4),
        **{
            k: first_tokens_test(quantized_pair(embedded_pair, k), prompt, n, 1, 4)
            for k in ("int8", "int4")
        },
    }
    draws = {k: {x: c[:2] for x, c in v.counts.items()} for k, v in tests.items()}
    assert draws["f32"] == draws["int8"]  # what the page explains
    assert draws["int4"] != draws["f32"]  # int4 moved one seed's draw: not in the sentence
    assert tests["f32"].p_value == tests["int8"].p_value
    kinds = ("int8", "int4")
    app_pair = get_pair("embedded")  # the pair the page ran on (CUDA where present)
    tvs = {
        k: like_the_app(quant_figures, app_pair, k, held_out_prompts(5), 16).tv_first_mean
        for k in kinds
    }
    for lang in ("en", "zh"):  # the results are kept across a language switch
        at.session_state["lang"] = lang
        at.run()
        [info] = [i.value for i in at.info if s("ll_chi_same", lang)[:6] in i.value]
        sep = s("ll_chi_list_sep", lang)
        assert info == s("ll_chi_same", lang).format(
            rows=" = ".join([s("ll_chi_row_f32", lang), "int8"]),
            n=n,
            tvs=sep.join(f"{k} {tvs[k]:.4f}" for k in kinds),
        )
    assert tvs["int4"] > tvs["int8"] > 0  # the targets differ; float32's and int8's draws coincide


@pytest.mark.parametrize(
    ("key", "fmt", "en", "zh"),
    [
        ("ll_verdict_agree", {"n": 10, "k": 1, "share": "5%"}, "first 1 token of", "前 1 个 token"),
        (
            "ll_verdict_agree",
            {"n": 10, "k": 2, "share": "5%"},
            "first 2 tokens of",
            "前 2 个 token",
        ),
        (
            "ll_verdict_odd",
            {"n": 10, "k": 1, "share": "1%"},
            "first 1 token looks",
            "前 1 个 token",
        ),
        (
            "ll_verdict_odd",
            {"n": 10, "k": 2, "share": "1%"},
            "first 2 tokens look",
            "前 2 个 token",
        ),
        ("ll_fig_outcome", {"k": 1}, "first 1 token", "前 1 个 token"),
        (
            "ll_search_stats",
            {"tried": 1, "positions": 9, "near": 0, "smallest": "0.1"},
            "Searched 1 prompt,",
            "搜索了 1 个提示词",
        ),
        (
            "ll_search_stats",
            {"tried": 2, "positions": 9, "near": 0, "smallest": "0.1"},
            "Searched 2 prompts,",
            "搜索了 2 个提示词",
        ),
        (
            "ll_trade_note",
            {"prompts": 1, "seeds": 1, "tokens": 8, "gamma": 4, "eps": "0.09", "k": 1},
            "1 prompt × 1 seed,",
            "1 个提示词 × 1 个种子",
        ),
        (
            "ll_trade_note",
            {"prompts": 3, "seeds": 2, "tokens": 8, "gamma": 4, "eps": "0.09", "k": 1},
            "3 prompts × 2 seeds,",
            "3 个提示词 × 2 个种子",
        ),
        ("ll_price_why_threshold", {"k": 2}, "top 2 tokens, whatever", "最高的 2 个 token"),
    ],
)
def test_counts_read_as_words(key, fmt, en, zh):
    """English counts choose singular or plural ("1 token", "2 tokens", never "token(s)");
    Chinese writes the noun once."""
    assert en in s(key, "en", **fmt) and "(s)" not in s(key, "en", **fmt)
    assert zh in s(key, "zh", **fmt) and "|" not in s(key, "zh", **fmt)
