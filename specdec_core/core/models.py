"""Model pairs: presets, ``load_pair()``, device choice, vocabulary compatibility.

Security: weights load with ``use_safetensors=True`` and never ``trust_remote_code``.
Only the presets below load by name; a local folder loads only with an explicit opt-in
(``allow_custom=True`` or the environment variable ``SPECDEC_ALLOW_CUSTOM_MODELS=1``), so a
classroom server never downloads an arbitrary model because a student typed a name.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from specdec_core.core.device import deterministic
from specdec_core.core.errors import ModelLoadError, VocabularyMismatchError

_quiet_lock = threading.Lock()
_quiet_depth = 0  # blocks inside quiet_transformers() now (several sessions may load at once)
_quiet_saved: tuple[int, bool] = (hf_logging.WARNING, True)  # the host's settings


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and warnings inside this block only (weights
    loading, ``generate`` timing in ``bench``): their chatter would break the CLI's one-line
    errors. Importing this module leaves transformers' global logging as the host set it."""
    global _quiet_depth, _quiet_saved
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled())
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                verbosity, progress = _quiet_saved
                hf_logging.set_verbosity(verbosity)
                if progress:
                    hf_logging.enable_progress_bar()


REPO_ROOT = Path(__file__).resolve().parents[2]
# Overridable for development and tests (a server-side setting, never user input).
EMBEDDED_DIR = Path(
    os.environ.get("SPECDEC_EMBEDDED_DIR", REPO_ROOT / "assets" / "models" / "embedded")
)
EMBEDDED_ZH_DIR = Path(
    os.environ.get("SPECDEC_EMBEDDED_ZH_DIR", REPO_ROOT / "assets" / "models" / "embedded-zh")
)
CUSTOM_ENV = "SPECDEC_ALLOW_CUSTOM_MODELS"


@dataclass(frozen=True)
class Preset:
    """A named target ← draft pair. ``target``/``draft`` are hub ids or local folders."""

    name: str
    target: str
    draft: str
    description: str

    @property
    def local(self) -> bool:
        return Path(self.target).is_absolute()


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "embedded",
            str(EMBEDDED_DIR / "target"),
            str(EMBEDDED_DIR / "draft"),
            "small GPT-2 ← smaller GPT-2 trained on Tiny Shakespeare (shipped, offline)",
        ),
        Preset(
            "embedded-zh",
            str(EMBEDDED_ZH_DIR / "target"),
            str(EMBEDDED_ZH_DIR / "draft"),
            "small GPT-2 ← smaller GPT-2 trained on Tang poems, one token per character "
            "(shipped, offline)",
        ),
        Preset("gpt2", "gpt2", "distilgpt2", "gpt2 (124M) ← distilgpt2 (82M)"),
        Preset("gpt2-medium", "gpt2-medium", "gpt2", "gpt2-medium (355M) ← gpt2 (124M)"),
        Preset("gpt2-large", "gpt2-large", "gpt2", "gpt2-large (774M) ← gpt2 (124M)"),
        Preset("gpt2-xl", "gpt2-xl", "gpt2", "gpt2-xl (1.5B) ← gpt2 (124M)"),
    )
}


@dataclass
class ModelPair:
    """A loaded target/draft pair sharing one tokenizer. Read-only once loaded.

    Attributes:
        name: preset name or ``"custom"``.
        target, draft: ``PreTrainedModel`` in eval mode, float32, on ``device``.
        tokenizer: the shared tokenizer (the target's).
        device: ``"cpu"`` or ``"cuda"``.
        vocab_size: ``V``, rows of ``p`` and ``q`` have this length.
        eos_token_id: id treated as end of text (``None`` if the tokenizer has none).
        context_length: positions both models accept (min of their ``n_positions``).
        load_seconds: wall time of the load.
    """

    name: str
    target: PreTrainedModel
    draft: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: str
    vocab_size: int
    eos_token_id: int | None
    context_length: int
    target_source: str
    draft_source: str
    load_seconds: float

    def device_label(self) -> str:
        """Human-readable device, e.g. ``"CPU"`` or ``"GPU: NVIDIA H200"``."""
        if self.device.startswith("cuda"):
            return f"GPU: {torch.cuda.get_device_name(0)}"
        return "CPU"


def choose_device(device: str | None = None) -> str:
    """``"cuda"`` when available (unless ``device`` says otherwise), else ``"cpu"``."""
    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def custom_models_allowed() -> bool:
    return os.environ.get(CUSTOM_ENV, "") == "1"


def is_preset_cached(name: str) -> bool:
    """Whether a preset's weights are available without a network (shipped or in the
    local Hugging Face cache)."""
    preset = PRESETS[name]
    if preset.local:
        return all((Path(p) / "config.json").is_file() for p in (preset.target, preset.draft))
    from huggingface_hub import try_to_load_from_cache

    for repo in (preset.target, preset.draft):
        hit = try_to_load_from_cache(repo, "model.safetensors")
        if not isinstance(hit, str):
            return False
    return True


