"""A wide row's L2 normalisation handed to kernelopt's own kernel, which keeps each row on chip.

``x / ||x||`` over rows too wide for one program's registers (embeddings normalised for a cosine
similarity, the suite's row-L2 over 65535 columns) is written by Inductor as a looped reduction that
reads each row twice: its sum of squares, then the division. ``torch.ops.kernelopt.row_l2_normalize``
(:mod:`kernelopt.capture.rewrites.row_softmax_op`, the row softmax's kernel built for a norm) reads it once, the
row split across the thread blocks of a Hopper cluster that exchange their sums of squares. This
post-grad rewrite, run where the compile options hold ``kernelopt.cluster_norm`` (a graph variant of the
graph stage, a knob, an export verified under it; ``kernelopt.cluster_norm_bulk`` for the op's
shared-memory form), replaces each of these over the last dimension of a CUDA tensor on an sm_90 GPU whose
rows are 4096 to 131072 wide (the shared-memory form: 229344 float32, 458688 16-bit) with one call of the op:

- ``x / sqrt(sum(x * x))`` as ``torch.norm(x, 2, -1, keepdim=True)`` and ``torch.linalg.vector_norm``
  decompose (``pow(x, 2)``, ``pow(s, 0.5)``), or with ``sqrt``;
- ``F.normalize(x, dim=-1)``: the norm clamped to at least ``eps`` and expanded, taken in as the op's
  ``eps``;
- ``x * rsqrt(sum(x * x))``, computed as the division (within a rounding of it);
- in bfloat16 or float16, as Inductor's decompositions write ``torch.norm`` and ``F.normalize``: the
  squares summed from ``x`` cast to float32, the root cast back to ``x``'s dtype, the division in it. The
  op computes the norm and the division in float32 and rounds once, where torch rounds the norm first:
  its rows are as close to the exact ones or closer. Squares summed in 16 bits (``(x * x).sum()`` of a
  16-bit ``x``) are left alone: their sum rounds, and in float16 overflows, where the op's would not.

A norm whose sum or square anything else in the graph reads is left as it is, as is every other graph.
On a machine that cannot build the op (no nvcc and no build of it in place) a graph the rewrite would
change fails to compile, in one line naming what to do. Whether it pays is the graph stage's to judge,
end to end. The kernel's rows and the 16-bit rewrite are GPU-tested (``tests/test_gpu_cluster_softmax.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from kernelopt.capture.rewrites import row_softmax_op
from kernelopt.capture.rewrites.cluster_softmax import (
    LOW_PRECISION,
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
_cast = torch.ops.prims.convert_element_type.default


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
    base: Any = square.args[0] if squared and isinstance(square.args[0], torch.fx.Node) else None
    if is_call(base, _cast) and base.args[1] == torch.float32 and only_users(base, square):
        return _low_precision(base.args[0])  # a 16-bit x's squares, summed in float32
    # squares summed in 16 bits round (and overflow: float16 past 65504) where the op's do not
    return base if getattr(node_value(base), "dtype", None) == torch.float32 else None


def _low_precision(node: Any) -> Any:
    """``node`` where it is a bfloat16 or float16 tensor, else None."""
    value = node_value(node)
    return node if value is not None and value.dtype in LOW_PRECISION else None


def _cast_back(node: Any, reader: Any) -> Any:
    """``r`` where ``node`` is ``r`` (a float32 root) cast to a 16-bit dtype and read by ``reader`` alone; else
    ``node``: the downcast of a 16-bit norm, which the op's one rounding replaces."""
    if is_call(node, _cast) and node.args[1] in LOW_PRECISION and only_users(node, reader):
        return node.args[0]
    return node


def _root(node: Any) -> Any:
    """``s`` where ``node`` is ``sqrt(s)`` or ``pow(s, 0.5)``; else None."""
    if is_call(node, _aten.sqrt.default) or (is_call(node, _aten.pow.Tensor_Scalar) and node.args[1] == 0.5):
        return node.args[0]
    return None


def _norm_parts(out: torch.fx.Node) -> _Norm | None:
    """The parts of a row normalisation whose output is ``out``: ``div(x, [expand](clamp_min(sqrt(s),
    eps) | sqrt(s)))`` or ``mul(x, rsqrt(s))``, ``s`` the sum of ``x``'s squares over its last dimension,
    each step read by the next alone; for a 16-bit ``x``, the root cast back to its dtype and ``s`` summed
    from it cast to float32. Else None."""
    x: Any
    denominator: Any
    reader: Any = out  # the one node that may read the step being looked at
    eps = 0.0
    cast_to = None  # the dtype the root was cast to, which must be x's own
    if is_call(out, _aten.div.Tensor) and len(out.args) == 2:
        x, denominator = out.args
        if is_call(denominator, _aten.expand.default) and only_users(denominator, reader):
            reader, denominator = denominator, denominator.args[0]
        if is_call(denominator, _aten.clamp_min.default) and only_users(denominator, reader):
            bound = denominator.args[1]
            if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound >= 0:
                return None
            reader, denominator, eps = denominator, denominator.args[0], float(bound)
    elif is_call(out, _aten.mul.Tensor) and len(out.args) == 2:
        x, denominator = out.args if _is_rsqrt(out.args[1], out) else reversed(out.args)
    else:
        return None
    root = _cast_back(denominator, reader)
    if root is not denominator:
        reader, denominator, cast_to = denominator, root, denominator.args[1]
    if out.target is _aten.mul.Tensor:
        total = denominator.args[0] if is_call(denominator, _aten.rsqrt.default) else None
    else:
        total = _root(denominator)
    if total is None or not only_users(denominator, reader) or not only_users(total, denominator):
        return None
    own = node_value(x).dtype if _low_precision(x) is not None else None  # the dtype a 16-bit x's root is cast to
    if cast_to != own:
        return None  # a 16-bit x's norm not rounded to its dtype, or a float32 one's rounded: not the op's
    return _Norm(x, eps) if _squares_summed(total) is x else None


def _is_rsqrt(node: Any, reader: Any) -> bool:
    """Whether ``node`` is ``rsqrt(s)``, or it cast to a 16-bit dtype for ``reader`` alone."""
    return is_call(_cast_back(node, reader), _aten.rsqrt.default)


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
        widest = row_softmax_op.max_columns(bulk, value.dtype.itemsize) if value is not None else 0
        if not takes_rows(value, row_softmax_op.DTYPES, widest):
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
