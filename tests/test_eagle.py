"""The EAGLE feature head: lossless greedy output on held-out prompts, no target
forward beyond the first round's prefill, a head cache of real-feature entries only after
each round (equal to a fresh computation), seeded sampling reproducible and equal between
the fast path and the step machine, the error on a pair without a head, the CLI, the
lesson-link check and the training script on tiny models."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import HELDOUT_TOKENS, run_json

from specdec_core.core.errors import ConfigError
from specdec_core.core.kvcache import ModelCache
from specdec_core.core.models import EMBEDDED_DIR
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.eagle import EagleDrafter
from specdec_core.drafters.eagle_head import EagleConfig, EagleHead
from specdec_core.drafters.registry import DRAFTER_NAMES, drafters_for, make_named_drafter
from specdec_core.engine.chain.generate import generate
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.lessons.link import LessonState, decode, encode

HEAD_DIR = EMBEDDED_DIR / "eagle"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_head_files_small_and_safetensors():
    assert (HEAD_DIR / "model.safetensors").is_file() and (HEAD_DIR / "config.json").is_file()
    assert not list(HEAD_DIR.glob("*.bin")) and not list(HEAD_DIR.glob("*.pt"))
    assert (HEAD_DIR / "model.safetensors").stat().st_size < 4 * 2**20
    from specdec_core.training.eagle import RECIPES

    report = json.loads((HEAD_DIR / "training_report.json").read_text())
    assert report["seed"] == 0
    # built by the recipe's defaults: its fixed steps, all run (the cap never bound)
    steps, minutes = RECIPES["embedded"]
    assert report["steps"] == report["args"]["max_steps"] == steps
    assert report["args"]["minutes"] == minutes and report["args"]["inner"] is None
    assert report["head_target_top1_agreement"] > 0.5


@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_greedy_equals_target_on_heldout_prompts(
    embedded_pair, heldout_prompts, heldout_greedy, gamma
):
    config = SessionConfig(gamma=gamma, max_new_tokens=HELDOUT_TOKENS)
    accepted = 0
    for prompt, expected in zip(heldout_prompts, heldout_greedy, strict=True):
        drafter = make_named_drafter(embedded_pair, "eagle")
        run = generate(embedded_pair, prompt, config, drafter=drafter)
        assert run.output_ids == expected, prompt
        # one verification per round + the first round's prefill, nothing else
        assert run.stats.target_forwards == run.stats.rounds + 1 == len(run.records) + 1
        assert drafter.target_forwards == 1
        accepted += sum(r.accepted for r in run.records)
    assert accepted > 0


def test_target_forwards_versus_the_draft_model(embedded_pair, heldout_prompts):
    config = SessionConfig(gamma=4, max_new_tokens=16)
    for prompt in heldout_prompts[:3]:
        model = generate(
            embedded_pair, prompt, config, drafter=make_named_drafter(embedded_pair, "model")
        )
        eagle = generate(
            embedded_pair, prompt, config, drafter=make_named_drafter(embedded_pair, "eagle")
        )
        assert model.stats.target_forwards == model.stats.rounds
        assert eagle.stats.target_forwards == eagle.stats.rounds + 1
        assert eagle.output_ids == model.output_ids


def _fresh_features(pair, committed: list[int], entries: int, int8: bool) -> torch.Tensor:
    """The head's outputs for its first ``entries`` entries computed from scratch: one
    target forward over the committed tokens, one head forward on a fresh cache (with the
    drafter's weights: int8 on a CPU, ``EagleHead.step``; float32: transformers')."""
    with torch.inference_mode():
        ids = torch.tensor([committed])
        feats = pair.target(input_ids=ids, output_hidden_states=True).hidden_states[-1]
        head = make_named_drafter(pair, "eagle").head
        emb = pair.target.get_input_embeddings()(ids[:, 1 : entries + 1])
        if int8:
            return head.step(feats[0, :entries], emb[0], head.new_cache(), int8=True)
        return head(feats[:, :entries], emb)[0]


def _check_head_cache(pair, session: SpeculativeSession) -> None:
    drafter: EagleDrafter = session.drafter
    cached = drafter.cached_ids()
    assert drafter.real_entries() == drafter.entries  # real-feature entries only
    assert cached == session.ids[: len(cached)]
    assert drafter.entries <= session.target.kv_len
    if drafter.entries:
        assert drafter.cache.get_seq_length() == drafter.entries == len(cached) - 1
        fresh = _fresh_features(pair, session.ids, drafter.entries, drafter.int8)
        # int8 layers round their inputs to bfloat16: float32 low bits of the target's
        # features (another forward's) move a rounding, ≤ 0.012 measured on unit-scale
        # features; an entry of another token or position is off by O(1)
        atol = 0.03 if drafter.int8 else 2e-4
        torch.testing.assert_close(drafter.pred, fresh, atol=atol, rtol=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_step_machine_with_an_edit(embedded_pair, heldout_prompts, heldout_greedy, temperature):
    for i in (0, 7, 19):
        config = SessionConfig(
            gamma=4, max_new_tokens=HELDOUT_TOKENS, temperature=temperature, seed=i
        )
        session = SpeculativeSession(
            embedded_pair, heldout_prompts[i], config, make_named_drafter(embedded_pair, "eagle")
        )
        rounds = 0
        while session.phase == "propose":
            proposed = session.propose()
            if rounds == 1 and len(session.steps.drafts) >= 2:  # a student edits draft 2
                wrong = session.steps.target_preview(top_n=2)[1][1].id
                edit = session.steps.edit_draft(2, wrong)
                assert edit.reproposed and edit.drafted[1].id == wrong
                # re-proposed after the edit from predicted features: same as a fresh drafter
                again = make_named_drafter(embedded_pair, "eagle")
                again.attach(session.target)
                ids, _ = again.propose_argmax(session.ids + session.steps.drafts[:2], 2)
                if temperature == 0.0:
                    assert ids == session.steps.drafts[2:]
            assert proposed.draft_forwards == len(proposed.drafted)
            session.verify()
            session.commit()
            rounds += 1
            _check_head_cache(embedded_pair, session)
        if temperature == 0.0:
            assert session.generated_ids == heldout_greedy[i]
        assert session.target.forwards == rounds + 1


def test_sampled_runs_reproducible_and_fast_path_equals_step_machine(
    embedded_pair, heldout_prompts
):
    for seed in (1, 2):
        config = SessionConfig(gamma=4, max_new_tokens=24, temperature=1.0, seed=seed)
        runs = [
            generate(
                embedded_pair,
                heldout_prompts[3],
                config,
                drafter=make_named_drafter(embedded_pair, "eagle"),
            )
            for _ in range(2)
        ]
        assert runs[0].records == runs[1].records
        session = SpeculativeSession(
            embedded_pair, heldout_prompts[3], config, make_named_drafter(embedded_pair, "eagle")
        )
        session.run()
        assert session.generated_ids == runs[0].output_ids
        for a, b in zip(session.records, runs[0].records, strict=True):
            assert (a.drafted, a.statuses, a.appended, a.kind) == (
                b.drafted,
                b.statuses,
                b.appended,
                b.kind,
            )
            assert a.overlaps == pytest.approx(b.overlaps, abs=1e-5)
        assert any(0.0 < o < 1.0 for r in runs[0].records for o in r.overlaps)  # real q rows


def test_one_token_prompt_drafts_nothing_first(embedded_pair):
    config = SessionConfig(gamma=4, max_new_tokens=12)
    drafter = make_named_drafter(embedded_pair, "eagle")
    run = generate(embedded_pair, [embedded_pair.eos_token_id], config, drafter=drafter)
    expected = generate(
        embedded_pair, [embedded_pair.eos_token_id], config, mode="autoregressive"
    ).output_ids
    assert run.output_ids == expected
    assert run.records[0].drafted == () and len(run.records[1].drafted) == 4
    assert drafter.target_forwards == 0 and run.stats.target_forwards == run.stats.rounds


def test_pair_without_a_head_gives_a_clear_error(tiny_pair, embedded_pair):
    assert "eagle" in DRAFTER_NAMES
    assert "eagle" in drafters_for(embedded_pair) and "eagle" not in drafters_for(tiny_pair)
    with pytest.raises(ConfigError, match="has no EAGLE draft head") as info:
        make_named_drafter(tiny_pair, "eagle")
    assert info.value.code == "no_eagle_head"
    # loaded once per process, shared by every drafter
    a, b = (make_named_drafter(embedded_pair, "eagle") for _ in range(2))
    assert a.head is b.head and a.cache is not b.cache


def test_cli_json_with_eagle(capsys, embedded_pair):
    prompt = "ROMEO:\nBut soft"
    out = run_json(
        capsys,
        "run",
        "--pair",
        "embedded",
        "--prompt",
        prompt,
        "--drafter",
        "eagle",
        "--max-new-tokens",
        "16",
        "--json",
    )
    ar = run_json(
        capsys,
        "run",
        "--pair",
        "embedded",
        "--prompt",
        prompt,
        "--mode",
        "autoregressive",
        "--max-new-tokens",
        "16",
        "--json",
    )
    assert out["output_ids"] == ar["output_ids"] and out["text"] == ar["text"]
    assert out["stats"]["target_forwards"] == out["stats"]["rounds"] + 1
    assert out["stats"]["acceptance_rate"] > 0.0
    for r in out["rounds"]:
        assert r["draft_kv_len"] <= r["target_kv_len"] < r["committed_len"]


def test_lesson_link_drafter_needs_a_head():
    state, problems = decode(encode(LessonState(drafter="eagle")), ["embedded", "gpt2"])
    assert state.drafter == "eagle" and not problems
    state, problems = decode(
        encode(LessonState(drafter="eagle", pair="gpt2")), ["embedded", "gpt2"]
    )
    assert state.drafter == "model" and state.pair == "gpt2"
    assert [(p.code, p.params) for p in problems] == [("bad_value", {"name": "drafter"})]


def test_training_script_on_tiny_models(tmp_path, tiny_dirs, tiny_pair, tiny_corpus, tiny_lossless):
    from specdec_core.training.eagle import main

    out = tmp_path / "eagle"
    report = main(
        [
            "--corpus",
            str(tiny_corpus),
            "--target",
            str(tiny_dirs["target"]),
            "--draft",
            str(tiny_dirs["draft"]),
            "--out",
            str(out),
            "--context",
            "32",
            "--batch",
            "4",
            "--max-steps",
            "3",
            "--threads",
            "1",
        ]
    )
    assert report["steps"] == 3 and report["parameters"] > 0
    assert json.loads((out / "training_report.json").read_text()) == report
    head = EagleHead.load(out)
    assert head.config == EagleConfig.for_target(tiny_pair.target.config)
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in head.parameters())
    tiny_lossless(EagleDrafter(head, tiny_pair.target))


def test_sidebar_offers_eagle_only_with_a_head(embedded_pair):
    from conftest import start_app

    from specdec_core.ui.option_labels import DRAFTER_LABELS

    at = start_app("en")
    assert DRAFTER_LABELS["eagle"] in at.selectbox(key="cfg_drafter").options


def test_propose_argmax_equals_propose_at_temperature_zero(embedded_pair, heldout_prompts):
    greedy = SessionConfig(gamma=6).sampling
    for prompt in heldout_prompts[:3]:
        ids = embedded_pair.tokenizer.encode(prompt)
        drafters = [make_named_drafter(embedded_pair, "eagle") for _ in range(2)]
        for d in drafters:
            d.attach(ModelCache(embedded_pair.target))
        fast, forwards = drafters[0].propose_argmax(ids, 6)
        draft = drafters[1].propose(ids, 6, greedy, "probabilistic", torch.Generator())
        assert fast == draft.ids.tolist() and forwards == draft.forwards == 6
        assert torch.equal(draft.probs.sum(-1), torch.ones(6))  # one-hot rows at T = 0


def test_verify_curve_times_the_eagle_draft_step(embedded_pair):
    """The speed page's cost model needs the head's step: the curve measures it from the
    drafter's own forward time (it has no plain model cache), and prompt lookup stays 0."""
    from specdec_core.bench.curve import measure_forward_curve

    eagle = measure_forward_curve(embedded_pair, "ROMEO:\nBut soft, what light", 3, 2, "eagle")
    assert len(eagle.target_ms) == 3 and eagle.draft_step_ms > 0
    ngram = measure_forward_curve(embedded_pair, "ROMEO:\nBut soft, what light", 3, 2, "ngram")
    assert ngram.draft_step_ms == 0.0