def default_pair_name(lang: str = "en") -> tuple[str, str]:
    """The pair the app opens with, and why: on a Chinese screen (``lang`` ``zh``) the
    shipped Chinese pair ``embedded-zh`` when its weights are there; else ``gpt2`` when its
    weights are in the local cache, else the shipped ``embedded`` pair."""
    if lang == "zh" and is_preset_cached("embedded-zh"):
        return "embedded-zh", "chinese_screen"
    if is_preset_cached("gpt2"):
        return "gpt2", "gpt2_cached"
    return "embedded", "gpt2_not_cached"


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers a TCP connection within ``timeout_s`` seconds
    (``False`` at once when ``HF_HUB_OFFLINE=1``). Lets an offline classroom server refuse
    an uncached preset in seconds instead of waiting out the hub client's retries."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    import socket
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    try:
        with socket.create_connection((host or "huggingface.co", 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _load_model(source: str, device: str, local_only: bool) -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(
        source,
        dtype=torch.float32,
        use_safetensors=True,
        trust_remote_code=False,
        local_files_only=local_only,
    )
    model.to(device).eval().requires_grad_(False)
    return model


@torch.inference_mode()
def _warm_up(*models: PreTrainedModel) -> None:
    """One tiny cached forward per model right after loading, so transformers' lazily
    imported code paths are initialised once, before sessions use the shared models
    from many threads at once (concurrent first forwards can race in those imports)."""
    from transformers import DynamicCache

    for model in models:
        ids = torch.zeros(1, 2, dtype=torch.long, device=model.device)
        model(input_ids=ids, cache=DynamicCache(config=model.config), use_cache=True)


def load_pair(
    pair: str | tuple[str | Path, str | Path],
    device: str | None = None,
    allow_custom: bool | None = None,
) -> ModelPair:
    """Load a target/draft pair.

    Args:
        pair: a preset name (``embedded``, ``embedded-zh``, ``gpt2``, ``gpt2-medium``,
            ``gpt2-large``, ``gpt2-xl``) or a ``(target_folder, draft_folder)`` tuple of
            local folders.
        device: ``"cpu"`` / ``"cuda"``; default CUDA when available.
        allow_custom: allow local folders; default from ``SPECDEC_ALLOW_CUSTOM_MODELS=1``.

    Returns:
        :class:`ModelPair` with float32 models in eval mode.

    Raises:
        ModelLoadError: unknown preset, custom folders not enabled, weights missing, hub
            unreachable and weights not cached.
        VocabularyMismatchError: target and draft vocabularies differ (both sizes named).
    """
    started = time.perf_counter()
    if isinstance(pair, str):
        if pair not in PRESETS:
            raise ModelLoadError(
                f"unknown model pair {pair!r}; choose one of: {', '.join(PRESETS)}"
            )
        preset = PRESETS[pair]
        # A cached hub preset loads without touching the network (fast, works offline).
        local_only = preset.local or is_preset_cached(pair)
        name, target_src, draft_src = pair, preset.target, preset.draft
        if not local_only and not hub_reachable():
            raise ModelLoadError(
                f"the weights of {pair!r} are not in the local Hugging Face cache and the "
                "Hub is unreachable (offline?); the embedded pair works offline",
                code="hub_unreachable",
            )
    else:
        allowed = custom_models_allowed() if allow_custom is None else allow_custom
        if not allowed:
            raise ModelLoadError(
                "custom model folders are disabled on this server; set "
                f"{CUSTOM_ENV}=1 to allow them (presets: {', '.join(PRESETS)})"
            )
        name, target_src, draft_src, local_only = "custom", str(pair[0]), str(pair[1]), True
    if isinstance(pair, tuple) or PRESETS[name].local:
        for src in (target_src, draft_src):
            if not (Path(src) / "config.json").is_file():
                raise ModelLoadError(f"model weights not found in {src} (no config.json)")
    device = choose_device(device)
    deterministic(device)  # before the first CUDA forward (core/device.py)
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(
                target_src, local_files_only=local_only, trust_remote_code=False
            )
            target = _load_model(target_src, device, local_only)
            draft = _load_model(draft_src, device, local_only)
    except OSError as exc:
        where = "the local folder" if local_only else "the Hugging Face Hub or the local cache"
        raise ModelLoadError(
            f"could not load pair {name!r} ({target_src} ← {draft_src}) from {where}: "
            f"{str(exc).splitlines()[0]}"
        ) from exc
    target_vocab = target.get_output_embeddings().weight.shape[0]
    draft_vocab = draft.get_output_embeddings().weight.shape[0]
    if target_vocab != draft_vocab:
        raise VocabularyMismatchError(
            f"draft vocabulary ({draft_vocab} tokens, {draft_src}) differs from target "
            f"vocabulary ({target_vocab} tokens, {target_src}); speculative decoding needs "
            "one shared vocabulary"
        )
    context = min(
        getattr(target.config, "n_positions", 1024), getattr(draft.config, "n_positions", 1024)
    )
    _warm_up(target, draft)
    return ModelPair(
        name=name,
        target=target,
        draft=draft,
        tokenizer=tokenizer,
        device=device,
        vocab_size=target_vocab,
        eos_token_id=tokenizer.eos_token_id,
        context_length=context,
        target_source=target_src,
        draft_source=draft_src,
        load_seconds=time.perf_counter() - started,
    )
