"""What the README, docs/ARCHITECTURE.md and .streamlit/config.toml say matches the code
(issue 24 item 14): set-up order, what a skipped test needs, the prompt limit, the EAGLE
drafter's extra target forward."""

from __future__ import annotations

import re

import pytest
from conftest import REPO, run_json

from specdec_core.core.inputs import MAX_PROMPT_CHARS

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_cpu_torch_install_comes_before_the_requirements_install():
    cpu = README.index("--index-url https://download.pytorch.org/whl/cpu")
    first_install = README.index("pip install -r requirements.txt")
    assert cpu < first_install


def test_nginx_skip_says_what_to_install_and_the_readme_says_it_too(monkeypatch):
    import test_replicas

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        test_replicas._require("nginx", False)
    assert "apt-get install -y nginx" in str(skipped.value)
    tests_section = README[README.index("## Run the tests") : README.index("## Command line")]
    assert "apt-get install -y nginx" in tests_section


def test_config_comment_states_the_real_prompt_limit():
    config = (REPO / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    said = re.search(r"A prompt is at most\s*#?\s*([\d,]+) characters", config)
    assert said is not None
    assert int(said.group(1).replace(",", "")) == MAX_PROMPT_CHARS == 20_000


@pytest.mark.parametrize(("prompt", "extra"), [("A", 0), ("ROMEO: But", 1)])
def test_eagle_prefill_is_counted_only_for_a_prompt_of_two_or_more_tokens(capsys, prompt, extra):
    pytest.importorskip("specdec_core.drafters.eagle")
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
        "6",
        "--json",
    )
    assert out["stats"]["target_forwards"] == out["stats"]["rounds"] + extra
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "a one-token prompt has no such prefill" in " ".join(doc.split())
