"""A wide group norm handed to kernelopt's own kernel, which reads each group once.

On a GPU, torch decomposes ``nn.GroupNorm`` (``torch._refs.native_group_norm``) into the input (cast to
float32 where it is 16-bit) viewed as its groups ``N, G, C/G, H*W``, their ``var_mean``, the normalisation
``(x - mean) * rsqrt(var + eps)`` in that shape, a view back to ``N, C, ...``, the weight and the bias by
channel, and a cast back to the input's dtype. Inductor writes that as two kernels, statistics and output,
so each group is read twice. This post-grad rewrite, run where the compile options hold
``kernelopt.cluster_group_norm`` (a graph variant of the graph stage, a knob, an export verified under
it), replaces each such group norm of a contiguous (or channels-last) CUDA input on an sm_90 GPU whose groups are
:data:`~kernelopt.capture.rewrites.group_norm_op.MIN_GROUP` elements wide or wider and fit a cluster
(:func:`~kernelopt.capture.rewrites.group_norm_op.cluster_blocks`) with one call of
``torch.ops.kernelopt.group_norm`` (:mod:`~kernelopt.capture.rewrites.group_norm_op`).

A convolution's bias before the group norm is the op's too where the op alone reads the convolution
(Inductor would add it in a kernel of its own before the op). What follows the group norm is the op's
too where the op computes it: a scale by sample and channel
(``* (1 + scale)``: a number added to the scale is the op's ``scale_offset``), then a shift by sample and
channel, then a SiLU (``h * sigmoid(h)``, or ``F.silu`` as Inductor decomposes it), each step optional,
in that order, each read by the next alone and in the input's dtype. Left to Inductor, such an epilogue
became a kernel of its own, a read and a write that Inductor's output kernel had fused, which in level2/13
cost more than the read the op saves (0.74x at gate 4 on the H100, benchmarks/h100-2026-12-06-group-norm-op).

A group norm whose statistics, normalised groups or any step between is read by anything else (a
training graph's saved mean and rstd) is left as it is, as is a 16-bit group norm not cast back to its
input's dtype. On a machine that cannot build the op (no nvcc and no build of it in place) a graph the
rewrite would change fails to compile, in one line naming what to do. Whether it pays is the graph stage's
to judge, end to end.
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import torch

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.rewrites import cluster_softmax, group_norm_kernel, group_norm_op, row_softmax_op
from kernelopt.capture.rewrites.cluster_softmax import node_value, only_users, replace_with_call
from kernelopt.capture.rewrites.online_softmax import is_call
from kernelopt.errors import UnsupportedEnvironment

CLUSTER_GROUP_NORM_OPTION = "kernelopt.cluster_group_norm"  # a compile option of kernelopt's own: True

_aten = torch.ops.aten
_cast = torch.ops.prims.convert_element_type.default
_VIEWS = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default)


class _GroupNorm(NamedTuple):
    """A group norm the op computes: its input, weight, bias (nodes as the graph broadcasts them, or None),
    groups and eps, its epilogue, and the node whose value is its output (the epilogue's last)."""

    x: torch.fx.Node
    weight: torch.fx.Node | None
    bias: torch.fx.Node | None
    groups: int
    eps: float
    out: torch.fx.Node
    epilogue: _Epilogue


class _Epilogue(NamedTuple):
    """What follows a group norm that the op computes: ``* (scale + scale_offset) + shift``, then a SiLU."""

    scale: torch.fx.Node | None = None
    shift: torch.fx.Node | None = None
    scale_offset: float = 0.0
    silu: bool = False


def _shape(node: Any) -> tuple[int, ...] | None:
    value = node_value(node)
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return tuple(int(s) for s in value.shape)


def _cast_to(node: Any) -> torch.dtype | None:
    """The dtype ``node`` casts its one input to (``convert_element_type``, or ``_to_copy`` of a dtype
    alone), else None."""
    if is_call(node, _cast):
        return node.args[1]
    if is_call(node, _aten._to_copy.default) and set(node.kwargs) == {"dtype"}:
        return node.kwargs["dtype"]
    return None


def _only_user(node: Any) -> Any:
    """The one node that reads ``node`` (a node), else None."""
    return next(iter(node.users)) if isinstance(node, torch.fx.Node) and len(node.users) == 1 else None


def _by_channel(node: Any, out: tuple[int, ...]) -> bool:
    """Whether ``node`` is a tensor of ``out``'s channels alone as broadcast against it (``1, C, 1, 1``,
    ``C, 1, 1``): a group norm's weight or bias."""
    shape = _shape(node)
    if shape is None or len(shape) > len(out) or len(shape) < len(out) - 1:
        return False
    aligned = (1,) * (len(out) - len(shape)) + shape
    return aligned[1] == out[1] and all(s == 1 for i, s in enumerate(aligned) if i != 1)


def _affine(
    node: Any, target: Any, out: tuple[int, ...], by: Any = _by_channel, dtype: torch.dtype | None = None
) -> tuple[Any, Any] | None:
    """``(next, t)`` where ``node``'s one reader is ``target(node, t)`` (either order) with ``by(t, out)``
    (by channel: a weight or bias; by sample and channel: the epilogue's scale or shift), its value of
    ``out``'s shape and, where ``dtype`` is given, in it; else None."""
    user: Any = _only_user(node)
    if not is_call(user, target) or len(user.args) != 2 or user.kwargs.get("alpha", 1) != 1:
        return None
    other = user.args[1] if user.args[0] is node else user.args[0]
    if other is node or not by(other, out) or _shape(user) != out:
        return None
    return (user, other) if dtype is None or node_value(user).dtype == dtype else None


def _group_norm(var_mean: torch.fx.Node) -> _GroupNorm | None:
    """The group norm whose statistics ``var_mean`` computes, as torch decomposes it for a CUDA input;
    else None."""
    grouped: Any = var_mean.args[0]
    dims = var_mean.args[1] if len(var_mean.args) > 1 else var_mean.kwargs.get("dim")
    shape = _shape(grouped)
    if (
        shape is None
        or len(shape) != 4
        or not isinstance(dims, (list, tuple))
        or sorted(d % 4 for d in dims) != [2, 3]
        or var_mean.kwargs.get("correction", 1) != 0
        or not var_mean.kwargs.get("keepdim", False)
        or not any(is_call(grouped, v) for v in _VIEWS)
    ):
        return None
    acc: Any = grouped.args[0]
    x = acc.args[0] if _cast_to(acc) == torch.float32 else acc
    x_shape, value = _shape(x), node_value(x)
    if x_shape is None or len(x_shape) < 3 or x_shape[0] != shape[0] or x_shape[1] != shape[1] * shape[2]:
        return None
    if math.prod(x_shape[2:]) != shape[3] or value.dtype not in group_norm_op.DTYPES:
        return None
    if (x is acc) != (value.dtype == torch.float32):
        return None  # a 16-bit x not computed in float32, or a float32 one cast: not torch's decomposition
    stats = {n.args[1]: n for n in var_mean.users if n.op == "call_function" and n.target is operator.getitem}
    if len(stats) != 2 or len(var_mean.users) != 2:
        return None
    var, mean = stats.get(0), stats.get(1)
    plus: Any = _only_user(var)
    root: Any = _only_user(plus) if is_call(plus, _aten.add.Tensor) else None
    eps = plus.args[1] if root is not None and len(plus.args) == 2 and plus.args[0] is var else None
    if not is_call(root, _aten.rsqrt.default) or isinstance(eps, bool) or not isinstance(eps, (int, float)):
        return None
    centred: Any = _only_user(mean)
    if not is_call(centred, _aten.sub.Tensor) or centred.args[:2] != (grouped, mean) or "alpha" in centred.kwargs:
        return None
    normalised: Any = _only_user(centred)
    if not is_call(normalised, _aten.mul.Tensor) or set(normalised.args) != {centred, root}:
        return None
    if not only_users(root, normalised) or not only_users(grouped, var_mean, centred):
        return None
    if x is not acc and not only_users(acc, grouped):
        return None
    back: Any = _only_user(normalised)
    if not any(is_call(back, v) for v in _VIEWS) or _shape(back) != x_shape:
        return None
    end, weight, bias = back, None, None
    step = _affine(end, _aten.mul.Tensor, x_shape)
    if step is not None:
        end, weight = step
    step = _affine(end, _aten.add.Tensor, x_shape)
    if step is not None:
        end, bias = step
    if value.dtype != torch.float32:
        cast: Any = _only_user(end)
        if _cast_to(cast) != value.dtype:
            return None  # the 16-bit group norm's float32 output read as such: not the op's
        end = cast
    end, epilogue = _epilogue(end, x_shape, value.dtype)
    return _GroupNorm(x, weight, bias, shape[1], float(eps), end, epilogue)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _by_sample_channel(node: Any, out: tuple[int, ...]) -> bool:
    """Whether ``node`` is a tensor by sample and channel as broadcast against ``out`` (``N, C, 1, 1``), as
    the op takes a scale or shift."""
    return _shape(node) == (*out[:2], *(1,) * (len(out) - 2))


def _silu(h: Any, dtype: torch.dtype) -> Any:
    """The node whose value is SiLU(``h``), read from ``h`` alone, in ``dtype``; else None. Its forms:
    ``aten.silu``, ``h * sigmoid(h)``, and ``h / (1 + exp(-h))`` (torch's decomposition of ``F.silu``, a
    16-bit ``h`` computed in float32 and cast back)."""
    users = list(h.users)
    if len(users) == 1 and is_call(users[0], _aten.silu.default):
        return users[0] if node_value(users[0]).dtype == dtype else None
    sigmoid = next((u for u in users if is_call(u, _aten.sigmoid.default)), None)
    if sigmoid is not None and len(users) == 2:
        mul: Any = _only_user(sigmoid)
        if is_call(mul, _aten.mul.Tensor) and set(mul.args) == {h, sigmoid} and mul in users:
            return mul if node_value(mul).dtype == dtype else None
        return None
    up = users[0] if len(users) == 1 and _cast_to(users[0]) == torch.float32 else h
    readers = list(up.users)
    neg = next((u for u in readers if is_call(u, _aten.neg.default)), None)
    exp: Any = _only_user(neg)
    plus: Any = _only_user(exp) if is_call(exp, _aten.exp.default) else None
    if neg is None or len(readers) != 2 or not is_call(plus, _aten.add.Tensor) or len(plus.args) != 2 or plus.kwargs:
        return None
    one = plus.args[1] if plus.args[0] is exp else plus.args[0] if plus.args[1] is exp else None
    if not _number(one) or one != 1:
        return None
    div: Any = _only_user(plus)
    if not is_call(div, _aten.div.Tensor) or div.args != (up, plus) or div not in readers:
        return None
    end: Any = div if up is h else _only_user(div)
    return end if end is not None and _shape(end) == _shape(h) and node_value(end).dtype == dtype else None


def _epilogue(end: torch.fx.Node, out: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.fx.Node, _Epilogue]:
    """The longest epilogue the op computes after the group norm whose output is ``end`` (see the module's
    docstring), and the node whose value is its last step's."""
    scale = shift = None
    offset = 0.0
    step = _affine(end, _aten.mul.Tensor, out, _by_sample_channel, dtype)
    if step is not None:
        end, scale = step
        inner = scale.args if is_call(scale, _aten.add.Tensor) and not scale.kwargs else ()
        numbers = [a for a in inner if _number(a)]
        if len(inner) == 2 and len(numbers) == 1 and len(scale.users) == 1:
            tensor = next(a for a in inner if not _number(a))
            if _by_sample_channel(tensor, out):
                scale, offset = tensor, float(numbers[0])
    step = _affine(end, _aten.add.Tensor, out, _by_sample_channel, dtype)
    if step is not None:
        end, shift = step
    activated = _silu(end, dtype)
    silu = activated is not None
    return (activated if silu else end), _Epilogue(scale, shift, offset, silu)


def takes_groups(value: Any, groups: int) -> bool:
    """Whether the op's kernel takes this input (a node's fake tensor) in ``groups`` groups as the rewrite
    hands it over: contiguous, or channels-last with each pixel's group whole 16-byte packs (read in place
    as well: a copy would cost the pass the op saves), of a dtype it is built for, each group
    :data:`~group_norm_op.MIN_GROUP` elements or more and held by a cluster, on a GPU with clusters."""
    if value is None or value.dtype not in group_norm_op.DTYPES:
        return False
    if group_norm_op.unsupported_shape(value.shape, value.element_size(), groups) is not None:
        return False
    if not value.is_contiguous() and (
        not group_norm_kernel.is_channels_last(value)
        or group_norm_op.channels_last_unsupported(value.shape, value.element_size(), groups) is not None
    ):
        return False
    return value.numel() // (value.shape[0] * groups) >= group_norm_op.MIN_GROUP and cluster_softmax.on_cluster_gpu(
        value
    )


