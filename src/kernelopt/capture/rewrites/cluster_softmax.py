"""A wide softmax or log-softmax handed to kernelopt's own kernel, which keeps each row on chip.

Inductor writes a softmax over rows too wide for one program's registers as a looped reduction that
reads each row twice (its online max and sum, then the output): log-softmax over a 50257-wide
vocabulary, a 16384-wide softmax. ``torch.ops.kernelopt.row_softmax``
(:mod:`kernelopt.capture.rewrites.row_softmax_op`) reads it once, the row split across the thread blocks of a
Hopper cluster. This post-grad rewrite, run where the compile options hold ``kernelopt.cluster_softmax``
(a graph variant of the graph stage, a knob, an export verified under it), replaces each softmax,
log-softmax and ``y - logsumexp(y)`` (token log-probabilities; torch's logsumexp as the online-softmax
rewrite writes it) over the last dimension of a CUDA tensor on an sm_90 GPU whose rows are 4096 to
131072 wide (the shared-memory form: as wide as a cluster's parts hold the row as stored, 229344 float32,
458688 16-bit, ``row_softmax_op.max_columns``) with one call of that op, taking in with it:

- a positive number the row is scaled by first (``x / T``, ``x * c``; the joint-graph form of a scaled
  softmax is first written back by :func:`~kernelopt.capture.rewrites.online_softmax.rewrite_for_online_softmax`);
- a bfloat16 or float16 input's cast to float32, and the output's cast back, so the op reads the
  16-bit row and computes in float32 as the graph did.

``kernelopt.cluster_softmax_bulk`` makes the same rewrite with the op's shared-memory form (each block's
part of the row copied into shared memory by one bulk copy), a graph variant and a knob of its own, so
the graph stage judges both forms end to end.

A softmax whose max, sum or exponentials anything else in the graph also reads (a training graph that
saves them for the backward) is left as it is, as is every other graph. On a machine that cannot build
the op's CUDA source (no nvcc: :mod:`~kernelopt.capture.cuda_toolchain`, and no build of it in place from
``kernelopt build-op``) a graph the rewrite would change fails to compile, in one line naming what to do. Whether it pays is the
graph stage's to judge, end to end: on the H200 the kernel ran 1.2-1.3x faster than
max-autotune-no-cudagraphs for rows of 16384 to 50257, slower at 65536 (``scripts/device/row_softmax_probe.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.rewrites import row_softmax_kernel, row_softmax_op
from kernelopt.capture.rewrites.online_softmax import erase_orphans, is_call, is_inf_test, rewrite_for_online_softmax
from kernelopt.errors import UnsupportedEnvironment

CLUSTER_SOFTMAX_OPTION = "kernelopt.cluster_softmax"  # a compile option of kernelopt's own: True
# the same rewrite with the op's shared-memory form (each block's part copied in by one bulk copy)
CLUSTER_SOFTMAX_BULK_OPTION = "kernelopt.cluster_softmax_bulk"

_aten = torch.ops.aten
_cast = torch.ops.prims.convert_element_type.default
LOW_PRECISION = (torch.bfloat16, torch.float16)


def node_value(node: Any) -> Any:
    """A node's fake tensor (``meta['val']``), None for anything else."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def on_cluster_gpu(value: Any) -> bool:
    """Whether ``value`` (a node's fake tensor) lives on a GPU with thread-block clusters (sm_90+)."""
    device = getattr(value, "device", None)
    if device is None or device.type != "cuda" or not torch.cuda.is_available():
        return False
    return row_softmax_op.has_clusters(device.index)  # the op's own rule, its capability asked once


def takes_rows(
    value: Any, dtypes: tuple[torch.dtype, ...] = (torch.float32,), widest: int = row_softmax_op.MAX_COLUMNS
) -> bool:
    """Whether the op's kernel takes rows of ``value`` (a node's fake tensor) as the rewrites hand them to it:
    of ``dtypes`` (float32: the softmax's casts are taken in apart), a static shape, 4096 to ``widest``
    wide (:func:`~kernelopt.capture.rewrites.row_softmax_op.max_columns`), on a GPU with clusters."""
    if value is None or value.dtype not in dtypes or not all(isinstance(s, int) for s in value.shape):
        return False
    columns = value.shape[-1] if value.dim() else 0
    return row_softmax_op.MIN_COLUMNS <= columns <= widest and on_cluster_gpu(value)


