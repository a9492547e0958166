"""Short number formats for verdict reasons, shared by the gates so they read alike."""

from __future__ import annotations

import math
from collections.abc import Sequence


def number(value: float) -> str:
    """Compact form: ``1e-4``, ``3.2e-2``, ``0.5``, ``35.2``, ``1.2e6``, ``inf``."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if 0.1 <= abs(value) < 1e4:
        return f"{value:.3g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def factor(value: float) -> str:
    """A ratio of errors: ``42x``, ``10.5x``, ``1234x``."""
    if not math.isfinite(value):
        return f"{value}x"
    return f"{value:.0f}x" if abs(value) >= 1000 else f"{value:.3g}x"


def percent(fraction: float) -> str:
    """``0.03`` -> ``3%``, ``0.008`` -> ``0.8%``."""
    if not math.isfinite(fraction):
        return f"{fraction}%"
    return f"{fraction * 100:.1f}".rstrip("0").rstrip(".") + "%"


def index(position: Sequence[int]) -> str:
    """``(12, 7)``; ``(5,)`` for one dimension; ``()`` for a 0-dim tensor."""
    return str(tuple(int(p) for p in position))


def finite_or_none(value: float) -> float | None:
    """Details must be strict JSON: infinities and NaN become None."""
    value = float(value)
    return value if math.isfinite(value) else None
