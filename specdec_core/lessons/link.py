"""A lesson state you can name, share and replay: the settings, the prompt and the position
inside the step-through lesson (round, phase, the edits made so far).

The engine is seeded and deterministic (every random draw comes from one of the round's
two seeded streams, :func:`~specdec_core.engine.rounds.round_stream`, in order), so the
state is *what was done*, not what came out: :func:`~specdec_core.lessons.replay.replay`
runs the same steps again and reaches the same drafts, verdicts and KV table.
:func:`encode` / :func:`decode` turn a state into URL query parameters
(``v=2&lang=zh&s=<base64url(zlib(compact JSON))>``: short, versioned, opaque to nobody —
decoding validates every field). Version 1 links (made while every draw came from one
generator per session) still open: greedy ones replay the same moment (temperature 0 makes
no random draw); one with temperature > 0 opens with the problem ``old_rng`` (its sampled
moment may differ). :func:`~specdec_core.lessons.replay.step_back` is undo: the state one
phase or edit earlier, replayed.

The settings part of a state converts to and from a session's
:class:`~specdec_core.core.settings.SessionConfig` in one place: :meth:`LessonState.config`
and :meth:`LessonState.with_config`, both read from one table (:data:`SETTINGS`). The walk
down is URL → :func:`decode` → state → ``state.config()`` → replay (in the app: → the
sidebar's widgets, whose settings the replay then takes as they are); the walk back is
session → :func:`~specdec_core.lessons.replay.state_of` (``with_config``) → :func:`encode`.

Query parameters are untrusted input: every value is bounded and checked
(:mod:`~specdec_core.lessons.link_fields`); a bad one is dropped for its default with a
:class:`Problem` naming it, never an exception. A link can
name a pair only from the caller's allow-list and can run nothing but the steps that
``lessons/replay.py`` replays.

Pure module: no Streamlit.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from specdec_core.core.errors import ConfigError
from specdec_core.core.grammar import GrammarSpec
from specdec_core.core.settings import SessionConfig
from specdec_core.core.untrusted_json import load_json
from specdec_core.drafters.registry import DRAFTERS, preset_max_gamma
from specdec_core.engine.schedule import check_gamma_settings
from specdec_core.engine.tree.generate import tree_refusal
from specdec_core.lessons.link_fields import BAD, LANGS, check_field

LINK_VERSION = 2
#: Older versions that still open; their draws came from one generator per session, so a
#: link of theirs with temperature > 0 gets the problem ``old_rng``.
OLD_RNG_VERSIONS = ("1",)
#: The pair a link means when it names none, by its language (a Chinese link opens the
#: Chinese pair, as a fresh Chinese visit does); :func:`encode` leaves out only that pair.
LINK_PAIR = {"en": "embedded", "zh": "embedded-zh"}
MAX_PARAM_CHARS = 8_000  # the encoded state, before anything is decompressed
MAX_STATE_BYTES = 64_000  # the decompressed JSON

#: The settings a lesson state shares with :class:`SessionConfig`, under the same names:
#: the one table both directions of the conversion read (:meth:`LessonState.config`,
#: :meth:`LessonState.with_config`). The grammar is a ``(kind, source)`` pair here, a
#: :class:`GrammarSpec` there; the other session settings are not part of a link.
SETTINGS = (
    "gamma",
    "temperature",
    "top_k",
    "top_p",
    "draft_method",
    "seed",
    "max_new_tokens",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "no_repeat_ngram_size",
    "grammar",
    "gamma_schedule",
    "confidence",
    "verification",
)


@dataclass(frozen=True)
class LessonState:
    """Everything a lesson link holds. ``round``: finished rounds; ``phase``: where the
    next round stands (``propose``: nothing done yet, ``verify``: drafts proposed (and
    edited), ``commit``: verified). ``edits``: ``(round, position, token id)`` in the
    order they were made (round from 0, position from 1). ``cont``: committed tokens
    carried over from a session continued after a settings change (appended to the
    prompt; they count as generated). ``tree``: the tree shape (children per node at
    each depth, ``tree.parse_shape`` limits) when the lesson verifies a tree, ``()`` for
    a chain; a tree has no edits and needs settings the engine can draft a tree with
    (:func:`specdec_core.engine.tree.generate.tree_refusal`)."""

    page: str = "step_through"
    lang: str = "en"
    pair: str = "embedded"
    gamma: int = 4
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    draft_method: str = "probabilistic"
    drafter: str = "model"
    seed: int = 0
    max_new_tokens: int = 80
    prompt: str = ""
    cont: tuple[int, ...] = ()
    round: int = 0
    phase: str = "propose"
    edits: tuple[tuple[int, int, int], ...] = ()
    presenter: bool = False
    tree: tuple[int, ...] = ()
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    grammar: tuple[str, ...] = ()
    gamma_schedule: str = "constant"
    confidence: float = 0.4
    verification: str = "token"  # older links: token-wise, as they were made

    def config(self) -> SessionConfig:
        """The session settings of this state (the inverse of :meth:`with_config`)."""
        values: dict = {name: getattr(self, name) for name in SETTINGS}
        values["grammar"] = GrammarSpec(*self.grammar) if self.grammar else None
        return SessionConfig(**values)

    def with_config(self, config: SessionConfig) -> LessonState:
        """This state with ``config``'s settings (the inverse of :meth:`config`)."""
        values: dict = {name: getattr(config, name) for name in SETTINGS}
        values["grammar"] = (config.grammar.kind, config.grammar.source) if config.grammar else ()
        return replace(self, **values)


