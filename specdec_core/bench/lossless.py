"""Where "lossless" ends, measured on a live pair: the pure functions behind the
lossless page (``pages/lossless.py``) and the figures in its note.

1. **Same distribution, different text**: ``bench/same_seed.py`` (target alone and
   speculative decoding at T = 1, same seed: the texts differ; over N seeds the
   first-k-token distributions agree: χ² and TV, against a simulated null).
2. **Numerics**: ``bench/numerics.py`` (verify forward vs decode steps, the bf16 flip).
3. **A quantized target** (``core/quant.py``): ``bench/quantized.py`` (TV and greedy
   divergence against the float32 target, the draft's acceptance against each target).
4. **Lossy rules, priced** (``rules/lossy.py``): ``bench/lossy_tradeoff.py``.

This module holds what the measurements share: the held-out prompts
(:func:`held_out_prompts`) and the bounds on prompts and tokens.

Every measurement is bounded (``MAX_*``), seeded, and refuses bad input with a code
(``InputError`` ``bad_value``, ``ConfigError`` ``quant_unknown`` / ``acceptance_*`` /
``dtype_*``, ``InputError`` ``corpus_missing``). Probabilities are float64 numbers, times
ms. Held-out prompts: the speaker line and first line of speeches from the last 10 % of
``data/tinyshakespeare.txt`` (the part the embedded pair was not trained on,
``training/loop.split_ids``), as ``benchmarks/measure_acceptance.py`` takes them; on
``embedded-zh`` the first line (couplet) of poems from the last 10 % of
``data/poetry_zh.txt``.
"""

from __future__ import annotations

from specdec_core.core.errors import InputError
from specdec_core.core.inputs import whole_number
from specdec_core.core.models import REPO_ROOT

CORPUS = REPO_ROOT / "data" / "tinyshakespeare.txt"
ZH_CORPUS = REPO_ROOT / "data" / "poetry_zh.txt"  # the held-out text of ``embedded-zh``
MAX_PROMPTS = 200
MAX_TOKENS = 64


def held_out_prompts(n: int = 100, pair_name: str = "embedded") -> list[str]:
    """``n`` prompts (1..:data:`MAX_PROMPTS`), evenly spaced over the blocks with more
    lines than a prompt keeps in the last 10 % of the pair's corpus (:data:`ZH_CORPUS`
    on ``embedded-zh``, else :data:`CORPUS`):
    English, the speaker line + the speech's first line + ``"\\n"`` (the same list as
    ``benchmarks/measure_acceptance.heldout_prompts``); Chinese, a poem's first line +
    ``"\\n"``.

    Raises:
        InputError: ``bad_value`` (n out of range), ``corpus_missing`` (``path``).
    """
    n = whole_number(n, 1, MAX_PROMPTS, "prompts")
    corpus, keep = (ZH_CORPUS, 1) if pair_name == "embedded-zh" else (CORPUS, 2)
    if not corpus.is_file():
        raise InputError(f"the corpus is missing: {corpus}", "corpus_missing", path=str(corpus))
    text = corpus.read_text(encoding="utf-8")
    tail = text[int(len(text) * 0.9) :]
    blocks = [s for s in tail.split("\n\n")[1:] if s.count("\n") >= keep]
    step = max(1, len(blocks) // n)
    return ["\n".join(s.split("\n")[:keep]) + "\n" for s in blocks[::step][:n]]
