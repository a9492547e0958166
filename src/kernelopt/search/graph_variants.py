"""Graph candidates without an LLM: one graph's call sequence as Inductor writes it under other options.

Launch configs and single-kernel variants keep which kernels run; these do not. Under each option set
of :data:`GRAPH_OPTIONS` Inductor compiles the graph again and may fuse otherwise (aggressive or
combined kernels), split or loop a reduction, tile in more dimensions: its whole call sequence and
kernels stand in for the graph's (:mod:`kernelopt.capture.graph_swap`), while every other graph of
the model stays as compiled. A candidate is its options (the worker makes the call sequence from
them, once per option set), judged by gate 1's wrapper rules and end to end by the model gate.
"""

from __future__ import annotations

from typing import Any

from kernelopt.capture.graph_swap import describe_options
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION
from kernelopt.capture.rewrites.cluster_norm import CLUSTER_NORM_BULK_OPTION
from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION
from kernelopt.capture.rewrites.online_softmax import ONLINE_SOFTMAX_OPTION
from kernelopt.capture.row_split import CHUNKS, ROW_SPLIT_OPTION
from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext, register_operator

# Inductor's options that change which kernels a graph runs (a name this torch lacks is skipped).
FUSION_OPTIONS: tuple[dict[str, Any], ...] = (
    {"aggressive_fusion": True},
    {"combo_kernels": True},
    {"triton.persistent_reductions": False},
    {"split_reductions": False},
    {"triton.cooperative_reductions": True},
    {"triton.prefer_nd_tiling": True},
    {"online_softmax": False},
    {"realize_opcount_threshold": 100, "realize_reads_threshold": 16},
    {"benchmark_fusion": True},  # Inductor times its own fusion choices on the device while compiling
    {"triton.tile_reductions": True},
)
# Those that remove kernels which only move data.
LAYOUT_OPTIONS: tuple[dict[str, Any], ...] = (
    # A concatenation written as a pointwise kernel that its consumer fuses, not a buffer written whole.
    {"force_pointwise_cat": True},
    # Loops reordered after fusion, so a transposed producer and its consumer can fuse (some torch
    # versions do this by default, and the variant is then Inductor's own graph: no candidate).
    {"loop_ordering_after_fusion": True},
    # Layouts around vendor calls: channels-last copies before and after a convolution, padded copies
    # of a matmul's operands, padded strides of the buffers between kernels.
    {"layout_optimization": False},
    {"shape_padding": False},
    {"comprehensive_padding": False},
)
# A wide row split across programs that hold it in registers (kernelopt.capture.row_split): a softmax
# or norm that Inductor writes as two passes over each row reads it once. Where a one-graph model has no
# reduction that wide (row_split.wide_reductions), the compile stops after the post-grad pass.
ROW_SPLIT_OPTIONS: tuple[dict[str, Any], ...] = tuple({ROW_SPLIT_OPTION: chunk} for chunk in CHUNKS)
# Not here: a group norm given to Inductor in its groups' shape (kernelopt.group_rows: one kernel), alone or
# with the row split. On the H100 every form ran slower than the stock two kernels, each at its roofline
# (level1/16: 0.976x alone, 0.82x split with Inductor's cooperative Welford, 0.89-0.92x with two sums;
# level2/13 split 0.26x): benchmarks/h100-2026-12-06-suite-modes, twenty-sixth session. It stays a compile
# option and a knob. What reads a group once instead is kernelopt's own group norm, each group held in one
# cluster's shared memory (kernelopt.capture.rewrites.cluster_group_norm): correct on the H100, 0.74x in
# level2/13 at gate 4 while what follows it was a second kernel (benchmarks/h100-2026-12-06-group-norm-op);
# that epilogue (scale and shift by sample and channel, SiLU) is the op's since: level2/13 whole 1.045x
# over max-autotune-no-cudagraphs in a probe (benchmarks/h100-2026-12-06-group-norm-epilogue), level2/09
# 0.80x (a channels-last copy), so the stage judges it where it may pay.
# A scaled softmax (a temperature, an attention scale) or a logsumexp given back to Inductor's online
# softmax (kernelopt.capture.rewrites.online_softmax): a looped one reads its rows once less. A wide softmax
# handed to kernelopt's own kernel, which holds each row on chip across a Hopper cluster, in shared
# memory (kernelopt.capture.rewrites.cluster_softmax): read once; a wide row's L2 normalisation by the
# same kernel (kernelopt.capture.rewrites.cluster_norm). Where a one-graph model has none,
# the compile stops after the rewrite finds nothing (compile_stop.stop_where_unchanged) and the
# variant says so.
# The op in its shared-memory form only: it beat the register form at every width on an H100
# (benchmarks/h100-2026-12-05-cluster) and at each of three on the H200 (h200-2026-12-05-bulk-probe), before
# it was made faster still (h100-2026-12-05-bulk-variants); the register form stays a compile option and a
# knob (kernelopt.cluster_softmax, kernelopt.cluster_norm), not a variant each graph stage compiles and screens.
REREAD_OPTIONS: tuple[dict[str, Any], ...] = (
    {ONLINE_SOFTMAX_OPTION: True},
    {CLUSTER_SOFTMAX_BULK_OPTION: True},
    {CLUSTER_NORM_BULK_OPTION: True},  # a row's L2 normalisation by the same kernel
    {CLUSTER_GROUP_NORM_OPTION: True},  # a group norm's groups, by kernelopt's group-norm kernel
    # the same after a convolution: Inductor's layout optimisation writes a convolution's output channels-last,
    # and the op takes its input contiguous, so a copy would stand between them
    {CLUSTER_GROUP_NORM_OPTION: True, "layout_optimization": False},
    *ROW_SPLIT_OPTIONS,
)
GRAPH_OPTIONS: tuple[dict[str, Any], ...] = FUSION_OPTIONS + LAYOUT_OPTIONS + REREAD_OPTIONS