@dataclass(frozen=True)
class Problem:
    """A part of a link that was dropped: ``code`` (UI string ``link_<code>``) and the
    values its message names."""

    code: str
    params: dict = field(default_factory=dict)


# ---------------------------------------------------------------- URL form
def encode(state: LessonState) -> dict[str, str]:
    """Query parameters for ``state`` (only the fields that differ from the defaults go
    into ``s``, the pair unless it is the language's :data:`LINK_PAIR`; ``lang`` stays
    readable)."""
    default = replace(LessonState(), pair=LINK_PAIR.get(state.lang, LessonState().pair))
    diff = {
        f.name: _plain(getattr(state, f.name))
        for f in fields(state)
        if f.name != "lang" and getattr(state, f.name) != getattr(default, f.name)
    }
    raw = json.dumps(diff, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    packed = base64.urlsafe_b64encode(zlib.compress(raw, 9)).rstrip(b"=").decode("ascii")
    return {"v": str(LINK_VERSION), "lang": state.lang, "s": packed}


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def decode(
    params: Mapping[str, str | Sequence[str]], offered_pairs: Sequence[str]
) -> tuple[LessonState, list[Problem]]:
    """The state a link's query parameters describe, each bad part replaced by its default
    with a :class:`Problem` (never an exception). ``offered_pairs`` is the allow-list:
    another pair name falls back to ``embedded``; a link that names no pair gets its
    language's :data:`LINK_PAIR` where offered."""
    problems: list[Problem] = []
    state = LessonState()
    lang = _first(params.get("lang"))
    if lang is not None:
        if lang in LANGS:
            pair = LINK_PAIR.get(lang, state.pair)
            state = replace(state, lang=lang, pair=pair if pair in offered_pairs else state.pair)
        else:
            problems.append(Problem("bad_value", {"name": "lang"}))
    version, packed = _first(params.get("v")), _first(params.get("s"))
    if packed is None:
        return state, problems
    if version is None:  # every link the app writes names its version
        return state, [*problems, Problem("unreadable")]
    if version != str(LINK_VERSION) and version not in OLD_RNG_VERSIONS:
        return state, [*problems, Problem("version", {"version": _shown_name(version, 8)})]
    data = unpack_state(packed)
    if data is None:
        return state, [*problems, Problem("unreadable")]
    values: dict[str, object] = {}
    for f in fields(LessonState):
        if f.name not in data or f.name == "lang":
            continue
        checked = check_field(f.name, data[f.name], offered_pairs)
        if checked is BAD:
            problems.append(Problem("bad_value", {"name": f.name}))
        else:
            values[f.name] = checked
    pair = str(values.get("pair", state.pair))
    spec = DRAFTERS.get(str(values.get("drafter")))
    if spec is not None and not spec.on_preset(pair):
        # the EAGLE head, the MTP heads, the block drafter exist only beside a pair that
        # ships them
        del values["drafter"]
        problems.append(Problem("bad_value", {"name": "drafter"}))
    gamma = values.get("gamma", state.gamma)
    cap = preset_max_gamma(pair, str(values.get("drafter", state.drafter)))
    if cap is not None and isinstance(gamma, int) and gamma > cap:  # the page would refuse
        values["gamma"] = cap
        problems.append(Problem("gamma_capped", {"gamma": gamma, "cap": cap}))
    if gamma_refused(replace(state, **values)):  # the tree or drafter cannot: constant γ
        del values["gamma_schedule"]
        problems.append(Problem("bad_value", {"name": "gamma_schedule"}))
    if values.get("tree") and values.get("verification", "token") != "token":
        del values["verification"]  # a tree verifies token-wise (SpecInfer)
        problems.append(Problem("bad_value", {"name": "verification"}))
    if values.get("tree") and tree_refused(replace(state, **values)):
        del values["tree"]  # the rest of the link opens as a chain
        problems.append(Problem("bad_value", {"name": "tree"}))
    unknown = sorted(set(data) - {f.name for f in fields(LessonState)})
    if unknown:
        names = ", ".join(_shown_name(name, 20) for name in unknown)
        problems.append(Problem("bad_value", {"name": names[:60]}))
    state = replace(state, **values)
    if version in OLD_RNG_VERSIONS and state.temperature > 0:  # greedy: no draws, same moment
        problems.append(Problem("old_rng"))
    return state, problems


def _shown_name(text: object, limit: int) -> str:
    """A name from a link, safe to show in a message: letters, digits, ``_ . -`` only (a
    key such as ``[a](https://e.vil)`` must not become a link), at most ``limit``."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "?", str(text)[:limit])


def _first(value: str | Sequence[str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value[0] if value else None


def unpack_state(packed: str) -> dict | None:
    """The JSON object a link's ``s`` holds (the fields that differ from the defaults,
    not checked), or ``None`` when it is unreadable or over the bounds."""
    if len(packed) > MAX_PARAM_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
        inflater = zlib.decompressobj()
        text = inflater.decompress(raw, MAX_STATE_BYTES)
        if inflater.unconsumed_tail:  # larger than allowed: a zip bomb is not read
            return None
        data = load_json(text, strict=False)  # nesting bounded; fields checked below
    except (binascii.Error, ValueError, zlib.error):
        return None
    return data if isinstance(data, dict) else None


def gamma_refused(state: LessonState) -> bool:
    """Whether ``state`` names a γ schedule its shape or drafter cannot run (the engine's
    rule, :func:`specdec_core.engine.schedule.check_gamma_settings`: a schedule with a
    tree, the confidence stop with prompt lookup); a γ above a drafter's own limit is left
    to the session (its message names the limit)."""
    try:
        check_gamma_settings(state.config(), state.drafter, tree=bool(state.tree))
    except ConfigError as exc:
        return exc.code != "gamma_drafter"
    return False


def tree_refused(state: LessonState) -> bool:
    """Whether ``state`` names a tree its settings cannot draft (the engine's rule,
    :func:`specdec_core.engine.tree.generate.tree_refusal`: a drafter without a
    distribution, or the greedy draft method at temperature > 0)."""
    if not state.tree:
        return False
    return tree_refusal(state.drafter, state.draft_method, state.temperature) is not None


def state_json(state: LessonState) -> dict:
    """``state`` as plain JSON values (for the trace file)."""
    return {k: _plain(v) for k, v in asdict(state).items()}
