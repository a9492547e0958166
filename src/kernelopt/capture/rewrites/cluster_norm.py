"""A wide row's L2 normalisation handed to kernelopt's own kernel, which keeps each row on chip.

``x / ||x||`` over rows too wide for one program's registers (embeddings normalised for a cosine
similarity, the suite's row-L2 over 65535 columns) is written by Inductor as a looped reduction that
reads each row twice: its sum of squares, then the division. ``torch.ops.kernelopt.row_l2_normalize``
(:mod:`kernelopt.capture.rewrites.row_softmax_op`, the row softmax's kernel built for a norm) reads it once, the
row split across the thread blocks of a Hopper cluster that exchange their sums of squares. This
post-grad rewrite, run where the compile options hold ``kernelopt.cluster_norm`` (a graph variant of the
graph stage, a knob, an export verified under it; ``kernelopt.cluster_norm_bulk`` for the op's
shared-memory form), replaces each of these over the last dimension of a float32 CUDA tensor on an sm_90
GPU whose rows are 4096 to 131072 wide with one call of the op:

- ``x / sqrt(sum(x * x))`` as ``torch.norm(x, 2, -1, keepdim=True)`` and ``torch.linalg.vector_norm``
  decompose (``pow(x, 2)``, ``pow(s, 0.5)``), or with ``sqrt``;
- ``F.normalize(x, dim=-1)``: the norm clamped to at least ``eps`` and expanded, taken in as the op's
  ``eps``;
- ``x * rsqrt(sum(x * x))``, computed as the division (within a rounding of it).

A norm whose sum or square anything else in the graph reads is left as it is, as is every other graph.
On a machine that cannot build the op (no nvcc and no build of it in place) a graph the rewrite would
change fails to compile, in one line naming what to do. Whether it pays is the graph stage's to judge,
end to end. Not yet run on a GPU.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from kernelopt.capture.rewrites.cluster_softmax import (
    check_buildable,
    last_dim,
    node_value,
    only_users,
    replace_with_call,
    takes_rows,
)
from kernelopt.capture.rewrites.online_softmax import is_call

CLUSTER_NORM_OPTION = "kernelopt.cluster_norm"  # a compile option of kernelopt's own: True
CLUSTER_NORM_BULK_OPTION = "kernelopt.cluster_norm_bulk"  # the same with the op's shared-memory form

_aten = torch.ops.aten


class _Norm(NamedTuple):
    """A row normalisation the op computes: its input and the least norm it divides by."""

    x: torch.fx.Node
    eps: float


def _squares_summed(total: Any) -> Any:
    """``x`` where ``total`` is ``sum(x * x, [-1], keepdim=True)`` (or ``pow(x, 2)``), its square read by the
    sum alone; else None."""
    if not is_call(total, _aten.sum.dim_IntList) or total.kwargs.get("dtype") is not None:
        return None
    square: Any = total.args[0]
    dims = total.args[1] if len(total.args) > 1 else total.kwargs.get("dim")
    keepdim = total.args[2] if len(total.args) > 2 else total.kwargs.get("keepdim", False)
    value = node_value(square)
    if value is None or not keepdim or not last_dim(dims, value.dim()) or not only_users(square, total):
        return None
    squared = (is_call(square, _aten.pow.Tensor_Scalar) and square.args[1] in (2, 2.0)) or (
        is_call(square, _aten.mul.Tensor) and square.args[0] is square.args[1]
    )
    return square.args[0] if squared and isinstance(square.args[0], torch.fx.Node) else None


def _root(node: Any) -> Any:
    """``s`` where ``node`` is ``sqrt(s)`` or ``pow(s, 0.5)``; else None."""
    if is_call(node, _aten.sqrt.default) or (is_call(node, _aten.pow.Tensor_Scalar) and node.args[1] == 0.5):
        return node.args[0]
    return None


def _norm_parts(out: torch.fx.Node) -> _Norm | None:
    """The parts of a row normalisation whose output is ``out``: ``div(x, [expand](clamp_min(sqrt(s),
    eps) | sqrt(s)))`` or ``mul(x, rsqrt(s))``, ``s`` the sum of ``x``'s squares over its last dimension,
    each step read by the next alone. Else None."""
    x: Any
    denominator: Any
    reader: Any = out  # the one node that may read the step being looked at
    eps = 0.0
    if is_call(out, _aten.div.Tensor) and len(out.args) == 2:
        x, denominator = out.args
        if is_call(denominator, _aten.expand.default) and only_users(denominator, reader):
            reader, denominator = denominator, denominator.args[0]
        if is_call(denominator, _aten.clamp_min.default) and only_users(denominator, reader):
            bound = denominator.args[1]
            if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound >= 0:
                return None
            reader, denominator, eps = denominator, denominator.args[0], float(bound)
        total = _root(denominator)
    elif is_call(out, _aten.mul.Tensor) and len(out.args) == 2:
        x, denominator = out.args if is_call(out.args[1], _aten.rsqrt.default) else reversed(out.args)
        total = denominator.args[0] if is_call(denominator, _aten.rsqrt.default) else None
    else:
        return None
    if total is None or not only_users(denominator, reader) or not only_users(total, denominator):
        return None
    return _Norm(x, eps) if _squares_summed(total) is x else None


def rewrite_for_cluster_norm(graph: torch.fx.Graph, bulk: bool = False) -> int:
    """Replace every row L2 normalisation of ``graph`` (a post-grad ATen graph) that
    ``torch.ops.kernelopt.row_l2_normalize`` computes with a call of it (``bulk``: its shared-memory form);
    how many were replaced."""
    count = 0
    for out in list(graph.nodes):
        parts = _norm_parts(out) if out.op == "call_function" else None
        if parts is None:
            continue
        value = node_value(parts.x)
        if not takes_rows(value):
            continue
        option = CLUSTER_NORM_BULK_OPTION if bulk else CLUSTER_NORM_OPTION
        check_buildable(value.dtype, value.dtype, value.device, option)
        arguments = (parts.x, parts.eps) + ((True,) if bulk else ())
        replace_with_call(graph, out, torch.ops.kernelopt.row_l2_normalize.default, arguments)
        count += 1
    if count:
        graph.lint()
    return count


def rewrite_for_cluster_norm_bulk(graph: torch.fx.Graph) -> int:
    """:func:`rewrite_for_cluster_norm` calling the op's shared-memory form."""
    return rewrite_for_cluster_norm(graph, bulk=True)
