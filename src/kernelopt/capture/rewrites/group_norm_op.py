"""``torch.ops.kernelopt.group_norm``: a group norm that reads each group once, the group held in the shared
memory of one Hopper thread-block cluster.

Inductor writes a group norm whose groups are wider than a program holds as two kernels, the statistics
and then the output, so the input is read twice; its floor is one read and one write. The op takes the
group norm's input as the graph holds it (``N, C, ...``, contiguous or channels-last, as Inductor lays a
convolution's output out; float32, bfloat16 or float16), its
weight and bias by channel (or None), the number of groups and eps, and returns the output in the input's
dtype, computed in float32 and rounded once. What a diffusion block does after its group norm can be the
op's too, so that the output is written once (Inductor fuses it into its output kernel, which a group
norm of its own would otherwise leave to a kernel of its own: 0.74x in level2/13 on the H100): a scale
and a shift by sample and channel, ``out * (scale + scale_offset) + shift`` (``scale_offset`` 1 for the
usual ``1 + scale``), then a SiLU. Groups wider than a cluster holds (up to 4 MB) go to the reread form,
which reads each group a second time from L2 rather than memory. CPU tensors, GPUs without clusters and
groups no form takes are computed by torch (counted and said once, as the row softmax's fallbacks are: a gate refuses a
candidate whose op fell back). ``clusters`` (0: the op's own choice) is for the probe that times each.

The kernel, its build and launch: :mod:`~kernelopt.capture.rewrites.group_norm_kernel`. What this module
does at a call (its checks, its plan, the launch) is done once a signature of the arguments: the op's first
CUDA call puts a C++ kernel over this module's at the op's CUDA key (:func:`use_host`,
:mod:`~kernelopt.capture.rewrites.group_norm_host`), which repeats each planned launch without Python.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

from kernelopt.capture.cuda_kernel import CudaBuildError
from kernelopt.capture.rewrites import group_norm_host, row_softmax_op
from kernelopt.capture.rewrites.group_norm_kernel import (
    DTYPES,
    FORMS,
    MAX_CLUSTER,
    PART_BYTES_LIMIT,
    REGS_WIDE,
    THREADS,
    Epilogue,
    LaunchShape,
    Library,
    is_channels_last,
    launcher,
)
from kernelopt.measure import op_hosts

OP_NAME = "torch.ops.kernelopt.group_norm.default"  # as Inductor's wrapper calls it
# A block's part at most this many bytes, so that an SM holds three blocks. On an H100
# (scripts/device/group_norm_op_probe.py, benchmarks/h100-2026-12-06-group-norm-op) the suite's groups ran
# fastest so: 262144 float32 in 16 blocks of 64 KB (2.06 TB/s; 8 of 128 KB 1.77), 40960 bfloat16 in 2 of
# 40 KB (2.40 TB/s; 1 of 80 KB 2.10); 524288 float32 in 16 of 128 KB, one block an SM and 7 clusters at
# once, moved 1.39 TB/s (0.70x Inductor's two kernels; 0.86x with the wide form), so groups that wide
# are left to Inductor.
PART_BYTES = 65 * 1024
CLUSTER_SIZES = tuple(2**k for k in range(MAX_CLUSTER.bit_length()) if 2**k <= MAX_CLUSTER)  # 1 ... 16
MIN_GROUP = 4096  # narrower groups: Inductor's persistent reductions read them once already
# Groups wider than a cluster holds in shared memory (level1/16's 2 MB) go to the reread form
# ("reread"): each block reads its part twice, the second time from L2, REREAD_CLUSTER blocks
# a group, as many groups at once as REREAD_L2_SHARE of L2 holds (and enough blocks for every SM), groups of
# REREAD_GROUP_BYTES at most (a dozen at once in the H100's and H200's 50 MB). Not yet timed on a GPU.
REREAD_CLUSTER = 16
REREAD_L2_SHARE = 0.5
REREAD_GROUP_BYTES = 4 * 1024 * 1024


def cluster_blocks(columns: int, itemsize: int, part_bytes: int = PART_BYTES) -> int | None:
    """The blocks of a cluster for groups of ``columns`` elements: the fewest whose parts fit ``part_bytes``;
    None where no cluster holds the group so."""
    return next((b for b in CLUSTER_SIZES if -(-columns // b) * itemsize + 16 <= part_bytes), None)


def fits(columns: int, itemsize: int, blocks: int, wide: bool) -> bool:
    """Whether ``blocks`` blocks a cluster hold groups of ``columns`` elements, each block's part in shared
    memory but, in the ``wide`` form, :data:`REGS_WIDE` 16-byte packs a thread in registers (whole packs
    only)."""
    if wide:
        vec = 16 // itemsize
        per_block = -(-columns // blocks)
        part = -(-per_block // vec) * vec  # whole packs
        return columns % vec == 0 and max(part * itemsize - REGS_WIDE * 16 * THREADS, 0) + 16 <= PART_BYTES_LIMIT
    return -(-columns // blocks) * itemsize + 16 <= PART_BYTES_LIMIT


def max_columns(itemsize: int) -> int:
    """The widest group the op holds in shared memory: 16 blocks' parts of :data:`PART_BYTES` (float32
    266176 elements)."""
    return MAX_CLUSTER * ((PART_BYTES - 16) // itemsize)


def reread_columns(itemsize: int) -> int:
    """The widest group the reread form takes (float32 1048576 elements)."""
    return REREAD_GROUP_BYTES // itemsize


def reread_takes(columns: int, itemsize: int) -> bool:
    """Whether the reread form takes groups of ``columns`` elements: whole 16-byte packs (so every group
    starts on one, in a contiguous input), no wider than :func:`reread_columns`."""
    return columns % (16 // itemsize) == 0 and columns <= reread_columns(itemsize)


def reread_in_flight(rows: int, group_bytes: int, l2_bytes: int, sms: int, blocks: int = REREAD_CLUSTER) -> int:
    """The clusters the reread form runs at once: as many groups as :data:`REREAD_L2_SHARE` of an L2 of
    ``l2_bytes`` holds, so that each part is still there when its block reads it again, but at least one
    block an SM (``sms``), and no more than the ``rows`` groups."""
    held = int(l2_bytes * REREAD_L2_SHARE) // max(group_bytes, 1)
    return max(1, min(rows, max(held, -(-sms // blocks))))


def l2_and_sms(device: int | None) -> tuple[int, int]:
    """The GPU's L2 bytes and SM count (:func:`reread_in_flight`'s; asked when a signature is planned)."""
    properties = torch.cuda.get_device_properties(device)
    return properties.L2_cache_size, properties.multi_processor_count


def _resident(x: torch.Tensor, groups: int, blocks: int) -> int:
    """The reread form's clusters of ``blocks`` the GPU holds at once (asked when a signature is planned):
    more in flight than that leaves the last to run alone after the others have looped over their groups
    (16 of 14 resident on the H100 read 0.83x where 12 read 1.11x)."""
    library = launcher(x.dtype, row_softmax_op.capability(x.device.index))
    return max(1, library.active_clusters(x, groups, blocks, "reread"))


def unsupported_shape(shape: Sequence[int], itemsize: int, groups: int, part_bytes: int = PART_BYTES) -> str | None:
    """Why the kernel would not take a group norm of an input of ``shape`` (``itemsize`` bytes an element)
    in ``groups`` groups, each block's part at most ``part_bytes``, else None."""
    if len(shape) < 3 or math.prod(shape) == 0:
        return "an input with no spatial dimension, or an empty one"
    if groups < 1 or shape[1] % groups:
        return f"{shape[1]} channels in {groups} groups"
    hw = math.prod(shape[2:])
    if hw < 16 // itemsize:
        return f"{hw} elements a channel, fewer than a 16-byte pack"
    columns = shape[1] // groups * hw
    if cluster_blocks(columns, itemsize, part_bytes) is None and not reread_takes(columns, itemsize):
        return (
            f"groups of {columns} elements, wider than a cluster holds ({max_columns(itemsize)}) and not whole "
            f"16-byte packs of at most {reread_columns(itemsize)} (the reread form's)"
        )
    return None


