"""A group norm's per-channel scale and shift, and what follows them elementwise, computed in its groups'
shape, so that Inductor fuses them into the kernel that computes the groups' statistics.

On a GPU, torch decomposes ``nn.GroupNorm`` into the input viewed as groups (``N, G, C/G, H*W``), its
``var_mean`` over each group, the normalisation in that shape, a view back to ``N, C, H, W``, then the
weight and bias by channel. Inductor cannot fuse that last part into the statistics' kernel: read in
``N, C, H, W``, a group's mean sits at ``8 * n + c // 8``, which its fusion does not match with the
statistics' own index. So it writes two kernels, the statistics (one read of the input) and the output
(a second read), whatever its options (none of them fused it on the suite's group norm). This post-grad
rewrite, run where the compile options hold ``kernelopt.group_rows``, moves the view back after the
weight, the bias and every elementwise op that follows whose other operands the groups' shape can take (a
SiLU, a cast, a diffusion block's scale and shift by sample and channel, a residual): the weight is viewed
as ``1, G, C/G, 1`` instead. Inductor then writes one kernel per group norm,
its statistics and its output in two loops over each group, and that kernel is what
:mod:`kernelopt.capture.row_split` splits across programs that hold a group in registers: one read.

It changes only the order of views and elementwise ops: the values are the graph's. It is a compile
option and a knob, not a graph variant: on the H100 every form ran slower than the stock two kernels, each
at its roofline (the suite's group norm 0.976x alone, 0.82-0.92x under the row split, whose two grid
barriers a group cost about a program's own read; benchmarks/h100-2026-12-06-suite-modes).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch

from kernelopt.capture.rewrites.cluster_softmax import node_value
from kernelopt.capture.rewrites.online_softmax import _call, is_call

GROUP_ROWS_OPTION = "kernelopt.group_rows"  # a compile option of kernelopt's own: True

_aten = torch.ops.aten
_cast = torch.ops.prims.convert_element_type.default
_VIEWS = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default)
# elementwise ops moved into the groups' shape: each reads only tensors of the region or per-channel ones
_ELEMENTWISE = frozenset(
    {
        _aten.add.Tensor,
        _aten.sub.Tensor,
        _aten.mul.Tensor,
        _aten.div.Tensor,
        _aten.maximum.default,
        _aten.minimum.default,
        _aten.sigmoid.default,
        _aten.relu.default,
        _aten.silu.default,
        _aten.gelu.default,
        _aten.tanh.default,
        _aten.neg.default,
        _aten.exp.default,
        _aten.abs.default,
        _aten.clamp_min.default,
        _aten.clamp_max.default,
        _aten.clamp.default,
        _aten.hardtanh.default,
        _aten.leaky_relu.default,
        _cast,
    }
)
_STEPS = 8  # how far back from the view a group's statistics are looked for (4x as many nodes visited)


def _shape(node: Any) -> tuple[int, ...] | None:
    value = node_value(node)
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return tuple(int(s) for s in value.shape)


def _groups_of(view: torch.fx.Node) -> tuple[int, int] | None:
    """``(G, C/G)`` where ``view`` turns a tensor of its groups' shape ``(N, G, C/G, H*W)`` back into
    ``(N, C, ...)``, the groups normalised by their own ``var_mean`` (at most :data:`_STEPS` elementwise
    ops before it); else None."""
    src, out = _shape(view.args[0]), _shape(view)
    if src is None or out is None or len(src) != 4 or len(out) < 3:
        return None
    if src[0] != out[0] or src[1] * src[2] != out[1] or src[3] != math.prod(out[2:]) or src[1] < 2:
        return None
    return (src[1], src[2]) if _normalised_groups(view.args[0], src) else None


def _normalised_groups(node: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``node`` reaches, through elementwise ops, a ``var_mean`` over the last two dimensions of a
    tensor of ``shape``."""
    pending, seen = [node], 0
    while pending and seen < 4 * _STEPS:
        n = pending.pop()
        seen += 1
        if not isinstance(n, torch.fx.Node):
            continue
        if n.op == "call_function" and n.target is operator.getitem:
            stats: Any = n.args[0]
            if is_call(stats, _aten.var_mean.correction) and _shape(stats.args[0]) == shape:
                dims = stats.args[1] if len(stats.args) > 1 else stats.kwargs.get("dim")
                if isinstance(dims, (list, tuple)) and sorted(d % 4 for d in dims) == [2, 3]:
                    return True
            continue
        if n.op == "call_function" and (n.target in _ELEMENTWISE or n.target is _aten.rsqrt.default):
            pending.extend(n.all_input_nodes)
    return False


