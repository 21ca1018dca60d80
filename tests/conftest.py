"""Shared fixtures: tiny random GPT-2 pairs saved with ``save_pretrained`` to a temp folder
and loaded through the same ``from_pretrained`` path as the real presets (offline); one
``streamlit run app.py`` server and one Chromium for every real-browser test; the
``slow`` marker on the browser tests and on the tests listed in :data:`SLOW`
(``pytest -m "not slow"`` is the quick loop; the README's ``pytest -q`` runs everything)."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported

import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from specdec_core.core.models import EMBEDDED_DIR, EMBEDDED_ZH_DIR, ModelPair, load_pair

os.environ.setdefault("HF_HUB_OFFLINE", "1")
#: One torch thread for the suite, as the app's pair registry sets on a machine of ≤ 2 cores
#: (``server/pairs.py``): the models here are tiny, so a second thread only waits at each
#: op's barrier (one embedded-pair forward on the 2-core machine at load 17: 1.4 ms of CPU at
#: one thread, 52 ms at two). Tests of two threads set it themselves.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
TEXTBOOK_PATH = REPO / "tests" / "data" / "textbook.json"
CORPUS = REPO / "data" / "tinyshakespeare.txt"
TEXTBOOK = json.loads(TEXTBOOK_PATH.read_text(encoding="utf-8"))
EOS = "<|endoftext|>"


def _tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS.read_text()[:20000]], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS
    )


def save_tiny(
    folder: Path, tokenizer, layers: int, seed: int, n_positions: int = 64, vocab: int | None = None
) -> Path:
    torch.manual_seed(seed)
    config = GPT2Config(
        n_layer=layers,
        n_embd=32,
        n_head=2,
        vocab_size=vocab or len(tokenizer),
        n_positions=n_positions,
        bos_token_id=0,
        eos_token_id=0,
        initializer_range=0.3,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def _fresh_compile_budget() -> None:
    """Every test starts with an unspent grammar compile budget and no remembered overrun:
    every AppTest page of this process is one client, and one compile that overran its
    5 s under load was refused again in every later test for 10 minutes."""
    from specdec_core.core import grammar_compile

    with grammar_compile._LOCK:  # spending and remembered overruns, not compiled grammars
        grammar_compile._CLIENTS.clear()
        grammar_compile._REFUSED.clear()


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    """Folders: ``target`` (2 layers), ``draft`` (1 layer), ``short`` (target with a
    24-position context), ``odd_vocab`` (draft with a different vocabulary size)."""
    root = tmp_path_factory.mktemp("tiny")
    tok = _tokenizer(300)
    return {
        "target": save_tiny(root / "target", tok, 2, seed=1),
        "draft": save_tiny(root / "draft", tok, 1, seed=2),
        "short": save_tiny(root / "short", tok, 2, seed=1, n_positions=24),
        "odd_vocab": save_tiny(root / "odd", tok, 1, seed=3, vocab=len(tok) + 7),
    }


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A file of the corpus's first 20,000 bytes: what the training-script tests train on."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(CORPUS.read_bytes()[:20_000])
    return path


@pytest.fixture(scope="session")
def tiny_lossless(tiny_pair) -> Callable:
    """``check(drafter)``: a greedy speculative run of ``drafter`` on the tiny pair (γ 3, 12
    new tokens after "To be"), asserted equal to the target alone's output (computed once
    per session); returns the run. The training-script tests check what they trained."""
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.generate import generate

    config = SessionConfig(gamma=3, max_new_tokens=12)
    expected = generate(tiny_pair, "To be", config, mode="autoregressive").output_ids

    def check(drafter):
        run = generate(tiny_pair, "To be", config, drafter=drafter)
        assert run.output_ids == expected
        return run

    return check


@pytest.fixture(scope="session")
def tiny_pair(tiny_dirs) -> ModelPair:
    return load_pair((tiny_dirs["target"], tiny_dirs["draft"]), device="cpu", allow_custom=True)


@pytest.fixture(scope="session")
def self_pair(tiny_dirs) -> ModelPair:
    """Draft == target: every greedy draft is accepted."""
    return load_pair((tiny_dirs["target"], tiny_dirs["target"]), device="cpu", allow_custom=True)


@pytest.fixture(scope="session")
def embedded_pair() -> ModelPair:
    assert (EMBEDDED_DIR / "target" / "config.json").is_file(), "embedded pair not built"
    return load_pair("embedded", device="cpu")


@pytest.fixture(scope="session")
def zh_pair() -> ModelPair:
    """The shipped Chinese pair (``embedded-zh``: Tang poems, one token per character)."""
    assert (EMBEDDED_ZH_DIR / "target" / "config.json").is_file(), "embedded-zh not built"
    return load_pair("embedded-zh", device="cpu")


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One torch thread for a module of batch-1 forwards of small models (one is as fast as
    two, and two spin on a loaded machine); the suite's setting is restored after it. Use
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


#: New tokens of :func:`heldout_greedy` (the trained heads' greedy-equality tests).
HELDOUT_TOKENS = 16


@pytest.fixture(scope="session")
def heldout_prompts() -> list[str]:
    """The 30 held-out prompts of ``benchmarks/measure_acceptance.py`` (the last 10 % of the
    corpus, which no model or head of the embedded pair trained on), read-only."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "measure_acceptance", REPO / "benchmarks" / "measure_acceptance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.heldout_prompts(30))