def option_sets(copies_first: bool, rereads_first: bool = False) -> list[dict[str, Any]]:
    """The option sets in the order the worker compiles them, which matters when its time for
    compiling runs out: those that remove copy kernels first where copies are the headroom, the
    online softmax and the row splits first where kernels that read their rows twice are (and last
    elsewhere)."""
    rest = LAYOUT_OPTIONS + FUSION_OPTIONS if copies_first else FUSION_OPTIONS + LAYOUT_OPTIONS
    ordered = REREAD_OPTIONS + rest if rereads_first else rest + REREAD_OPTIONS
    return [dict(o) for o in ordered]


GRAPH_TARGET_PREFIX = "<graph "


def graph_target(graph: int) -> str:
    """The search target of graph ``graph``'s call sequence."""
    return f"{GRAPH_TARGET_PREFIX}{graph}>"


@register_operator("graph-variants")
class GraphVariantOperator:
    """Propose, from the root, each option set under which Inductor wrote this graph otherwise
    (``facts["graph_variants"]``: the worker's list of ``{"options", "available", "reason", "kernels",
    "copies", "buffers"}``); from a passed candidate, its options plus one more of those sets (a greedy walk, as
    the compiler-knob search takes: the worker compiles a combination when it is evaluated).

    The most promising first, as the budget may not reach them all (:func:`promise`): none that
    reduces a large tensor on a few programs, then fewest kernels that only move data (a layout copy
    dropped is a round trip through memory saved), then fewest second passes over rows, then fewest
    buffers the call allocates (an intermediate tensor not written), then fewest kernels, then the order
    of :data:`GRAPH_OPTIONS`."""

    name = "graph-variants"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        if not ctx.target.startswith(GRAPH_TARGET_PREFIX) or n <= 0 or not (parent.is_root or parent.passed):
            return []
        tried = {_key(node.candidate.options or {}) for node in ctx.nodes}
        base = dict(parent.candidate.options or {}) if not parent.is_root else {}
        out: list[Candidate] = []
        for variant in sorted(ctx.facts.get("graph_variants") or [], key=promise):
            extra = dict(variant["options"])
            if not variant.get("available") or any(name in base for name in extra):
                continue
            options = {**base, **extra}
            if _key(options) in tried or len(out) >= n:
                continue
            tried.add(_key(options))
            note = f"graph regenerated by Inductor with {describe_options(options)}{shape_of(variant)}"
            out.append(Candidate(ctx.target, self.name, options=options, note=note))
        return out


def promise(variant: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """The sort key of a compiled variant: its reductions of a large tensor on a few programs (each far
    slower than the split it replaced: such a variant goes last), its copy kernels, its passes over rows
    after the first, the buffers its call allocates, its kernels (a record made before the worker counted
    them sorts by its place in the list alone). Each of the last four is a round trip through memory the
    variant keeps."""
    return (
        int(variant.get("serial") or 0),
        int(variant.get("copies") or 0),
        int(variant.get("rereads") or 0),
        int(variant.get("buffers") or 0),
        int(variant.get("kernels") or 0),
    )


def shape_of(variant: dict[str, Any]) -> str:
    """``: 3 kernels, 1 of them a copy, 2 buffers (compiled: 4 kernels, 2 copies, 3 buffers)``, as the
    worker counted them (less for an older record)."""
    if "kernels" not in variant:
        return ""
    counted = f": {_counts(variant)}"
    if isinstance(variant.get("compiled"), dict) and "kernels" in variant["compiled"]:
        counted += f" (compiled: {_counts(variant['compiled'], short=True)})"
    return counted


def _counts(shape: dict[str, Any], short: bool = False) -> str:
    kernels = int(shape["kernels"])
    counted = f"{kernels} kernel{'' if kernels == 1 else 's'}"
    if "copies" in shape:
        copies = int(shape["copies"])
        many = (
            f"{copies} {'copy' if copies == 1 else 'copies'}"
            if short
            else f"{copies} of them {'a copy' if copies == 1 else 'copies'}"
        )
        counted += f", {many}" if copies else ", no copy"
    if shape.get("rereads"):
        rereads = int(shape["rereads"])
        counted += f", {rereads} second pass{'' if rereads == 1 else 'es'} over rows"
    if shape.get("serial"):
        serial = int(shape["serial"])
        counted += f", {serial} large reduction{'' if serial == 1 else 's'} on few programs"
    if "buffers" in shape:
        buffers = int(shape["buffers"])
        counted += f", {buffers} buffer{'' if buffers == 1 else 's'}"
    return counted


def _key(options: dict[str, Any]) -> str:
    return repr(sorted(options.items()))
