"""Inputs a forward must read twice whatever fuses it: a statistic over more than the chip holds.

The traffic floor (:func:`~kernelopt.evaluate.analysis.graph_floor_bytes`) reads every input once. A
graph whose output needs an input's values *and* a statistic of more of that input than the chip can hold
(one Hopper cluster, :mod:`kernelopt.capture.rewrites.row_softmax_op`) must read the input again once the
statistic is known: a Frobenius normalisation (the sum over the whole tensor), a centring by a column mean
followed by a row's scale, a group norm's groups of 8 x 256 x 256 (:func:`held_on_chip`). No
fusion removes that read, so a floor without it calls such a graph "far above its floor" and sends it to the graph stage
for nothing (251 s on the Frobenius norm on the H200, 2026-12-04).

How: the model is traced to core ATen (``torch.export``, fake tensors: nothing runs), and for every
tensor input each node carries, per dimension, the range of the input's flat index that dimension walks
(an interval ``[lo, hi)`` of strides: a reshape splits or merges them, a permute reorders them) and the
*span* its elements depend on (reduced dimensions' intervals, merged). An output that reads an input
elementwise and depends on more than :func:`held_on_chip` elements of it reads that input twice. An op this
does not know passes its inputs' spans on and forgets their dimensions: it can miss a reread (the floor
stays where it was), never invent one.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites import group_norm_op
from kernelopt.capture.rewrites.row_softmax_op import MAX_COLUMNS, max_columns

ON_CHIP = MAX_COLUMNS
"""Elements of one statistic a kernel can hold on chip while it waits for the statistic, whatever their
dtype: the widest row kernelopt's own cluster softmax keeps in registers across a cluster of eight blocks
(131072). In shared memory it holds wider rows of narrower dtypes (:func:`held_on_chip`)."""


def held_on_chip(itemsize: int) -> int:
    """Elements of one statistic over an input of ``itemsize`` bytes an element that a kernel can hold on
    chip and still win: the widest of the row op's two forms (float32 229344, a 16-bit dtype 458688) and
    of the group-norm op's groups (float32 266176, 16-bit 532352: its 16 blocks' parts of 65 KB; its reread
    form's 4 MB groups, float32 1048576, read a second time from L2, not memory: level1/16's 2 MB). Not the
    row split's registers (:mod:`kernelopt.capture.row_split`): 64 programs of 8192 elements do hold a
    group norm's group of 8 x 256 x 256, but its two grid barriers a group cost more than the second read
    (0.907x of the stock two kernels on the H100, benchmarks/h100-2026-12-06-gpu-tests-26), and its wins
    were rows of 131072 at most."""
    grouped = (  # the dtypes it is built for
        max(group_norm_op.max_columns(itemsize), group_norm_op.reread_columns(itemsize)) if itemsize in (2, 4) else 0
    )
    return max(ON_CHIP, max_columns(True, itemsize), grouped)


Interval = tuple[int, int]  # [lo, hi) in an input's flat index, as strides: a dimension of size hi / lo


@dataclass(frozen=True)
class Reach:
    """What one node's elements hold of one input: each dimension's interval (None: a broadcast or
    unknown dimension), the merged intervals every element depends on through statistics, and whether
    the node carries the input's values elementwise."""

    dims: tuple[Interval | None, ...]
    span: tuple[Interval, ...] = ()
    direct: bool = True

    def span_elements(self) -> int:
        return math.prod(hi // lo for lo, hi in self.span)


@dataclass(frozen=True)
class Reread:
    """One input the forward reads a second time, and why."""

    name: str
    bytes: int
    statistic_elements: int
    held: int  # what the chip holds of a statistic over this input (on_chip)


@dataclass(frozen=True)
class ForcedRereads:
    """A model's forced second reads: their bytes, and one line each (or one line saying why none could
    be counted: a model ``torch.export`` cannot trace keeps the once-read floor, and says so)."""

    bytes: int
    lines: list[str]


def merged(intervals: Sequence[Interval]) -> tuple[Interval, ...]:
    """The union of intervals of one mixed-radix index as disjoint intervals (``[1, 8)`` and ``[8, 64)``
    make ``[1, 64)``: columns and then rows)."""
    out: list[list[int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def placeholder_reach(value: torch.Tensor) -> Reach:
    """An input's own dimensions: its strides and sizes."""
    return Reach(
        tuple((s, s * n) if n > 1 and s > 0 else None for n, s in zip(value.shape, value.stride(), strict=True))
    )  # a stride of 0 (an expanded input) walks nothing of the input's memory


def reshaped(
    dims: Sequence[Interval | None], old: Sequence[int], new: Sequence[int]
) -> tuple[Interval | None, ...] | None:
    """Each dimension's interval after a reshape from ``old`` to ``new``, or None where a new dimension
    would walk two pieces of the input that are not next to each other (a reshape after a permute)."""
    pieces = [d for n, d in zip(old, dims, strict=True) if n > 1]
    if any(d is None for d in pieces):
        return None
    runs: list[list[int]] = []  # outermost first; adjacent dims whose intervals touch merge into one run
    for lo, hi in pieces:  # type: ignore[misc]
        if runs and runs[-1][0] == hi:
            runs[-1][0] = lo
        else:
            runs.append([lo, hi])
    out: list[Interval | None] = []
    for size in reversed(new):  # innermost first: each takes its size off the innermost run left
        if size == 1:
            out.append(None)
            continue
        if not runs:
            return None
        lo, hi = runs[-1]
        if hi // lo < size or (hi // lo) % size:
            return None
        out.append((lo, lo * size))
        if lo * size == hi:
            runs.pop()
        else:
            runs[-1][0] = lo * size
    return tuple(reversed(out)) if not runs else None


def _shape(node: Any) -> tuple[int, ...] | None:
    value = node.meta.get("val") if hasattr(node, "meta") else None
    return tuple(int(n) for n in value.shape) if isinstance(value, torch.Tensor) else None


def _dims_arg(dims: Any, rank: int) -> list[int]:
    """The dimensions a reduction reduces: all of them where it names none."""
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims)


REDUCTIONS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "prod",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "argmax",
    "argmin",
    "max",
    "min",
    "any",
    "all",
    "logsumexp",
    "linalg_vector_norm",
}
VIEWS = {
    "view",
    "_unsafe_view",
    "reshape",
    "alias",
    "clone",
    "contiguous",
    "_to_copy",
    "to",
    "detach",
    "lift_fresh_copy",
}


BATCH_NORMS = {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional"}


def _argument(node: Any, name: str) -> Any:
    """An argument of ``node`` by its name in the op's schema (positional or keyword), else None."""
    for i, argument in enumerate(compat.op_argument_names(node.target)):
        if argument == name:
            return node.args[i] if i < len(node.args) else node.kwargs.get(name)
    return None


def _reduced(reach: Reach, shape: tuple[int, ...], dims: list[int], keepdim: bool) -> Reach:
    gained = [reach.dims[d] for d in dims if reach.dims[d] is not None]
    kept = tuple(None if d in dims else reach.dims[d] for d in range(len(shape)) if keepdim or d not in dims)
    return Reach(kept, merged([*reach.span, *gained]), direct=False)  # type: ignore[list-item]


def _normalised(reach: Reach, dims: list[int]) -> Reach:
    """A softmax's or norm's output: the input elementwise, with the statistic over ``dims``."""
    gained = [reach.dims[d] for d in dims if reach.dims[d] is not None]
    return Reach(reach.dims, merged([*reach.span, *gained]), direct=reach.direct)  # type: ignore[list-item]


def _broadcast(reaches: list[tuple[Reach, tuple[int, ...]]], shape: tuple[int, ...]) -> Reach:
    dims: list[Interval | None] = [None] * len(shape)
    for reach, own in reaches:
        offset = len(shape) - len(own)
        for i, d in enumerate(reach.dims):
            if d is not None and dims[offset + i] is None:
                dims[offset + i] = d
    span = merged([s for reach, _ in reaches for s in reach.span])
    return Reach(tuple(dims), span, direct=any(r.direct for r, _ in reaches))


def _forgotten(reaches: list[Reach], rank: int) -> Reach:
    return Reach((None,) * rank, merged([s for r in reaches for s in r.span]), direct=any(r.direct for r in reaches))


def node_reach(node: Any, reach_of: dict[Any, Any]) -> Reach | tuple[Reach, ...] | None:
    """What ``node`` holds of one input, from its arguments' (``reach_of``: only nodes that hold any;
    an op of several outputs holds a tuple, one per output)."""
    tensor_args = [a for a in node.args if isinstance(a, torch.fx.Node) and a in reach_of]
    if not tensor_args:
        return None
    if node.target is operator.getitem:
        held = reach_of[node.args[0]]
        return held[node.args[1]] if isinstance(held, tuple) else held
    if any(isinstance(reach_of[a], tuple) for a in tensor_args):
        return None  # a multi-output op used whole: nothing here reads one
    value = node.meta.get("val")
    first = node.args[0]
    source, first_shape = reach_of.get(first), _shape(first)
    if source is not None and first_shape is not None:
        known = _known(compat.aten_op_name(node.target) or "", node, source, first_shape, value, reach_of)
        if known is not None:
            return known
    spans = [reach_of[a] for a in tensor_args]
    if isinstance(value, (tuple, list)):
        return tuple(_forgotten(spans, t.dim() if isinstance(t, torch.Tensor) else 0) for t in value)
    return _forgotten(spans, value.dim()) if isinstance(value, torch.Tensor) else None


def _known(
    op: str, node: Any, source: Reach, first: tuple[int, ...], value: Any, reach_of: dict[Any, Any]
) -> Reach | tuple[Reach, ...] | None:
    """The ops whose effect on a reach is known; None for the rest."""
    op = op.rstrip("_")
    dims = _argument(node, "dim")
    reduces = isinstance(value, (tuple, list)) or (isinstance(value, torch.Tensor) and value.numel() < math.prod(first))
    if op in REDUCTIONS and reduces and not isinstance(dims, torch.fx.Node):  # by the schema: a norm's ord first
        out = _reduced(source, first, _dims_arg(dims, len(first)), bool(_argument(node, "keepdim")))
        return tuple(out for _ in value) if isinstance(value, (tuple, list)) else out
    if op in ("_softmax", "_log_softmax"):
        return _normalised(source, [node.args[1] % len(first)])
    if op == "native_layer_norm":
        out = _normalised(source, list(range(len(first) - len(node.args[1]), len(first))))
        stats = Reach((None,) * len(first), out.span, direct=False)
        return (out, stats, stats)
    if op == "native_group_norm":  # x, weight, bias, N, C, HxW, groups: a group is C/G channels x HxW
        batch, groups = first[0], int(node.args[6])
        grouped = reshaped(source.dims, first, (batch, groups, math.prod(first) // (batch * groups)))
        if grouped is None:
            return None
        out = _normalised(Reach(grouped, source.span, source.direct), [2])
        stats = Reach((grouped[0], grouped[1]), out.span, direct=False)
        return (Reach(source.dims, out.span, source.direct), stats, stats)
    if op in BATCH_NORMS and _argument(node, "training") and isinstance(value, (tuple, list)):
        out = _normalised(source, [d for d in range(len(first)) if d != 1])  # per channel, over the rest
        stats = Reach((None,) * 1, out.span, direct=False)
        return (out, *(stats for _ in value[1:]))
    if not isinstance(value, torch.Tensor):
        return None
    shape = tuple(int(n) for n in value.shape)
    if op in VIEWS:
        dims = source.dims if shape == first else reshaped(source.dims, first, shape)
        return Reach(dims, source.span, source.direct) if dims is not None else None
    if op in ("permute", "transpose", "t", "unsqueeze", "squeeze", "expand"):
        return _rearranged(op, node, source, first, shape)
    args = [a for a in node.args if isinstance(a, torch.fx.Node) and a in reach_of]
    shapes = [_shape(a) for a in args]
    try:
        broadcast = tuple(torch.broadcast_shapes(*[s for s in shapes if s is not None]))
    except RuntimeError:  # not elementwise (a matmul, a concatenation)
        return None
    if None in shapes or shape != broadcast:
        return None
    return _broadcast([(reach_of[a], s) for a, s in zip(args, shapes, strict=True)], shape)  # type: ignore[misc]


def _rearranged(op: str, node: Any, source: Reach, old: tuple[int, ...], new: tuple[int, ...]) -> Reach:
    dims: list[Interval | None] = list(source.dims)
    if op == "permute":
        dims = [dims[d % len(old)] for d in node.args[1]]
    elif op in ("transpose", "t"):
        a, b = (node.args[1], node.args[2]) if op == "transpose" else (0, 1)
        if len(dims) > 1:
            a, b = a % len(dims), b % len(dims)
            dims[a], dims[b] = dims[b], dims[a]
    elif op == "unsqueeze":
        dims.insert(node.args[1] % (len(old) + 1), None)
    elif op == "squeeze":
        dims = [d for d, n in zip(dims, old, strict=True) if n > 1] if len(new) < len(old) else dims
        dims = dims if len(dims) == len(new) else [None] * len(new)
    elif op == "expand":
        padding: list[Interval | None] = [None] * (len(new) - len(old))
        dims = padding + [d if n > 1 else None for d, n in zip(dims, old, strict=True)]
    return Reach(tuple(dims), source.span, source.direct)


def forced_rereads(graph: torch.fx.Graph, inputs: dict[str, torch.Tensor], on_chip: int | None = None) -> list[Reread]:
    """The inputs (placeholder name -> its value, fake or real) an output of ``graph`` reads elementwise
    while depending on a statistic of more than ``on_chip`` of their elements (None: what the chip holds of
    each input's dtype, :func:`held_on_chip`): each read once more."""
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    output = next(n for n in graph.nodes if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    rereads = []
    for name, value in inputs.items():
        node = placeholders.get(name)
        if node is None or not isinstance(value, torch.Tensor) or value.numel() == 0:
            continue
        reach_of: dict[Any, Any] = {node: placeholder_reach(value)}
        for n in graph.nodes:
            if n.op == "call_function":
                held = node_reach(n, reach_of)
                if held is not None:
                    reach_of[n] = held
        widest = 0
        for result in results:
            held = reach_of.get(result)
            if isinstance(held, Reach) and held.direct:
                widest = max(widest, held.span_elements())
        limit = held_on_chip(value.element_size()) if on_chip is None else on_chip
        if widest > limit:
            rereads.append(Reread(name, value.numel() * value.element_size(), widest, limit))
    return rereads


def traced_rereads(model: torch.nn.Module, inputs: Sequence[Any], on_chip: int | None = None) -> ForcedRereads:
    """The forced second reads of ``model`` on ``inputs``, traced to core ATen with ``torch.export``
    (non-strict, on fake copies of the inputs: nothing runs on the device). Parameters and buffers are
    inputs too (a weight normalised by its own global statistic)."""
    try:
        exported = torch.export.export(model, tuple(inputs), strict=False).run_decompositions()
    except Exception as exc:  # a model export cannot trace: the floor reads every input once, and says so
        return ForcedRereads(
            0, [f"second reads not counted: torch.export could not trace the model ({_one_line(exc)})"]
        )
    values = {n.name: n.meta.get("val") for n in exported.graph.nodes if n.op == "placeholder"}
    tensors = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    try:
        found = forced_rereads(exported.graph, tensors, on_chip)
    except Exception as exc:  # an op of a shape this reading did not foresee: said, not fatal to the analysis
        return ForcedRereads(0, [f"second reads not counted: the traced graph could not be read ({_one_line(exc)})"])
    names = {
        spec.arg.name: spec.target or spec.arg.name
        for spec in exported.graph_signature.input_specs
        if hasattr(spec.arg, "name")
    }
    lines = [
        f"{names.get(r.name, r.name)} read twice ({r.bytes / 1e6:.3g} MB more): its output needs a statistic over "
        f"{r.statistic_elements:,} of its elements, more than a chip holds ({r.held:,})"
        for r in found
    ]
    return ForcedRereads(sum(r.bytes for r in found), lines)


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
