"""How probabilities are written in tables, captions and tooltips (pure; both languages).

A probability is never printed as ``0.0000`` when it is not 0: below 10⁻³ it is written
in scientific notation with three significant digits (``1.04e-5``); exact 0 is ``0``.
"""

from __future__ import annotations

import math

__all__ = ["fmt_prob", "fmt_short", "fmt_sig"]


def fmt_prob(x: float | None, digits: int = 4, missing: str = "—") -> str:
    """``0`` → ``"0"``, ``1.04e-5`` → ``"1.04e-5"``, ``0.5`` → ``"0.5000"``, ``1`` →
    ``"1.0000"``; ``None``/NaN → ``missing``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) < 10 ** -(digits - 1):
        mantissa, exp = f"{x:.2e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exp)}"
    return f"{x:.{digits}f}"


def fmt_sig(x: float | None, sig: int = 4, missing: str = "—") -> str:
    """``x`` with ``sig`` significant digits, so that numbers shown side by side reproduce
    a result shown beside them (``a = min(1, p/q)`` from the shown ``p`` and ``q`` to about
    ``sig − 1`` digits; fixed decimals could not: ``p = 0.0017``, ``q = 0.0022`` beside
    ``a = 0.8060``). ``0`` → ``"0"``, ``0.0017354`` → ``"0.001735"``, ``0.5`` →
    ``"0.5000"``, ``1`` → ``"1.000"``, below 10⁻³ scientific: ``1.04e-5`` → ``"1.040e-5"``;
    ``None``/NaN → ``missing``.

    Raises:
        ValueError: ``sig < 1``.
    """
    if sig < 1:
        raise ValueError(f"sig must be ≥ 1, got {sig}")
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) < 1e-3:
        mantissa, exp = f"{x:.{sig - 1}e}".split("e")
        return f"{mantissa}e{int(exp)}"
    rounded = float(f"{x:.{sig - 1}e}")  # 0.099996 → 0.1000: decimals of the rounded value
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def fmt_short(x: float, digits: int = 2) -> str:
    """Short labels on bars: ``0.44``; a non-zero value that would round to ``0.00`` is
    written like :func:`fmt_prob` (``1.04e-5``), exact 0 as ``0``."""
    x = float(x)
    if x == 0 or abs(x) >= 0.5 * 10**-digits:
        return "0" if x == 0 else f"{x:.{digits}f}"
    return fmt_prob(x)