def check_buildable(dtype: torch.dtype, device: torch.device) -> None:
    """The op builds its kernel at its first call, with nvcc: where this machine has none and no build of
    it for this dtype and GPU is in place (``kernelopt build-op``), the rewrite is refused here, at the
    compile, in one line, rather than a call failing later."""
    unable = cuda_toolchain.nvcc_missing()
    if unable is None or group_norm_kernel.prebuilt(dtype, row_softmax_op.capability(device.index)):
        return
    raise UnsupportedEnvironment(
        f"{CLUSTER_GROUP_NORM_OPTION}: kernelopt's group norm is built with nvcc at its first call, and {unable}; "
        "or build it where nvcc is (kernelopt build-op) into this machine's KERNELOPT_CUDA_BUILD_DIR; or leave "
        "the option out"
    )


def _take_convolution_bias(x: torch.fx.Node, call: torch.fx.Node) -> None:
    """Where the group norm's input is a convolution that the op alone reads, the convolution's bias becomes
    the op's ``input_bias`` (added as the op reads each value) and the convolution computes none. On the GPU
    Inductor peels a convolution's bias off into an add of its own (cuDNN is slower with it), which it fuses
    into its own group norm's kernels but not into an extern op: a read and a write of the convolution's
    output more, which kept level2/09 at 0.79x on the H100 after the op read its channels-last input in
    place (benchmarks/h100-2026-12-07-group-norm-channels-last)."""
    if not is_call(x, _aten.convolution.default) or set(x.users) != {call} or len(call.args) != 9:
        return
    conv_bias = x.args[2]
    out = _shape(x)
    if not isinstance(conv_bias, torch.fx.Node) or out is None or _shape(conv_bias) != (out[1],):
        return
    x.update_arg(2, None)
    call.args = (*call.args, conv_bias)


def rewrite_for_cluster_group_norm(graph: torch.fx.Graph) -> int:
    """Replace every group norm of ``graph`` (a post-grad ATen graph) that ``torch.ops.kernelopt.group_norm``
    computes with a call of it; how many were replaced."""
    count = 0
    # listed first: a replacement erases its own var_mean and nothing another group norm reads
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target is _aten.var_mean.correction]:
        found = _group_norm(node)
        if found is None:
            continue
        value = node_value(found.x)
        if not takes_groups(value, found.groups):
            continue
        check_buildable(value.dtype, value.device)
        group_norm_op.build_host()  # (once a machine: the candidate's process loads it)
        e = found.epilogue
        arguments = (
            found.x,
            found.weight,
            found.bias,
            found.groups,
            found.eps,
            e.scale,
            e.shift,
            e.scale_offset,
            e.silu,
        )
        call = replace_with_call(graph, found.out, torch.ops.kernelopt.group_norm.default, arguments)
        _take_convolution_bias(found.x, call)
        count += 1
    if count:
        graph.lint()
    return count