@pytest.fixture(scope="session")
def heldout_greedy(embedded_pair, heldout_prompts) -> list[list[int]]:
    """The embedded target alone's greedy ids (:data:`HELDOUT_TOKENS` new tokens) for each of
    :func:`heldout_prompts`, computed once per session at one torch thread; shared by every
    module that asks, so read-only."""
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.generate import generate

    config, before = SessionConfig(max_new_tokens=HELDOUT_TOKENS), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = [generate(embedded_pair, p, config, mode="autoregressive") for p in heldout_prompts]
    finally:
        torch.set_num_threads(before)
    return [r.output_ids for r in runs]


@pytest.fixture
def pair_arg(tiny_dirs, monkeypatch) -> str:
    """``--pair`` value for the tiny pair (custom folders allowed for this test)."""
    monkeypatch.setenv("SPECDEC_ALLOW_CUSTOM_MODELS", "1")
    return f"{tiny_dirs['target']},{tiny_dirs['draft']}"


def run_json(capsys, *args: str) -> dict:
    """Run the CLI in-process with ``--json`` output and parse it (exit status 0)."""
    from specdec_core.__main__ import main

    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


APP = str(REPO / "app.py")


def start_app(lang: str = "en"):
    """An ``AppTest`` of the app after its first run in ``lang`` (no exception)."""
    return open_app(lang=lang)


def click_button(at, label: str) -> None:
    """Click the enabled button labelled ``label`` and rerun (no exception)."""
    [button] = [b for b in at.button if b.label == label]
    assert not button.disabled, f"{label} is disabled"
    button.click().run()
    assert not at.exception, at.exception


class _TableParser(HTMLParser):
    """Cell texts of every ``<table>`` in an HTML string, with each table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(at, name: str) -> list[pd.DataFrame]:
    """The HTML tables of class ``name`` (e.g. ``kv-table``, ``checks-table``) that the
    last run drew with ``st.html``, in page order, as DataFrames of cell texts."""
    found = []
    for element in at.get("html"):
        parser = _TableParser()
        parser.feed(element.value)
        for classes, rows in parser.tables:
            if name in classes.split():
                found.append(pd.DataFrame(rows[1:], columns=rows[0]))
    return found


def strip_parts(at, part: str) -> list[str]:
    """The texts (tags removed) of the step panel's strip-and-checks element's ``part``s:
    ``"sd-note"`` (the caption-sized notes), ``"sd-alert sd-info"`` (or ``sd-success``,
    ``sd-warning``: the message boxes)."""
    [element] = [h.value for h in at.get("html") if 'class="sd-strip-checks"' in h.value]
    found = re.findall(rf'<div class="{part}"[^>]*>(.*?)</div>', element, re.S)
    return [html_lib.unescape(re.sub(r"<[^>]+>", "", f)) for f in found]


def open_app(
    params: dict[str, str] | None = None,
    *,
    lang: str | None = None,
    prompt: str | None = None,
    state: dict | None = None,
    timeout: float = 120,
):
    """The app in Streamlit's ``AppTest``, run once without an exception: ``params`` as
    URL query parameters, ``lang``, the step page's ``prompt`` and other session
    ``state`` set before the first run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if lang is not None:
        at.session_state["lang"] = lang
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if prompt is not None:
        at.session_state["st_prompt"] = prompt
    at.run()
    assert not at.exception, at.exception
    return at