def _grouped_shape(node: Any, out: tuple[int, ...], groups: tuple[int, int]) -> list[int] | None:
    """The shape ``node`` (a tensor broadcast against ``out``, ``N, C, ...``) takes in the groups' shape
    ``N, G, C/G, H*W``: each of its batch, channel and spatial parts either whole or broadcast (``(C,)``
    as ``1, G, C/G, 1``; a time embedding's ``N, C, 1, 1`` as ``N, G, C/G, 1``; a residual as
    ``N, G, C/G, H*W``); None for a tensor broadcast along part of the spatial dimensions, a symbolic
    shape, or anything but a tensor."""
    shape = _shape(node) if isinstance(node, torch.fx.Node) else None
    if shape is None or len(shape) > len(out):
        return None
    aligned = (1,) * (len(out) - len(shape)) + shape
    spatial, whole = aligned[2:], out[2:]
    if aligned[0] not in (1, out[0]) or aligned[1] not in (1, out[1]) or spatial not in ((1,) * len(whole), whole):
        return None
    by_channel = aligned[1] == out[1]
    return [
        aligned[0],
        groups[0] if by_channel else 1,
        groups[1] if by_channel else 1,
        math.prod(whole) if spatial == whole else 1,
    ]


def _by_channel(node: Any, out: tuple[int, ...]) -> bool:
    """Whether ``node`` is a tensor that varies along ``out``'s channels (a weight, a bias, a time
    embedding's scale): what Inductor fails to fuse when read in ``N, C, ...``."""
    shape = _shape(node) if isinstance(node, torch.fx.Node) else None
    if shape is None or len(shape) > len(out):
        return False
    return ((1,) * (len(out) - len(shape)) + shape)[1] == out[1] > 1  # aligned from the right, as broadcast


def _elementwise(node: torch.fx.Node) -> bool:
    """Whether ``node`` is one of :data:`_ELEMENTWISE`, or a cast written as ``_to_copy`` to a dtype alone."""
    if node.op != "call_function":
        return False
    if node.target is _aten._to_copy.default:
        return set(node.kwargs) <= {"dtype"}
    return node.target in _ELEMENTWISE


def _region(view: torch.fx.Node, out: tuple[int, ...], groups: tuple[int, int]) -> list[torch.fx.Node]:
    """The elementwise ops after ``view`` (in graph order) that read only ``view``, each other, numbers and
    tensors the groups' shape takes (:func:`_grouped_shape`), and have ``out``'s shape."""
    inside = {view}
    region: list[torch.fx.Node] = []
    node = view.next
    while node.op != "output":
        if _elementwise(node) and _shape(node) == out:
            reads = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, torch.fx.Node)]
            if any(a in inside for a in reads) and all(a in inside or _grouped_shape(a, out, groups) for a in reads):
                inside.add(node)
                region.append(node)
        node = node.next
    return region


def _regroup(graph: torch.fx.Graph, view: torch.fx.Node, groups: tuple[int, int]) -> bool:
    out = _shape(view)
    assert out is not None
    region = _region(view, out, groups)
    inside = {view, *region}
    reads = [a for n in region for a in (*n.args, *n.kwargs.values()) if isinstance(a, torch.fx.Node)]
    operands = [a for a in reads if a not in inside]
    if not any(_by_channel(a, out) for a in operands):
        return False  # nothing read by channel: nothing Inductor fails to fuse
    grouped: dict[torch.fx.Node, torch.fx.Node] = {view: view.args[0]}  # type: ignore[dict-item]
    for node in region:
        with graph.inserting_before(node):
            new = _grouped_call(graph, node, grouped, out, groups)
            grouped[node] = new
            outside = [u for u in node.users if u not in grouped and u not in region]
            if outside:
                back = _call(graph, _aten.reshape.default, new, list(out), like=node)
                for user in outside:
                    user.replace_input_with(node, back)
    for node in reversed(region):
        if not node.users:
            graph.erase_node(node)
    if not view.users:
        graph.erase_node(view)
    return True


def _grouped_call(
    graph: torch.fx.Graph,
    node: torch.fx.Node,
    grouped: dict[torch.fx.Node, torch.fx.Node],
    out: tuple[int, ...],
    groups: tuple[int, int],
) -> torch.fx.Node:
    """``node``'s op on the groups' shape: its region inputs by their grouped nodes, its other tensors
    viewed in the groups' shape (:func:`_grouped_shape`)."""

    def moved(a: Any) -> Any:
        if isinstance(a, torch.fx.Node) and a in grouped:
            return grouped[a]
        shape = _grouped_shape(a, out, groups)
        if shape is not None and (_shape(a) != tuple(shape)):
            return _call(graph, _aten.reshape.default, a, shape, like=node)
        return a

    args = [moved(a) for a in node.args]
    return _call(graph, node.target, *args, like=node, kwargs={k: moved(v) for k, v in node.kwargs.items()})


def rewrite_for_group_rows(graph: torch.fx.Graph) -> int:
    """Each group norm's per-channel weight and bias, and the elementwise ops after them, moved into its
    groups' shape (the view back after them); how many group norms changed."""
    changed = 0
    # listed first: a rewrite adds views (the weight's, the way back) and erases no view but its own
    views = [n for n in graph.nodes if n.op == "call_function" and n.target in _VIEWS]
    for node in views:
        groups = _groups_of(node)
        if groups is not None and _regroup(graph, node, groups):
            changed += 1
    if changed:
        graph.lint()
    return changed
