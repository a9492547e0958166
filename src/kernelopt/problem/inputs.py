"""Input distributions used to catch shortcuts.

The same shapes, dtypes and strides as the problem's own ``get_inputs()``, with
floating-point values rescaled: as given, ×3, ×0.01 and ×−1. A candidate that only
works on ``torch.rand`` in [0, 1) (sign assumptions, a fast GELU that fails at
large magnitude, an unstable variance) fails one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kernelopt.errors import KerneloptError

DISTRIBUTIONS: dict[str, float] = {"given": 1.0, "x3": 3.0, "x0.01": 0.01, "neg": -1.0}


def apply_distribution(inputs: Sequence[Any], distribution: str) -> list[Any]:
    """Scale every floating-point tensor input by the distribution's factor."""
    try:
        factor = DISTRIBUTIONS[distribution]
    except KeyError:
        raise KerneloptError(
            f"unknown input distribution {distribution!r}; choose one of {', '.join(DISTRIBUTIONS)}"
        ) from None
    if factor == 1.0:
        return list(inputs)
    out = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value * factor
        out.append(value)
    return out
