"""The command line's adaptive-γ options for ``run`` (``engine/schedule.py``):
``--gamma-schedule constant|heuristic|confidence`` and ``--confidence F`` (the confidence
stop's threshold, in (0, 1), default 0.4 as transformers' ``assistant_confidence_threshold``).

With the defaults the JSON is unchanged. With another schedule it gains a top-level key
``"gamma_schedule": {"name": "heuristic"}`` (``confidence``: ``{"name": "confidence",
"confidence": 0.4}``), and every round shows ``"gamma"`` (the γ the round asked the
drafter for: the schedule's, cut near ``max_new_tokens`` or the context end) and
``"drafted_count"`` (the drafts it made: fewer after a confidence stop).
"""

from __future__ import annotations

import argparse

from specdec_core.core.errors import InputError
from specdec_core.core.settings import GAMMA_SCHEDULES, SessionConfig
from specdec_core.engine.schedule import check_gamma_settings

_DEFAULTS = SessionConfig()


def add_gamma_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--gamma-schedule`` and ``--confidence`` to a subcommand (values are checked by
    :func:`check_gamma_args`, so a bad one is one ``error:`` line, exit 2)."""
    parser.add_argument(
        "--gamma-schedule",
        default=_DEFAULTS.gamma_schedule,
        metavar="|".join(GAMMA_SCHEDULES),
        help="how γ changes per round: constant (default), heuristic (transformers: +2 "
        "after a fully accepted round, else −1) or confidence (stop drafting when the "
        "draft's top probability falls under --confidence)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=None,
        metavar="F",
        help="the confidence stop's threshold, in (0, 1) (default 0.4); needs "
        "--gamma-schedule confidence",
    )


def gamma_settings(args: argparse.Namespace) -> dict:
    """The ``SessionConfig`` keyword arguments of these options (defaults when absent)."""
    return {
        "gamma_schedule": getattr(args, "gamma_schedule", _DEFAULTS.gamma_schedule),
        "confidence": _confidence(args),
    }


def _confidence(args: argparse.Namespace) -> float:
    """``--confidence`` as given, or the default 0.4 when absent."""
    value = getattr(args, "confidence", None)
    return _DEFAULTS.confidence if value is None else value


def check_gamma_args(args: argparse.Namespace) -> None:
    """Refuse bad values before any model loads.

    Raises:
        ConfigError: ``bad_gamma_schedule``, ``bad_confidence``, ``gamma_schedule_tree``
            (a schedule with ``--tree``), ``confidence_ngram`` (``confidence`` with
            ``--drafter ngram``), ``gamma_drafter`` (``--gamma`` above the drafter class's
            ``max_gamma``; a limit known only once the drafter is made is checked when the
            session starts).
        InputError: ``gamma_schedule_mode``: a schedule with ``--mode autoregressive``;
            ``confidence_needs_schedule``: ``--confidence`` without ``--gamma-schedule
            confidence`` (it would be silently ignored).
    """
    config = SessionConfig(gamma=getattr(args, "gamma", 4), **gamma_settings(args)).validate()
    if getattr(args, "confidence", None) is not None and config.gamma_schedule != "confidence":
        raise InputError(
            "--confidence needs --gamma-schedule confidence", "confidence_needs_schedule"
        )
    if config.gamma_schedule != "constant" and getattr(args, "mode", "") == "autoregressive":
        raise InputError(
            f"--gamma-schedule {config.gamma_schedule} changes the drafts per round: it "
            "needs --mode speculative",
            "gamma_schedule_mode",
            schedule=config.gamma_schedule,
        )
    tree = getattr(args, "tree", None) is not None
    check_gamma_settings(config, getattr(args, "drafter", None), tree=tree)


def gamma_json(args: argparse.Namespace) -> dict:
    """The extra top-level JSON key (``{}`` with the constant schedule: the contract
    unchanged)."""
    config = SessionConfig(**gamma_settings(args))
    if config.gamma_schedule == "constant":
        return {}
    out: dict = {"name": config.gamma_schedule}
    if config.gamma_schedule == "confidence":
        out["confidence"] = config.confidence
    return {"gamma_schedule": out}
