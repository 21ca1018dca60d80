"""What the README, docs/ARCHITECTURE.md and .streamlit/config.toml say matches the code:
set-up order, what a skipped test needs, the prompt limit, the EAGLE
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


#: A citation of this project's own tracker ("issue 27", "Issue 24.6"): a reader of the
#: code does not have that tracker, so code and docs say the rule, not where it came from.
#: An upstream project's public issue ("vLLM issue 18902") is a reference, not one of these.
TRACKER_CITE = re.compile(r"(?<!vLLM )(?<!transformers )\b[Ii]ssue #?\d+")
CITE_SCOPE = ("app.py", "README.md", "specdec_core", "pages", "benchmarks", "deploy", "docs")
CITE_SCOPE += ("tests", "assets/strings")


def _cites(text: str) -> list[str]:
    return [m.group(0) for m in TRACKER_CITE.finditer(text)]


def test_no_product_file_cites_a_tracker_issue_number():
    assert _cites("a rule (issue 27): x; Issue 24.6's run; issue #3") == [
        "issue 27",
        "Issue 24",
        "issue #3",
    ]
    assert _cites("vLLM issue 18902; issues with γ; the tissue 3") == []
    files = [REPO / p for p in CITE_SCOPE if (REPO / p).is_file()]
    for folder in (REPO / p for p in CITE_SCOPE if (REPO / p).is_dir()):
        files += [f for ext in ("py", "md", "json", "toml") for f in folder.rglob(f"*.{ext}")]
    assert len(files) > 300  # every product module, page, test, doc and string file
    found = [
        f"{f.relative_to(REPO)}:{n}: {line.strip()[:80]}"
        for f in files
        if f.name != "test_docs_claims.py"  # the examples above
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if _cites(line)
    ]
    assert found == []
