"""A wide ``var_mean`` written as two sums (the mean, then the squared deviations from it), for the row
split.

Under its cooperative reductions Inductor computes a ``var_mean`` with Welford's algorithm over the whole
block: three arrays of a program's elements (mean, second moment, count) besides the elements
themselves, and a division per element in the combine. For an ordinary persistent reduction Inductor
takes two sums instead ("it uses fewer registers"), but not for a cooperative one, so a row split
(:mod:`kernelopt.capture.row_split`) of a group norm holds all four. Written as two sums, the statistics
are two cooperative reductions over the elements held (two barriers, as a softmax has): the mean to a
sum's rounding and the variance the textbook two-pass one, from deviations from that mean (never the sum
of squares less the squared mean); gate 3 judges the values against float64.

Every row split's compile applies it (:meth:`~kernelopt.evaluate.session.EvaluationSession.compile_variant`);
without one, a looped kernel would read the row once more for the second sum. On the H100 it took the
row split of the suite's group norm from 188 registers a thread to 128 (two programs an SM instead of one),
and from 0.82x to about 0.9x of the stock two kernels (benchmarks/h100-2026-12-06-suite-modes).
"""

from __future__ import annotations

import math
import operator

import torch

from kernelopt.capture.rewrites.cluster_softmax import node_value
from kernelopt.capture.rewrites.online_softmax import _call, is_call

VAR_SUMS_OPTION = "kernelopt.var_sums"  # a compile option of kernelopt's own: True

_aten = torch.ops.aten
# The fewest elements a var_mean reduces for it to be rewritten: the row split's WIDE
# (row_split.WIDE, which imports the graph candidates this module must not), below which it splits nothing.
WIDE = 4096
_FLOATS = (torch.float32, torch.float64)  # a 16-bit var_mean stays: its sums would round in 16 bits


def _reduced(node: torch.fx.Node) -> tuple[list[int], int, int, bool] | None:
    """``(dims, elements reduced, correction, keepdim)`` of a ``var_mean`` this rewrite takes, else None."""
    value = node_value(node.args[0])
    if not isinstance(value, torch.Tensor) or value.dtype not in _FLOATS:
        return None
    if not all(isinstance(s, int) for s in value.shape) or value.dim() == 0:
        return None
    dims_arg = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dims_arg is None:
        dims = list(range(value.dim()))
    elif isinstance(dims_arg, int):
        dims = [dims_arg % value.dim()]
    elif isinstance(dims_arg, (list, tuple)) and all(isinstance(d, int) for d in dims_arg):
        dims = sorted({d % value.dim() for d in dims_arg})
    else:
        return None
    correction = node.kwargs.get("correction")
    correction = 1 if correction is None else correction
    if not isinstance(correction, int) or isinstance(correction, bool):
        return None
    count = math.prod(int(value.shape[d]) for d in dims)
    if count < WIDE:
        return None
    return dims, count, correction, bool(node.kwargs.get("keepdim", False))


def _as_sums(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    reduced = _reduced(node)
    getters = list(node.users)
    if reduced is None or not all(is_call(u, operator.getitem) and u.args[1] in (0, 1) for u in getters):
        return False
    dims, count, correction, keepdim = reduced
    x = node.args[0]
    with graph.inserting_before(node):
        total = _call(graph, _aten.sum.dim_IntList, x, dims, True, like=node)
        mean = _call(graph, _aten.div.Tensor, total, count, like=node)
        deviation = _call(graph, _aten.sub.Tensor, x, mean, like=node)
        squared = _call(graph, _aten.mul.Tensor, deviation, deviation, like=node)
        m2 = _call(graph, _aten.sum.dim_IntList, squared, dims, keepdim, like=node)
        var = _call(graph, _aten.div.Tensor, m2, max(count - correction, 0), like=node)
        if not keepdim:
            mean = _call(graph, _aten.squeeze.dims, mean, dims, like=node)
    for getter in getters:
        getter.replace_all_uses_with(var if getter.args[1] == 0 else mean)
        graph.erase_node(getter)
    graph.erase_node(node)
    return True


def rewrite_for_var_sums(graph: torch.fx.Graph) -> int:
    """Each ``var_mean`` of :data:`WIDE` elements or more, in float32 or float64, as two sums; how many
    changed."""
    changed = sum(_as_sums(graph, n) for n in list(graph.nodes) if is_call(n, _aten.var_mean.correction))
    if changed:
        graph.lint()
    return changed