def replace_with_call(graph: torch.fx.Graph, out: torch.fx.Node, op: Any, arguments: tuple[Any, ...]) -> torch.fx.Node:
    """``out`` replaced by a call of ``op`` on ``arguments`` (its metadata kept for Inductor and the
    stack traces), and what only ``out`` read erased; the call."""
    with graph.inserting_before(out):
        call = graph.call_function(op, arguments)
    call.meta.update({k: v for k, v in out.meta.items() if k in ("stack_trace", "nn_module_stack", "val")})
    out.replace_all_uses_with(call)
    erase_orphans(graph, out)
    return call


def last_dim(dims: Any, ndim: int) -> bool:
    """Whether a reduction's ``dims`` are the last dimension alone."""
    return isinstance(dims, (list, tuple)) and len(dims) == 1 and dims[0] in (-1, ndim - 1)


def only_users(node: torch.fx.Node, *users: Any) -> bool:
    """Whether nothing but ``users`` reads ``node``."""
    return set(node.users) <= set(users)


class _Parts(NamedTuple):
    """A softmax the op computes: its input ``y``, its form, and the nodes from the max to the output."""

    y: torch.fx.Node
    log: bool
    lse: bool  # y - logsumexp(y), as the online-softmax rewrite writes torch's logsumexp
    inner: list[torch.fx.Node]  # the output last
    readers: set[torch.fx.Node]  # the nodes among them that read y


def _softmax_parts(exp: torch.fx.Node) -> _Parts | None:
    """The parts of the softmax whose ``exp`` is ``exp(y - m)``, ``m = amax(y, [-1], True)``: a softmax
    (``exp / sum(exp)``), a log-softmax (``(y - m) - log(sum(exp))``) or logits less their logsumexp
    (``y - where(|m| == inf, m, log(sum(exp)) + m)``) over the last dimension, with nothing else reading
    its max, exponentials or sum. Else None."""
    sub: Any = exp.args[0]
    if not is_call(sub, _aten.sub.Tensor) or len(sub.args) != 2 or sub.kwargs.get("alpha", 1) != 1:
        return None
    y, amax = sub.args
    value = node_value(y)
    if not is_call(amax, _aten.amax.default) or amax.args[0] is not y or value is None:
        return None
    dims = amax.args[1] if len(amax.args) > 1 else amax.kwargs.get("dim")
    keepdim = amax.args[2] if len(amax.args) > 2 else amax.kwargs.get("keepdim", False)
    if not keepdim or not last_dim(dims, value.dim()):
        return None
    sums = [u for u in exp.users if is_call(u, _aten.sum.dim_IntList)]
    if len(sums) != 1:
        return None
    total: Any = sums[0]
    total_dims = total.args[1] if len(total.args) > 1 else None
    total_keep = total.args[2] if len(total.args) > 2 else total.kwargs.get("keepdim", False)
    if total.args[0] is not exp or not last_dim(total_dims, value.dim()) or not total_keep:
        return None
    if total.kwargs.get("dtype") is not None:
        return None
    user: Any = next(iter(total.users)) if len(total.users) == 1 else None
    if is_call(user, _aten.div.Tensor) and user.args == (exp, total) and only_users(exp, total, user):
        if only_users(amax, sub) and only_users(sub, exp):
            return _Parts(y, False, False, [amax, sub, exp, total, user], {amax, sub})
        return None
    if not is_call(user, _aten.log.default) or len(user.users) != 1 or not only_users(exp, total):
        return None
    out: Any = next(iter(user.users))
    if is_call(out, _aten.sub.Tensor) and out.args == (sub, user) and out.kwargs.get("alpha", 1) == 1:
        if only_users(amax, sub) and only_users(sub, exp, out):
            return _Parts(y, True, False, [amax, sub, exp, total, user, out], {amax, sub})
        return None
    return _lse_parts(y, amax, sub, exp, total, user)


def _lse_parts(y: Any, amax: Any, sub: Any, exp: Any, total: Any, log: Any) -> _Parts | None:
    """The parts of ``y - where(|m| == inf, m, log(s) + m)`` past ``log = log(s)``, else None."""
    add: Any = next(iter(log.users))
    if not is_call(add, _aten.add.Tensor) or add.kwargs.get("alpha", 1) != 1 or set(add.args) != {log, amax}:
        return None
    where: Any = next(iter(add.users)) if len(add.users) == 1 else None
    if not is_call(where, _aten.where.self) or len(where.args) != 3 or where.args[1:] != (amax, add):
        return None
    test: Any = where.args[0]
    if not is_inf_test(test, amax) or not only_users(test, where) or not only_users(test.args[0], test):
        return None
    out: Any = next(iter(where.users)) if len(where.users) == 1 else None
    if not is_call(out, _aten.sub.Tensor) or out.args != (y, where) or out.kwargs.get("alpha", 1) != 1:
        return None
    if not only_users(amax, sub, test.args[0], add, where) or not only_users(sub, exp):
        return None
    inner = [amax, test.args[0], test, sub, exp, total, log, add, where, out]
    return _Parts(y, True, True, inner, {amax, sub, out})


