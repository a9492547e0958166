"""A kernel of the same model compiled under other options, matched to a captured kernel's slot.

Inductor names a generated kernel after the operations it fused; a variant compile that fused the
same operations into a kernel with the same runtime parameters wrote that slot's kernel otherwise
(a looped reduction for a persistent one, ND tiling, ...). Matched and renamed here, in the capture
layer, so the evaluation worker that compiles the variants and the search that proposes them read
one definition.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelopt.capture.kernel_source import renamed
from kernelopt.capture.output_code import KernelDef

_STEM = re.compile(r"^triton_(?:poi|red|per|tem|spl|mix|coop)_(?P<ops>.+?)(?:_\d+)?$")


def fused_ops(name: str) -> str | None:
    """What a generated kernel's name says it fused (``triton_red_fused_div_norm_0`` -> ``fused_div_norm``)."""
    m = _STEM.match(name)
    return m.group("ops") if m else None


def matching_kernel(original: KernelDef, variants: Sequence[KernelDef]) -> KernelDef | None:
    """The variant's kernel for ``original``'s slot: the same fused operations and the same runtime
    parameters in order (the wrapper passes them by position); None when the variant fused otherwise.
    A variant identical to the original (the options changed nothing here) is no candidate either."""
    ops = fused_ops(original.name)
    params = [p.name for p in original.runtime_params]
    for kernel in variants:
        if kernel.language != "triton" or fused_ops(kernel.name) != ops or ops is None:
            continue
        if [p.name for p in kernel.runtime_params] != params:
            continue
        if as_replacement(kernel, original.name) == original.source:
            return None
        return kernel
    return None


def as_replacement(variant: KernelDef, name: str) -> str:
    """The variant's source under the original's kernel name (its ``def`` and ``inductor_meta``)."""
    return renamed(variant.source, variant.name, name)