def test_tree_rounds_count_the_head_forwards_that_ran(embedded_pair, monkeypatch):
    """A tree round with the EAGLE drafter reports the head forwards that really ran (a
    catch-up on features, then one per tree level), counted here by wrapping the head's
    drafting step. Counting one per expanded node would say more than ran."""
    from specdec_core.drafters.eagle_head import load_eagle_head
    from specdec_core.engine.tree.generate import generate_tree
    from specdec_core.engine.tree.session import TreeSession

    head = load_eagle_head(embedded_pair)  # the one head every EAGLE drafter shares
    ran: list[int] = []
    step = type(head).step

    def counted(self, *args, **kwargs):
        ran.append(1)
        return step(self, *args, **kwargs)

    monkeypatch.setattr(type(head), "step", counted)  # drafting runs the head's step
    config = SessionConfig(temperature=1.0, seed=2, max_new_tokens=24)
    session = TreeSession(
        embedded_pair, "ROMEO:\nBut soft, what light", config, "eagle", (2, 2, 1, 1)
    )
    per_round, expanded = [], []
    while session.phase == "propose":
        before = len(ran)
        session.propose()
        per_round.append(len(ran) - before)
        session.verify()
        session.commit()
        expanded.append(len(set(session.records[-1].parents)))  # the root + inner nodes
    assert [r.draft_forwards for r in session.records] == per_round
    # a feature catch-up, then ONE head step per tree level: fewer than the expanded nodes
    assert per_round != expanded and sum(per_round) < sum(expanded)
    before = len(ran)
    run = generate_tree(
        embedded_pair, "ROMEO:\nBut soft, what light", config, (2, 2, 1, 1), drafter="eagle"
    )
    assert run.draft_forwards == len(ran) - before == sum(per_round)
    assert run.records == session.records