click = click_button  # the name the page tests use


def like_the_app(fn: Callable, *args):
    """``fn(*args)`` computed in a fresh thread, as the app computes each script run: torch
    gives a thread its CPU thread count at that thread's first parallel op (the count set
    last, e.g. by ``SPECDEC_TORCH_THREADS`` in the app's pair registry), so a replay made
    here runs at the app's thread count, not at the one this test's thread started with
    (1 and 2 threads differ in low bits)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


def shown_error(exc: Exception, lang: str | None = None) -> str:
    """The one error box the app's ``show_error`` draws for ``exc`` (in ``lang``)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(
        "import streamlit as st\n"
        "from specdec_core.ui.errors import show_error\n"
        "show_error(st.session_state['exc'])\n",
        default_timeout=30,
    )
    at.session_state["exc"] = exc
    if lang is not None:
        at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    [box] = at.error
    return box.value


# ------------------------------------------------------------------ markers: the quick loop
#: Tests marked ``slow`` besides every ``browser`` test: a module name marks the whole
#: module, ``module::test`` one test (all its parameters), ``module::test[id]`` one case.
#: The training tests, the modules that start real servers, the long measurements, the
#: held-out and every-pair sweeps, and single tests over ~7 s at load 8 (≈ 3 s idle);
#: seconds as measured with ``pytest --durations`` on the 2-core machine with other work
#: running. ``pytest -m "not slow"`` leaves them out; the README's ``pytest -q`` (CI) runs
#: them. Each rule keeps a fast case in the quick loop: greedy equality
#: (``test_generate``, ``test_session``, ``test_tree`` on the tiny pair, ``test_mtp``'s few
#: prompts on the embedded pair), the sampling rule's χ² (``test_embedded``'s real rows,
#: ``test_acceptance``), replay (``test_lesson_link``, ``test_replay_advance``'s few
#: clicks), KV rollback (``test_kvcache``'s seed 0, ``test_tree``'s compaction,
#: ``test_tree_session``'s depth 1).
SLOW = {
    "test_train_embedded.py": "trains the embedded pair's recipe on a tiny budget (4 s)",
    "test_eagle.py": "trains EAGLE heads, greedy checks on held-out prompts (45 s)",
    "test_mtp.py::test_greedy_equals_target_on_heldout_prompts": (
        "30 held-out prompts per γ 1 / 2 / 4 + the target alone (26-36 s each)"
    ),
    "test_mtp.py::test_greedy_tree_equals_target_on_heldout_prompts": (
        "30 held-out prompts per tree shape (24-50 s each)"
    ),
    "test_mtp.py::test_chi2_first_tokens_at_temperature_one": "600 sampled runs (72 s)",
    "test_replicas.py": "two replicas behind nginx, Chromium, 1,200 half-open requests (86 s)",
    "test_classroom_server.py": "a real server driven over websockets (80 s)",
    "test_hostile_server.py": "a real server under a storm of full reruns (40 s)",
    "test_page_speed.py::test_tiny_measurement_is_consistent": "a full measurement (40 s)",
    "test_check.py::test_quick_check_runs_without_streamlit_and_every_case_passes": (
        "the device check --quick in a subprocess: 14 greedy cases, replays, 200 sampled runs, "
        "6 benches (60 s idle, 216 s at load 12)"
    ),
    "test_compare.py::test_compare_sources_every_source_real_values": (
        "every source × 2 prompts × greedy / T = 1, twice, then each run again (≈ 60 s idle)"
    ),
    "test_lessons_drafts.py::test_chapter_7_block_question_and_the_live_winner": (
        "every source run on the repetitive prompt, then chapter 7 in AppTest (≈ 25 s)"
    ),
    "test_page_speed.py::test_sweeps_stop_and_chinese": "two sweeps (20 s)",
    "test_jobs.py::test_stop_while_a_task_runs_drops_its_result": "a worker process (35 s)",
    "test_jobs.py::test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_new_one": (
        "two worker processes (22 s)"
    ),
    "test_jobs.py::test_measure_runs_in_the_worker_process": "a worker process (19 s)",
    "test_bench.py::test_bench_cli_json_contract_on_embedded_pair": "a CLI bench run (28 s)",
    "test_bench.py::test_bench_cli_json_keys_are_pinned": "a CLI bench run (21 s)",
    "test_cli.py::test_cli_subprocess_embedded_pair": "a CLI subprocess (10 s)",
    "test_processors_chain.py::test_greedy_speculative_equals_target_alone": (
        "30 prompts × γ 1/4/8 + the target alone, per processor (≈ 50 s each)"
    ),
    "test_processors_chain.py::test_chi2_repetition_penalty_per_prefix_not_broadcast": (
        "600 sampled runs (≈ 60 s)"
    ),
    "test_processors_chain.py::test_chi2_grammar_mask_per_prefix": "600 sampled runs (≈ 50 s)",
    "test_processors_tree.py::test_greedy_tree_equals_target_alone_30_prompts": (
        "30 prompts × 3 greedy decodes per processor (2-5 min each, loaded machine)"
    ),
    "test_page_lossless.py::test_studies_on_the_pair_show_the_backend_numbers": (
        "every study of the lossless page on the tiny pair, and again directly (85 s)"
    ),
    "test_block.py::test_greedy_equals_target_on_heldout_prompts": (
        "30 held-out prompts × γ 1/4/8 with the block drafter (≈ 40 s)"
    ),
    "test_block.py::test_chi2_first_two_tokens_follow_the_target": "600 sampled runs (≈ 30 s)",
    "test_draft_vocab.py::test_runs_follow_p_when_most_of_its_mass_is_outside_the_subset": (
        "300 sampled runs per shape (≈ 20 s each)"
    ),
    "test_block_verification_pair.py::test_chi2_first_two_tokens_follow_the_target": (
        "600 sampled runs with block verification (≈ 24 s)"
    ),
    "test_block.py::test_training_script_on_tiny_models": "trains a tiny block drafter (≈ 30 s)",
    "test_replay_advance.py::test_chain_every_pair_advances_like_a_fresh_replay": (
        "190 (reached, target) replays each (≈ 10 s idle, 100 s on a busy machine)"
    ),
    "test_replay_advance.py::test_tree_every_pair_advances_like_a_fresh_replay": (
        "78 (reached, target) tree replays (≈ 8 s idle, 40 s on a busy machine)"
    ),
    # ---- added when the quick loop was cut to ≤ 5 minutes (seconds at load 7-9, 1 thread)
    "test_tree.py::test_greedy_tree_equals_target_greedy_on_the_heldout_prompts": (
        "30 held-out prompts per tree shape on the embedded pair (60-100 s each)"
    ),
    "test_tree.py::test_greedy_tree_on_the_embedded_pair_advances_more_per_forward": "31 s",
    "test_replay_advance.py::test_chain_advances_like_a_fresh_replay": (
        "70 (reached, target) replays each (5-89 s); the quick loop keeps a few clicks"
    ),
    "test_replay_advance.py::test_tree_advances_like_a_fresh_replay": "35 tree replays (25 s)",
    "test_embedded.py::test_greedy_speculative_equals_target_greedy": (
        "8 prompts × 40 tokens per γ on the embedded pair (23-59 s each)"
    ),
    "test_kvcache.py::test_kv_invariant_after_random_rounds_edits_and_stops[1]": "10 s",
    "test_kvcache.py::test_kv_invariant_after_random_rounds_edits_and_stops[2]": "10 s",
    "test_kvcache.py::test_kv_invariant_after_random_rounds_edits_and_stops[3]": "10 s",
    "test_check.py::test_the_chi_square_rejects_a_distribution_that_is_not_the_targets": (
        "the device check's χ² against a wrong distribution (79 s)"
    ),
    "test_check.py::test_a_speculative_run_that_differs_from_the_target_fails_its_case": "8 s",
    "test_long_measurements.py": "Lessons chapter 5 and every-source comparisons (200 s)",
    "test_drafts_budget.py": "two every-source comparisons on the embedded pair (70 s)",
    "test_compare.py::test_greedy_every_drafter_equals_target_alone": "66 s",
    "test_compare.py::test_prompt_lookup_shines_on_repetition_and_fails_on_a_novel_prompt": "33 s",
    "test_compare.py::test_compare_drafters_caps_gamma_at_what_a_source_can_propose": "17 s",
    "test_scenarios.py::test_a_found_scenario_replays_to_its_outcome": "a search each (5-42 s)",
    "test_scenarios.py::test_until_ends_a_run_after_the_round_it_names": "22 s",
    "test_scenarios.py::test_the_search_runs_few_forwards": "15 s",
    "test_lesson_link.py::test_every_scenario_is_found_and_replays_its_outcome": "20 s",
    "test_lesson_link.py::test_cli_prints_the_scenario_links": "8 s",
    "test_lossless_readings.py::test_equal_chi_rows_are_explained": "40 s",
    "test_round_properties.py::test_any_sequence_of_steps_keeps_the_trace_consistent": (
        "Hypothesis: step machine sequences (26 s)"
    ),
    "test_round_properties.py::test_cli_never_prints_a_traceback": "Hypothesis: CLI runs (11 s)",
    "test_replay_devices.py::test_one_and_two_threads_show_the_same_lessons": "23 s",
    "test_page_links.py::test_scenario_links_show_their_outcome": "24 s",
    "test_page_links.py::test_a_round_cut_by_end_of_text_explains_no_correction": "13 s",
    "test_lessons_moment_and_trace_errors.py::"
    "test_chapter_3_numbers_equal_the_moment_its_link_opens": "22 s",
    "test_generate.py::test_fast_path_replays_session_for_same_seed": "15 s",
    "test_generate.py::test_timeline_bars_sum_to_the_wall_time": "8-9 s each",
    "test_grammar_compile.py::test_a_grammar_compiled_in_the_child_masks_like_one_compiled_here": (
        "14 s"
    ),
    "test_gamma_schedule.py::test_default_json_unchanged_and_schedule_json": "14 s",
    "test_drafter_sentences.py::test_the_eagle_heads_first_round_runs_one_extra_target_forward": (
        "11 s"
    ),
    "test_jobs.py::test_an_error_in_the_worker_comes_back_as_itself": "a worker process (10 s)",
    "test_bench.py::test_every_drafters_curve_measures_a_round_as_it_runs": "97 s",
    "test_bench.py::test_lean_greedy_round_decides_like_the_step_machine": "10-20 s each",
    "test_bench.py::test_hf_assisted_leaves_the_shared_models_alone": "8 s",
    "test_gamma_schedule.py::test_greedy_equals_the_target_alone": "4-16 s each",
    "test_gamma_schedule.py::test_sampled_fast_path_matches_the_step_machine": "5-10 s each",
    "test_gamma_schedule.py::test_history_gamma_follows_the_pure_function": "18 s",
    "test_compare.py::test_sampled_strip_replays_the_fast_path": "6-14 s each",
    "test_embedded.py::test_target_perplexity_below_draft_on_heldout": "13 s",
    "test_machine.py::test_run_until_stands_at_the_phase": "6-9 s each",
    "test_cli.py::test_tree_run_with_a_regex_reports_the_matcher_per_round": "8 s",
    "test_cli.py::test_run_with_penalties_equals_the_target_alone": "8 s",
    "test_models_logging.py::test_import_keeps_transformers_logging_and_quiet_block_restores_it": (
        "a fresh interpreter (8 s)"
    ),
    "test_device.py::test_cublas_switch_reaches_the_environment_at_import": (
        "a fresh interpreter (7 s)"
    ),
    "test_tree_session.py::test_step_machine_equals_generate_tree_round_by_round": ("27-40 s each"),
    "test_tree_session.py::test_kv_invariant_after_a_rejection_at_every_depth[2]": "7 s",
    "test_tree_session.py::test_kv_invariant_after_a_rejection_at_every_depth[3]": "9 s",
    "test_tree_session.py::test_kv_invariant_after_a_rejection_at_every_depth[4]": "16 s",
    "test_tree_session.py::test_cli_tree_json": "14 s",
    "test_tree_session.py::test_eagle_tree_counts_its_prefill_forward": "13 s",
    "test_replay_devices.py::test_every_path_to_a_state_runs_the_same_forwards[tree-greedy]": (
        "11 s"
    ),
    "test_wrong_penalty.py::test_monte_carlo_invariants_on_the_tiny_pair": "11 s",
    "test_wrong_grammar.py::test_no_rollback_json_differs_at_once": "10 s",
}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``SPECDEC_TEST_CPU=FILE`` set, append one line per test to FILE: CPU seconds of
    this process (setup + call + teardown, all its threads; a shared fixture's cost falls on
    the first test that asks for it), wall seconds, the node id. CPU time, unlike wall time,
    hardly moves with the machine's load: the quick loop's heavy tests are found with it."""
    path = os.environ.get("SPECDEC_TEST_CPU")
    if not path:
        yield
        return
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{cpu:.3f}\t{wall:.3f}\t{item.nodeid}\n")


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        name = item.path.name
        test = f"{name}::{getattr(item, 'originalname', item.name)}"
        one = f"{name}::{item.name}"  # with its parameters, e.g. "test_x.py::test_y[8]"
        if item.get_closest_marker("browser") or {name, test, one} & SLOW.keys():
            item.add_marker(pytest.mark.slow)


# ------------------------------------------------------- one server + one Chromium (browser)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run must install it")
        pytest.skip("Debian's chromium is not installed")


@pytest.fixture(scope="session")
def server_log(tmp_path_factory) -> Path:
    """The shared server's output; ``SPECDEC_PROFILE=1`` logs one ``specdec-render-ms``
    line per full run of app.py and one ``... fragment=KEY`` line per fragment-only rerun
    (a test compares counts before and after its own clicks)."""
    return tmp_path_factory.getbasetemp() / "streamlit-server.log"


@pytest.fixture(scope="session")
def server(server_log) -> Iterator[str]:
    """One ``streamlit run app.py`` on a free local port for every browser test of the
    session (started by the first test that asks); yields its base URL. Modules that need
    a server of another kind (special environment, replicas) define their own."""
    _need_chromium()
    port = free_port()
    log = open(server_log, "w")  # a file, not a pipe nobody reads
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_PROFILE": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        log.close()
        pytest.fail("streamlit did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


class _Chromium:
    """The one Playwright + Chromium of the session, started on first use.

    Playwright's sync API marks an event loop as running for as long as it is started, so
    ``asyncio.run`` (the websocket tests) and a second ``sync_playwright`` (the replicas
    test) fail while it lives: :func:`pytest_runtest_teardown` stops it after the last of
    a run of consecutive tests that use it (the browser modules sort next to each other,
    so the whole browser block shares one Chromium)."""

    def __init__(self) -> None:
        self._playwright = None
        self._browser = None

    def get(self):
        if self._browser is None:
            _need_chromium()
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_FLAGS
            )
        return self._browser

    def stop(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._playwright.stop()
            self._browser = self._playwright = None


_CHROMIUM = _Chromium()


@pytest.fixture
def browser():
    """The session's Chromium (a Playwright ``Browser``); prefer :func:`new_page`."""
    return _CHROMIUM.get()


@pytest.fixture
def new_page(browser) -> Iterator[Callable[..., object]]:
    """``new_page(width, height)``: a Playwright page in a fresh browser context (no
    cookies, storage or Streamlit session shared with any other page); every context it
    made is closed after the test, passed or failed, so no session is left on the shared
    server."""
    contexts = []

    def make(width: int = 1400, height: int = 2000):
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.hookimpl(trylast=True)  # after the test's fixtures (its pages) are torn down
def pytest_runtest_teardown(item, nextitem) -> None:
    if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
        _CHROMIUM.stop()