def channels_last_part(hw: int, per_group: int, itemsize: int, blocks: int) -> int:
    """The shared memory of a block of the channels-last kernel: its pixels' ``per_group`` channels and, for
    each of the group's channels, its two coefficients and the input's bias (float32)."""
    return -(-hw // blocks) * per_group * itemsize + 12 * per_group


def channels_last_blocks(hw: int, per_group: int, itemsize: int, part_bytes: int = PART_BYTES) -> int | None:
    """The blocks of a cluster for a channels-last group of ``hw`` pixels of ``per_group`` channels: the
    fewest whose parts fit ``part_bytes``; None where no cluster holds it so."""
    return next((b for b in CLUSTER_SIZES if channels_last_part(hw, per_group, itemsize, b) <= part_bytes), None)


def channels_last_unsupported(
    shape: Sequence[int], itemsize: int, groups: int, part_bytes: int = PART_BYTES
) -> str | None:
    """Why the channels-last kernel would not read a channels-last input of ``shape`` in ``groups`` groups
    in place (each pixel's group whole 16-byte packs, a cluster holding the group), else None; the op then
    copies it contiguous. The shape is one :func:`unsupported_shape` takes."""
    per_group = shape[1] // groups
    if per_group * itemsize % 16:
        return f"{per_group} channels a group, not whole 16-byte packs at a pixel"
    if channels_last_blocks(math.prod(shape[2:]), per_group, itemsize, part_bytes) is None:
        return f"groups of {per_group} x {math.prod(shape[2:])} elements, wider than a cluster holds channels-last"
    return None


def unsupported(x: torch.Tensor, groups: int, part_bytes: int = PART_BYTES) -> str | None:
    """Why the kernel would not compute a group norm of this CUDA input, else None."""
    if x.dtype not in DTYPES:
        return f"no build for {x.dtype}"
    if not row_softmax_op.has_clusters(x.device.index):
        return f"no thread-block clusters on a GPU of compute capability {row_softmax_op.capability(x.device.index)}"
    return unsupported_shape(x.shape, x.element_size(), groups, part_bytes)


def reference(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    scale: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    scale_offset: float = 0.0,
    silu: bool = False,
    input_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """What the op computes, by torch: the group norm of ``x`` plus ``input_bias`` by channel and its epilogue
    in float32, in ``x``'s dtype (a weight and bias of ``C`` elements, flat or as the graph broadcasts them;
    a scale and shift ``N, C, 1, ...``)."""
    xf = x.float() if input_bias is None else x.float() + _by_channel(input_bias, x)
    out = F.group_norm(xf, groups, _flat(weight, torch.float32), _flat(bias, torch.float32), eps)
    if scale is not None:
        out = out * (scale.float() + scale_offset)
    if shift is not None:
        out = out + shift.float()
    if silu:
        out = F.silu(out)
    return out.to(x.dtype).contiguous()  # contiguous whatever x's layout, as the kernel's output and the fake


def check_epilogue(
    x: torch.Tensor,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    scale_offset: float,
    input_bias: torch.Tensor | None = None,
) -> None:
    """A scale and shift the op takes: ``N, C`` then ones, as many dimensions as ``x``; an input bias of
    ``C`` elements; one line naming what is wrong else (a bad call of the op, not an input it leaves to
    torch)."""
    if input_bias is not None and tuple(input_bias.shape) != (x.shape[1],):
        raise ValueError(
            f"kernelopt.group_norm: input_bias of shape {tuple(input_bias.shape)}; pass it as ({x.shape[1]},) "
            "(by channel)"
        )
    want = (*x.shape[:2], *(1,) * (x.dim() - 2))
    for name, t in (("scale", scale), ("shift", shift)):
        if t is not None and tuple(t.shape) != want:
            raise ValueError(
                f"kernelopt.group_norm: {name} of shape {tuple(t.shape)}; pass it as {want} (by sample and channel)"
            )
    if scale is None and scale_offset:
        raise ValueError("kernelopt.group_norm: a scale_offset without a scale; pass the scale, or no offset")


class Plan(NamedTuple):
    """What :func:`group_norm` does for one signature of its arguments (:func:`signature`), decided once:
    torch's computation and why (``fallback``), or the kernel's launch and what comes before it (a copy of
    a layout the kernel does not read, a clone of an input off a 16-byte boundary, the input's bias added
    by torch where the contiguous kernel adds none)."""

    fallback: str | None
    copy: bool = False
    clone: bool = False
    add_bias: bool = False
    dtype: torch.dtype = torch.float32  # the parameters' (:func:`params_dtype`)
    library: Library | None = None
    shape: LaunchShape | None = None
    host: bool = False  # a launch the C++ host path repeats: nothing made by torch before it (:func:`use_host`)


PLANS_KEPT = 256  # signatures: a compiled graph's are a handful; past this many the plans start afresh
_PLANS: dict[tuple[object, ...], Plan] = {}


def signature(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    scale_offset: float,
    input_bias: torch.Tensor | None,
    clusters: int,
    form: str,
    in_flight: int,
) -> tuple[object, ...]:
    """What a :class:`Plan` depends on: the input's shape, strides, dtype, device and whether it starts on
    a 16-byte boundary, each parameter's shape, strides and dtype, and the op's other arguments but eps
    and the SiLU (handed to every launch)."""
    return (
        x.shape, x.stride(), x.dtype, x.device.index, x.data_ptr() % 16 == 0, groups,
        *(None if t is None else (t.shape, t.stride(), t.dtype) for t in (weight, bias, scale, shift, input_bias)),
        scale_offset != 0.0, clusters, form, in_flight,
    )  # fmt: skip


def group_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    scale: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    scale_offset: float = 0.0,
    silu: bool = False,
    input_bias: torch.Tensor | None = None,
    clusters: int = 0,
    form: str = "",
    in_flight: int = 0,
) -> torch.Tensor:
    """``F.group_norm(x + input_bias, groups, weight, bias, eps)`` (``input_bias`` by channel: a
    convolution's bias, which Inductor would otherwise add in a kernel of its own before the op), one read
    of each group, then ``* (scale + scale_offset) + shift`` and a SiLU where asked. ``clusters`` (the blocks of a cluster, 0 for the op's
    own choice), ``form`` (one of ``group_norm_kernel.FORMS``: "held" in shared memory, "wide" partly in
    registers, "reread", each part read twice, the form groups wider than a cluster holds get, or
    "one-pass", held with its moments folded as it lands; "" for the op's own choice) and ``in_flight`` (the reread form's clusters at once, 0
    for :func:`reread_in_flight`) are the probe's, which may ask for parts up to what a block may hold, past
    the op's own rule. What to do is decided once a signature of the arguments (:func:`plan`)."""
    row_softmax_op.forward_only(x, "kernelopt.group_norm")
    if x.device.type != "cuda":  # a CPU test of the rewrite: torch computes it
        check_arguments(x, scale, shift, scale_offset, input_bias, form)
        return reference(x, weight, bias, groups, eps, scale, shift, scale_offset, silu, input_bias)
    return planned(
        x, weight, bias, groups, eps, scale, shift, scale_offset, silu, input_bias, clusters, form, in_flight
    )


def planned(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    scale_offset: float,
    silu: bool,
    input_bias: torch.Tensor | None,
    clusters: int,
    form: str,
    in_flight: int,
) -> torch.Tensor:
    """:func:`group_norm` of a CUDA input by the :class:`Plan` of its :func:`signature`, made on the
    signature's first call: later calls check nothing the signature decides, and hand the kernel its
    pointers."""
    key = signature(x, weight, bias, groups, scale, shift, scale_offset, input_bias, clusters, form, in_flight)
    made = _PLANS.get(key)
    if made is None:
        made = plan(x, weight, bias, groups, scale, shift, scale_offset, input_bias, clusters, form, in_flight)
        if len(_PLANS) >= PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = made
    if made.fallback is not None:
        row_softmax_op.count_fallback(made.fallback, "kernelopt.group_norm")
        return reference(x, weight, bias, groups, eps, scale, shift, scale_offset, silu, input_bias)
    assert made.library is not None and made.shape is not None, "a plan that launches has its launch"
    if _HOST is None and _HOST_UNUSED is None:
        use_host()  # from the next call on (this one goes on in Python)
    elif made.host and _HOST is not None:
        _HOST.keep(made.library, made.shape)  # for the signature the C++ kernel handed over, if it did
    if made.copy:
        x = x.contiguous()
    elif made.clone:
        x = x.clone()
    if made.add_bias:
        x = (x + _by_channel(input_bias, x)).to(x.dtype)  # type: ignore[arg-type]
        input_bias = None
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # contiguous, as the fake says
    d = made.dtype
    params = (_flat(weight, d), _flat(bias, d), _cast(scale, d), _cast(shift, d), _flat(input_bias, d))
    made.library.launch(x, y, params, made.shape, float(scale_offset), bool(silu), float(eps))
    return y


def check_arguments(
    x: torch.Tensor,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    scale_offset: float,
    input_bias: torch.Tensor | None,
    form: str,
) -> None:
    """:func:`check_epilogue`, and a form the op knows: a bad call of the op, refused in one line."""
    check_epilogue(x, scale, shift, scale_offset, input_bias)
    if form and form not in FORMS:
        raise ValueError(f"kernelopt.group_norm: form {form!r}; pass one of {', '.join(FORMS)}, or '' for the op's own")


def plan(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    scale_offset: float,
    input_bias: torch.Tensor | None,
    clusters: int,
    form: str,
    in_flight: int,
) -> Plan:
    """The :class:`Plan` for a CUDA call of :func:`group_norm` with these arguments (anything of the same
    :func:`signature` gets the same): its checks, the kernel's form, cluster size and clusters in flight."""
    check_arguments(x, scale, shift, scale_offset, input_bias, form)
    limit = PART_BYTES_LIMIT + (REGS_WIDE * 16 * THREADS if form == "wide" else 0) if clusters else PART_BYTES
    reason = unsupported(x, groups, limit)
    if reason is not None:
        return Plan(reason)
    contiguous = x.is_contiguous()
    copy = not contiguous and not (
        form in ("", "held")
        and is_channels_last(x)
        and x.data_ptr() % 16 == 0
        and channels_last_unsupported(x.shape, x.element_size(), groups, limit) is None
    )  # a layout the kernel does not read: one copy (as Inductor made before the op took channels-last inputs)
    if copy:
        x, contiguous = x.contiguous(), True
    add_bias = input_bias is not None and contiguous  # the contiguous kernel adds no bias: one pass more,
    if add_bias:  # as Inductor's own add of it before the op
        input_bias = None
    hw = x.numel() // (x.shape[0] * x.shape[1])
    per_group = x.shape[1] // groups
    reread = contiguous and (
        form == "reread" or (not form and cluster_blocks(per_group * hw, x.element_size(), limit) is None)
    )  # groups wider than a cluster holds: each part read twice, the second time from L2
    blocks: int | None
    clone = False
    if reread:
        form, blocks = "reread", clusters or REREAD_CLUSTER
        held = blocks in CLUSTER_SIZES and reread_takes(per_group * hw, x.element_size())
        clone = not copy and x.data_ptr() % 16 != 0  # the form reads 16-byte packs: a copy of an input off one
        if clone:  # (the GPU asked below of one as the launch will have it)
            x = x.clone()
        if held and not in_flight:  # (a cluster size the GPU refuses is said below, not asked of it)
            in_flight = min(
                reread_in_flight(
                    x.shape[0] * groups, per_group * hw * x.element_size(), *l2_and_sms(x.device.index), blocks
                ),
                _resident(x, groups, blocks),
            )
    elif contiguous:
        form, blocks = form or "held", clusters or cluster_blocks(per_group * hw, x.element_size())
        held = blocks is not None and fits(per_group * hw, x.element_size(), blocks, form == "wide")
    else:
        form, blocks = "held", clusters or channels_last_blocks(hw, per_group, x.element_size())
        held = blocks in CLUSTER_SIZES and channels_last_part(hw, per_group, x.element_size(), blocks or 1) <= limit
    if blocks is None or not held:
        raise ValueError(
            f"kernelopt.group_norm: {clusters} blocks a cluster in the {form} form cannot take groups of "
            f"{per_group * hw} elements; leave clusters 0 and form '' for the op's own choice"
        )
    dtype = params_dtype(x, (weight, bias, scale, shift, input_bias))
    library = launcher(x.dtype, row_softmax_op.capability(x.device.index))
    epilogue = Epilogue(
        _flat(weight, dtype), _flat(bias, dtype), _cast(scale, dtype), _cast(shift, dtype), float(scale_offset),
        False, _flat(input_bias, dtype),
    )  # fmt: skip
    shape = library.shape(x, x, epilogue, groups, blocks, form, in_flight, query=True)  # (no output: a query's)
    host = (
        not (copy or clone or add_bias)
        and all(t is None or (t.dtype == dtype and t.is_contiguous()) for t in (weight, bias, input_bias))
        and all(t is None or t.dtype == dtype for t in (scale, shift))
    )  # each parameter handed over as it is (by _flat and _cast: itself, or a view of it)
    return Plan(None, copy, clone, add_bias, dtype, library, shape, host)


def params_dtype(x: torch.Tensor, params: Sequence[torch.Tensor | None]) -> torch.dtype:
    """The dtype the kernel reads the weight, bias, scale and shift in: ``x``'s where they all are (a
    16-bit model's own, no cast kernel a call), float32 else (each cast that is not)."""
    return x.dtype if all(t is None or t.dtype == x.dtype for t in params) else torch.float32


def _by_channel(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``C`` values by channel as broadcast against ``x`` (``C, 1, ...``)."""
    return t.reshape(-1, *(1,) * (x.dim() - 2))


def _flat(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A weight or bias (``C`` elements, flat or broadcast by channel as ``1, C, 1, 1``) as the kernel reads
    it: flat and contiguous in ``dtype``, a copy only where it is not already (and no call of torch's where
    it is: each is host time at every call)."""
    if t is None:
        return None
    flat = t if t.dim() == 1 else t.reshape(-1)  # Inductor hands them over as 1, C, 1, 1 views
    return flat if flat.dtype == dtype and flat.is_contiguous() else flat.to(dtype).contiguous()


def _cast(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A scale or shift in ``dtype`` (its strides the kernel's to read), no call of torch's where it is."""
    return t if t is None or t.dtype == dtype else t.to(dtype)


def _group_norm_fake(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    scale: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    scale_offset: float = 0.0,
    silu: bool = False,
    input_bias: torch.Tensor | None = None,
    clusters: int = 0,
    form: str = "",
    in_flight: int = 0,
) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_HOST: group_norm_host.Host | None = None  # the C++ host path, at the op's CUDA key (:func:`use_host`)
_HOST_UNUSED: str | None = None  # why it is not, once asked
HOST_DROPPED = "dropped by drop_host(); use_host() puts it back"
HOST_NOT_ASKED = op_hosts.python_path("no CUDA call yet")  # host_state before the op's first CUDA call in this process


def use_host() -> str | None:
    """Put the op's C++ host path (:mod:`~kernelopt.capture.rewrites.group_norm_host`) at its CUDA key,
    over the Python kernel, which then plans each signature once for it (built now unless built already:
    seconds, once a machine). Asked by the op's first CUDA call in a process, which goes on in Python. Why
    not, else None; said once, as the op's calls then pay Python's host path (a candidate it makes
    host-bound is refused at gate 4)."""
    global _HOST, _HOST_UNUSED
    if _HOST is not None:
        return None
    if _HOST_UNUSED is None or _HOST_UNUSED is HOST_DROPPED:
        try:
            host = group_norm_host.load(PLANS_KEPT)
        except (CudaBuildError, OSError) as exc:
            _HOST_UNUSED = f"the C++ host path did not build or load: {exc}"
        else:
            _HOST_UNUSED = host.register()
            _HOST = host if _HOST_UNUSED is None else None
        if _HOST_UNUSED is not None:
            warnings.warn(f"kernelopt.group_norm: each call goes through Python ({_HOST_UNUSED})", stacklevel=2)
    return _HOST_UNUSED


def build_host() -> None:
    """Build the C++ host path now, where a compile hands a graph's group norm to the op on a GPU machine,
    into this process's build folder, which the candidate processes judging the graph share: their first
    call then loads it rather than building it (a build already there is found by its path). A build that
    fails is said at the first call's :func:`use_host`, which tries again."""
    if _HOST is not None or not torch.cuda.is_available():
        return
    try:
        group_norm_host.build(PLANS_KEPT)
    except (CudaBuildError, OSError):
        return  # (said by the first call's use_host, with its reason)


def drop_host() -> None:
    """The C++ host path off the op's CUDA key, Python's kernel there again (for a probe that times both, or
    a test) until :func:`use_host` puts it back."""
    global _HOST, _HOST_UNUSED
    if _HOST is not None:
        _HOST.unregister()
    _HOST, _HOST_UNUSED = None, HOST_DROPPED


def host_state() -> str:
    """Which host path the op's calls take in this process, in words (for a judge's evidence: a candidate
    whose calls went through Python pays its host path at every call)."""
    if _HOST is not None:
        kept, launched, handed = _HOST.counts()
        return f"C++: {kept} plan(s) kept, {launched} call(s) launched from C++, {handed} handed to Python's path"
    return op_hosts.python_path(_HOST_UNUSED) if _HOST_UNUSED is not None else HOST_NOT_ASKED


def _called_host_state() -> str | None:
    """:func:`host_state` once the op has been called on a GPU in this process, else None (the judge's
    evidence leaves out an op only imported, :mod:`~kernelopt.measure.op_hosts`)."""
    state = host_state()
    return None if state == HOST_NOT_ASKED else state


op_hosts.register("kernelopt.group_norm", _called_host_state)


def host_counts() -> tuple[int, int, int] | None:
    """The C++ host path's plans kept, calls it launched and calls it handed to Python's path; None where it
    is not at the op's CUDA key."""
    return None if _HOST is None else _HOST.counts()


# registered on the dispatcher directly, as the row softmax's ops are (no custom_op wrappers)
# flexible_layout: Inductor hands the op its input in the layout it gave it (a convolution's channels-last
# output as it is, which the kernel reads in place: level2/09), not copied into the traced one; the output is
# contiguous whatever the input's, in the fake as in the kernel, so that Inductor's check of its strides
# holds (an output laid out as the input failed it on the H100)
# group_norm_planned: the same op by its Python path alone, which the C++ host path hands each signature it
# has not planned (its CUDA kernel stands over group_norm's, :func:`use_host`)
_SCHEMA = torch.library.infer_schema(group_norm, mutates_args=())
row_softmax_op.OPS_LIBRARY.define("group_norm" + _SCHEMA, tags=(torch.Tag.flexible_layout,))
row_softmax_op.OPS_LIBRARY.define("group_norm_planned" + _SCHEMA)
for _key in ("CPU", "CUDA"):
    row_softmax_op.OPS_LIBRARY.impl("group_norm", group_norm, _key)
row_softmax_op.OPS_LIBRARY.impl("group_norm_planned", group_norm, "CUDA")
torch.library.register_fake("kernelopt::group_norm", _group_norm_fake, lib=row_softmax_op.OPS_LIBRARY)
