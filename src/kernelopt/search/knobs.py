"""Compiler-knob search: alternative Inductor settings for the whole model.

A knob candidate is a dict of ``torch._inductor.config`` options; it produces a
different artifact (other kernels, other fusion, GEMM templates with fused
epilogues), so it is judged end to end: the model gate against float64 and the
performance gate on the whole model, both against the default-compiled model
in the same process. The operator walks greedily: a parent's options plus one
more knob, the knobs Inductor's own modes turn on first.
"""

from __future__ import annotations

import json
from typing import Any

from kernelopt.search.candidate import MODEL_TARGET, Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext, register_operator

# One setting per entry, in the order worth trying: what max-autotune-no-cudagraphs turns
# on, then structural choices its modes never combine (fusion, reductions, layout).
KNOBS: tuple[tuple[str, Any], ...] = (
    ("coordinate_descent_tuning", True),
    ("max_autotune", True),
    ("max_autotune_gemm_backends", "ATEN,TRITON"),
    ("triton.multi_kernel", 1),
    ("triton.cooperative_reductions", True),
    ("split_reductions", False),
    ("triton.persistent_reductions", False),
    ("aggressive_fusion", True),
    ("epilogue_fusion", False),
    ("triton.prefer_nd_tiling", True),
    ("layout_optimization", False),
    ("coordinate_descent_check_all_directions", True),
    # The graph-variants stage's structural choices (search/graph_variants.py), so the kernel search,
    # which runs on the winning options' compile, can also run on top of these.
    ("combo_kernels", True),
    ("online_softmax", False),
    ("triton.tile_reductions", True),
    ("benchmark_fusion", True),
    ("force_pointwise_cat", True),
    ("loop_ordering_after_fusion", True),
    ("shape_padding", False),
    ("comprehensive_padding", False),
    # kernelopt's own: a scaled softmax or logsumexp given back to Inductor's online softmax; a wide
    # softmax computed by kernelopt's kernel that keeps its rows on chip (in registers, in shared memory)
    ("kernelopt.online_softmax", True),
    ("kernelopt.cluster_softmax", True),
    ("kernelopt.cluster_softmax_bulk", True),
    ("kernelopt.cluster_norm", True),  # a wide row's L2 normalisation by the same kernel
    ("kernelopt.cluster_norm_bulk", True),
    ("kernelopt.cluster_group_norm", True),  # a wide group norm by kernelopt's kernel: each group read once
    ("kernelopt.group_rows", True),  # a group norm's weight and bias in its groups' shape: one kernel
)
# Knobs that only mean something together with another.
REQUIRES = {
    "max_autotune_gemm_backends": "max_autotune",
    "coordinate_descent_check_all_directions": "coordinate_descent_tuning",
}


def _key(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True)


@register_operator("compiler-knobs")
class CompilerKnobOperator:
    """Parent options plus one knob, for the model target only."""

    name = "compiler-knobs"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        if ctx.target != MODEL_TARGET:
            return []
        base = dict(parent.candidate.options or {})
        tried = {_key(node.candidate.options or {}) for node in ctx.nodes}
        out = []
        for name, value in KNOBS:
            if name in base or (REQUIRES.get(name) and REQUIRES[name] not in base):
                continue
            options = {**base, name: value}
            if _key(options) in tried:
                continue
            out.append(Candidate(MODEL_TARGET, self.name, options=options, note=f"+{name}={value!r}"))
            if len(out) >= n:
                break
        return out