@pytest.mark.parametrize(
    ("argv", "steps", "minutes"),
    [
        ([], 800, 120.0),  # the shipped head's recipe
        (["--pair", "embedded-zh"], None, 9.0),  # the zh head's: a 9-minute budget
        (["--pair", "embedded-zh", "--max-steps", "5"], 5, 120.0),
        (["--minutes", "5"], None, 5.0),
        (["--max-steps", "3"], 3, 120.0),
        (["--max-steps", "3", "--minutes", "2"], 3, 2.0),
    ],
)
def test_the_recipe_defaults_fix_the_steps_unless_given_a_budget(argv, steps, minutes):
    from specdec_core.training.eagle import parse_args

    args = parse_args(argv)
    assert (args.max_steps, args.minutes) == (steps, minutes)


@pytest.mark.parametrize("pair", ["embedded", "embedded-zh"])
def test_each_pairs_defaults_are_the_recipe_its_shipped_head_records(pair):
    from specdec_core.training.eagle import parse_args
    from specdec_core.training.loop import MODELS

    report = json.loads((MODELS / pair / "eagle" / "training_report.json").read_text())
    args = parse_args(["--pair", pair])
    assert (args.max_steps, args.minutes) == (
        report["args"]["max_steps"],
        report["args"]["minutes"],
    )