def _scaled(y: Any, readers: set[torch.fx.Node]) -> tuple[Any, float, set[torch.fx.Node]]:
    """``(x, c, readers of x)`` where ``y`` is ``x`` multiplied or divided by positive numbers (``x / T``,
    and the ``x * 1`` the joint-graph pass writes in front of a scaled softmax's max), each step read by
    nothing but the next (``readers`` for ``y``): the op takes the scale in, so no kernel writes
    ``x * c`` out."""
    x, scale = y, 1.0
    while is_call(x, _aten.mul.Tensor, _aten.div.Tensor) and len(x.args) == 2 and only_users(x, *readers):
        base, c = x.args
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 or not isinstance(base, torch.fx.Node):
            break
        scale = scale * float(c) if x.target is _aten.mul.Tensor else scale / float(c)
        readers, x = {x}, base
    return x, scale, readers


def rewrite_for_cluster_softmax_bulk(graph: torch.fx.Graph) -> int:
    """:func:`rewrite_for_cluster_softmax` calling the op's shared-memory form."""
    return rewrite_for_cluster_softmax(graph, bulk=True)


def check_buildable(in_dtype: torch.dtype, out_dtype: torch.dtype, device: torch.device, option: str) -> None:
    """The op builds its kernel at its first call, with nvcc: where this machine has none and no build
    of that dtype pair for this GPU is in place (``kernelopt build-op``), the rewrite of ``option`` is
    refused here, at the compile, in one line, rather than a call failing later."""
    unable = cuda_toolchain.nvcc_missing()
    if unable is None or row_softmax_kernel.prebuilt(in_dtype, out_dtype, row_softmax_op.capability(device.index)):
        return
    raise UnsupportedEnvironment(
        f"{option}: kernelopt's row softmax is built with nvcc at its first call, and {unable}; or build it "
        "where nvcc is (kernelopt build-op) into this machine's KERNELOPT_CUDA_BUILD_DIR; or leave the option out"
    )


def rewrite_for_cluster_softmax(graph: torch.fx.Graph, bulk: bool = False) -> int:
    """Replace every softmax and log-softmax of ``graph`` (a post-grad ATen graph) that
    ``torch.ops.kernelopt.row_softmax`` computes with a call of it (``bulk``: its shared-memory form);
    how many were replaced."""
    rewrite_for_online_softmax(graph)  # a joint-graph scaled softmax, written back as y - max(y)
    count = 0
    for exp in list(graph.nodes):
        if not is_call(exp, _aten.exp.default) or not exp.users:
            continue
        parts = _softmax_parts(exp)
        if parts is None:
            continue
        y, log, lse, inner = parts.y, parts.log, parts.lse, parts.inner
        value = node_value(y)
        # the shared-memory form holds a row as it is stored: a 16-bit one twice as wide (checked again below)
        if not takes_rows(value, widest=row_softmax_op.max_columns(bulk, 2)):
            continue
        x, scale, readers = _scaled(y, parts.readers)
        out: Any = inner[-1]
        source, out_float = x, False
        if is_call(x, _cast) and only_users(x, *readers) and node_value(x.args[0]) is not None:
            low = node_value(x.args[0]).dtype
            if low in LOW_PRECISION:
                source, out_float = x.args[0], True
                back: Any = next(iter(out.users)) if len(out.users) == 1 else None
                if is_call(back, _cast) and back.args[1] == low:
                    out, out_float = back, False
        elif node_value(x) is None or node_value(x).dtype != torch.float32:
            continue
        in_dtype = node_value(source).dtype
        if value.shape[-1] > row_softmax_op.max_columns(bulk, in_dtype.itemsize):
            continue
        option = CLUSTER_SOFTMAX_BULK_OPTION if bulk else CLUSTER_SOFTMAX_OPTION
        check_buildable(in_dtype, torch.float32 if out_float else in_dtype, value.device, option)
        arguments: tuple[Any, ...] = (source, scale, log, out_float)
        if lse or bulk:
            arguments += (lse,) + ((True,) if bulk else ())
        replace_with_call(graph, out, torch.ops.kernelopt.row_softmax.default, arguments)
        count += 1
    if count:
        graph.lint()
    return count
