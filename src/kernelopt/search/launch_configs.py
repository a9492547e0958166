"""The launch-config space of a generated Triton kernel, beyond Inductor's heuristics.

Inductor tries a handful of configs per kernel (more with max-autotune and
coordinate descent). We enumerate the block sizes its launcher accepts for the
kernel's kind (pointwise: XBLOCK; persistent reduction: XBLOCK, the whole row in
registers; looped reduction: XBLOCK × R0_BLOCK; 2-D tiles: XBLOCK × YBLOCK), all
warp counts up to 32 and a few pipeline depths, and drop configs whose tile
could not fit in registers. A looped reduction's R0_BLOCK goes up to its row's
size hint (at most :data:`MAX_TILE_ELEMENTS`): Inductor's tuners stop at 16384
(coordinate descent chose 16384 for a 65536-wide softmax on the H200), and a
block spanning the whole row makes each pass over it one iteration, its second
pass reading what the first just brought into L2.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import product
from typing import Any

from kernelopt.capture.output_code import KernelDef, size_hints

MAX_TILE_ELEMENTS = 1 << 16  # elements one program holds: beyond this, certain spills
WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3)
DEFAULT_MAX_R0_BLOCK = 16384  # for a looped reduction whose row length we cannot read


def _pow2(lo: int, hi: int) -> list[int]:
    return [1 << i for i in range(lo.bit_length() - 1, hi.bit_length())]


def launch_config_space(kernel: KernelDef, include_stages: bool = False) -> Iterator[dict[str, Any]]:
    """Every config the kernel's launch parameters admit, smallest tiles first."""
    blocks = [p.name for p in kernel.params if p.constexpr]
    stages = STAGES if include_stages else (1,)
    axes: list[list[int]] = []
    for name in blocks:
        if name.startswith("R0_BLOCK"):
            axes.append(_pow2(64, r0_block_limit(kernel)))
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


def r0_block_limit(kernel: KernelDef) -> int:
    """The largest R0_BLOCK worth trying: the row's extent (a power of two in Inductor's
    size hints), within the tile bound; 16384 when the hints do not say."""
    row = size_hints(kernel.source).get("r0_")
    if row is None:
        return DEFAULT_MAX_R0_BLOCK
    return min(MAX_TILE_ELEMENTS, max(64, 1 << max(0, row - 1).bit_length()))


def config_distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Log2 steps between two configs, summed over shared fields (how far coordinate descent walks)."""
    return sum(abs(math.log2(a[k] / b[k])) for k in a if k in b and a[k] > 0 and b[k] > 0)