@pytest.mark.parametrize("text", ["0", "-3", "2.5"])
def test_max_steps_must_be_a_positive_int(text):
    from specdec_core.training.eagle import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--max-steps", text])


@pytest.mark.parametrize("text", ["0", "-3"])
def test_the_mlp_width_option_must_be_positive(text):
    from specdec_core.training.eagle import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--inner", text])


def test_a_narrower_mlp_trains_saves_and_its_step_equals_its_forward(
    tmp_path, tiny_dirs, tiny_pair, tiny_corpus
):
    from specdec_core.training.eagle import main

    out = tmp_path / "eagle"
    paths = ["--target", str(tiny_dirs["target"]), "--draft", str(tiny_dirs["draft"])]
    main(
        [*paths, "--corpus", str(tiny_corpus), "--out", str(out), "--context", "32"]
        + ["--batch", "4", "--max-steps", "2", "--threads", "1", "--inner", "24"]
    )
    head = EagleHead.load(out)
    d = tiny_pair.target.config.n_embd
    assert head.config == EagleConfig.for_target(tiny_pair.target.config, inner=24)
    assert json.loads((out / "config.json").read_text())["inner"] == 24
    mlp = head.block.h[0].mlp
    assert mlp.c_fc.weight.shape == (d, 24) and mlp.c_proj.weight.shape == (24, d)
    gen = torch.Generator().manual_seed(0)
    feats, embs = torch.randn(5, d, generator=gen), torch.randn(5, d, generator=gen)
    with torch.inference_mode():
        ref = head(feats[None], embs[None])[0]
        torch.testing.assert_close(
            head.step(feats, embs, head.new_cache()), ref, atol=1e-5, rtol=1e-5
        )
