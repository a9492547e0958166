"""The launch-config space of a generated Triton kernel, beyond Inductor's heuristics.

Inductor tries a handful of configs per kernel (more with max-autotune and
coordinate descent). We enumerate the block sizes its launcher accepts for the
kernel's kind (pointwise: XBLOCK; persistent reduction: XBLOCK, the whole row in
registers; looped reduction: XBLOCK × R0_BLOCK; 2-D tiles: XBLOCK × YBLOCK), all
warp counts up to 32 and a few pipeline depths, and drop configs whose tile
could not fit in registers.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any, Iterator

from kernelopt.capture.output_code import KernelDef

MAX_TILE_ELEMENTS = 1 << 16  # elements one program holds: beyond this, certain spills
WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3)


def _pow2(lo: int, hi: int) -> list[int]:
    return [1 << i for i in range(lo.bit_length() - 1, hi.bit_length())]


def launch_config_space(kernel: KernelDef, include_stages: bool = False) -> Iterator[dict[str, Any]]:
    """Every config the kernel's launch parameters admit, smallest tiles first."""
    blocks = [p.name for p in kernel.params if p.constexpr]
    stages = STAGES if include_stages else (1,)
    axes: list[list[int]] = []
    for name in blocks:
        if name.startswith("R0_BLOCK"):
            axes.append(_pow2(64, 16384))
        elif name in ("XBLOCK", "YBLOCK"):
            axes.append(_pow2(1, 4096) if kernel.heuristic == "pointwise" else _pow2(1, 512))
        else:
            return  # a block parameter we do not know how to size: no configs rather than wrong ones
    for sizes in product(*axes):
        tile = 1
        for s in sizes:
            tile *= s
        if tile > MAX_TILE_ELEMENTS:
            continue
        # A persistent reduction's tile also spans the whole row (R0_BLOCK is baked into
        # its source), which we cannot see here: no thread bound for it.
        bounded = kernel.heuristic != "persistent_reduction"
        for warps, stage in product(WARPS, stages):
            if bounded and warps * 32 > max(tile, 32) * 4:  # more threads than a quarter-element each: pointless
                continue
            yield {**dict(zip(blocks, sizes)), "num_warps": warps, "num_stages": stage}


def config_distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Log2 steps between two configs, summed over shared fields (how far coordinate descent walks)."""
    return sum(abs(math.log2(a[k] / b[k])) for k in a if k in b and a[k] > 0 and b[k] > 0)
