"""The command line's issue-27 options for ``run`` and ``bench``: ``--target-quant
none|int8|int4`` (a weight-only fake-quantized copy of the target, ``core/quant.py``) and
``--acceptance exact|typical|threshold`` with ``--acceptance-delta``, ``--acceptance-epsilon``
and ``--acceptance-top-k`` (the lossy rules of ``rules/lossy.py``, never the default).

With the defaults the JSON is unchanged. Otherwise it gains top-level keys:
``"target_quant": "int8"`` and ``"acceptance": {"rule": "typical", "lossy": true,
"delta": 0.3, "epsilon": 0.09}`` (threshold: ``"top_k"`` instead of ``"epsilon"``).
"""

from __future__ import annotations

import argparse

from specdec_core.core.errors import InputError
from specdec_core.core.models import ModelPair
from specdec_core.core.quant import QUANT_KINDS, check_quant, quant_json, quantized_pair
from specdec_core.core.settings import SessionConfig
from specdec_core.rules.lossy import lossy_rule

_DEFAULTS = SessionConfig()


def add_lossless_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--target-quant`` and the ``--acceptance*`` options to a subcommand (values
    are checked by :func:`check_lossless_args`, so a bad one is one ``error:`` line)."""
    parser.add_argument(
        "--target-quant",
        default="none",
        metavar="|".join(QUANT_KINDS),
        help="verify with a weight-only int8/int4 fake-quantized copy of the target",
    )
    parser.add_argument(
        "--acceptance",
        default="exact",
        metavar="exact|typical|threshold",
        help="verification rule; typical and threshold are LOSSY (default exact)",
    )
    parser.add_argument("--acceptance-delta", type=float, default=_DEFAULTS.acceptance_delta)
    parser.add_argument("--acceptance-epsilon", type=float, default=_DEFAULTS.acceptance_epsilon)
    parser.add_argument("--acceptance-top-k", type=int, default=_DEFAULTS.acceptance_top_k)


def acceptance_settings(args: argparse.Namespace) -> dict:
    """The ``SessionConfig`` keyword arguments of the ``--acceptance*`` options (their
    defaults when a namespace lacks them)."""
    return {
        "acceptance": getattr(args, "acceptance", "exact"),
        "acceptance_delta": getattr(args, "acceptance_delta", _DEFAULTS.acceptance_delta),
        "acceptance_epsilon": getattr(args, "acceptance_epsilon", _DEFAULTS.acceptance_epsilon),
        "acceptance_top_k": getattr(args, "acceptance_top_k", _DEFAULTS.acceptance_top_k),
    }


def check_lossless_args(args: argparse.Namespace) -> None:
    """Refuse bad values before any model loads.

    Raises:
        ConfigError: ``quant_unknown``, ``acceptance_rule``, ``acceptance_delta``,
            ``acceptance_epsilon``, ``acceptance_top_k`` (its upper bound, the vocabulary
            size, is checked when the session starts).
        InputError: ``acceptance_mode``: a lossy rule with ``--mode autoregressive`` or
            ``--tree`` (the rule acts on a chain's drafts only).
    """
    check_quant(getattr(args, "target_quant", "none"))
    config = SessionConfig(**acceptance_settings(args)).validate()
    if not config.lossy:
        return
    if getattr(args, "tree", None) is not None or getattr(args, "mode", "") == "autoregressive":
        raise InputError(
            f"--acceptance {config.acceptance} changes how a chain's drafts are verified: "
            "it needs --mode speculative and no --tree",
            "acceptance_mode",
            rule=config.acceptance,
        )


def lossless_pair(pair: ModelPair, args: argparse.Namespace) -> ModelPair:
    """``pair`` with its target quantized per ``--target-quant`` (``none``: ``pair``)."""
    return quantized_pair(pair, getattr(args, "target_quant", "none"))


def lossless_json(args: argparse.Namespace) -> dict:
    """The extra top-level JSON keys (``{}`` with the defaults: the contract unchanged)."""
    out = quant_json(getattr(args, "target_quant", "none"))
    rule = lossy_rule(SessionConfig(**acceptance_settings(args)))
    if rule is not None:
        out["acceptance"] = rule.to_json()
    return out
