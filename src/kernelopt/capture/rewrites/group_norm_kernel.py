"""kernelopt's group norm (:mod:`~kernelopt.capture.rewrites.group_norm_op`): its CUDA source
(``group_norm_kernel.cu`` after ``cluster_prelude.cuh``, both beside this module), its build and launch.

Inductor writes a group norm over groups wider than a program holds as two kernels: the groups'
statistics (one read of the input), then the output (a second read); every one-kernel form Inductor can
be given ran slower on the H100 (``kernelopt.group_rows``' docstring). Here one group is one thread-block
cluster (sm_90): each block copies its part of the group into shared memory by bulk copies
(``BulkPart``), sums it as it lands, then sums its squared deviations from its own mean (a second pass
over shared memory, not memory); the blocks exchange their count, sum and sum of squared deviations
through distributed shared memory at one cluster barrier (each pushes its own into every block's shared
memory, so that each reads its own alone, and none waits on the others' reads to exit) and combine them
(Chan's parallel variance: no cancellation of a sum of squares less a squared mean), and each block
writes its part as ``act((x - mean) * a[c] + b[c])``, ``a`` and ``b`` from rstd, the weight and bias and
the epilogue's scale and shift (:class:`Epilogue`). One read of the group, one write.

A group of 8 channels x 256 x 256 float32 is 2 MB: more than the 8 blocks of a portable cluster hold in
227 KB of shared memory each, so the kernel may launch clusters of 16 (Hopper's non-portable size), and a
wide form (:data:`REGS_WIDE`) holds part of each block's part in registers so that two 128 KB parts fit an
SM. On the H100 the plain form moved 2.06-2.40 TB/s at the level2 problems' groups (61-72 % of the copy
roofline), the wide form 1.71 TB/s at 2 MB groups (benchmarks/h100-2026-12-06-group-norm-op); with one
cluster barrier, 2.32 TB/s at level2/09's groups and 2.03 in the wide form
(benchmarks/h100-2026-12-06-group-norm-epilogue).

A channels-last input (a convolution's output as Inductor lays it out, ``N, H, W, C`` in memory: a group is
``C/G`` contiguous channels at every pixel) has a kernel of its own, ``group_norm_channels_last``: each
block a run of pixels, each thread's 16-byte packs copied into shared memory by ``cp.async`` (a pixel's
group whole packs), the same statistics and cluster exchange, and the output written transposed into a
contiguous tensor (what the op returns whatever its input's layout). Before it, the op was handed a copy
of such an input, a read and a write more than the group norm itself (level2/09 0.80x on the H100).

Groups wider than a cluster holds in shared memory (level1/16's 2 MB) have a third kernel,
``group_norm_reread``: no part held, each block reads its part twice, the first time with its lines marked
to stay in L2 and the statistics kept by Welford by pack, the second time (after the same exchange) from
L2, and a fixed number of clusters loops over the groups so that the groups read at once fit in L2: memory
sees one read and one write where L2 keeps its promise. Not yet timed on a GPU.

The held kernel has a one-pass form (``FORMS``' "one-pass"): its part's moments folded by pack as the part
lands (the reread form's Welford by pack, ``Moments``), so that no block passes over its shared memory a
second time before the cluster's exchange. The H100 held form was partly bound by its instructions (its
schedulers issuing on 65 % of cycles); an H200's faster memory leaves such a kernel further behind the
stock two kernels, and this form is the one to time there against the held one. Not yet run on a GPU, and
not the op's own choice until one says it pays.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from kernelopt.capture.rewrites.row_softmax_kernel import C_TYPES, CUDA_PRELUDE, BuiltLibrary, _on_device, packaged

THREADS = 256  # per block
PIECES = 2  # bulk copies a block's part arrives in, as the row softmax's shared-memory form
# The form for parts wider than three blocks an SM hold in shared memory: this many 16-byte packs a thread
# (32 KB a block) in registers, the rest of a 128 KB part (96 KB) in shared memory, two blocks an SM.
REGS_WIDE = 8
# The contiguous input's forms, named in the op and by index in the C entry's `form`: "held" (each block's
# part in shared memory), "wide" (REGS_WIDE packs a thread of it in registers) and "reread" (for groups
# wider than a cluster holds: no part held, each read twice, the second time from L2, UNROLL 16-byte loads
# a thread in flight) and "one-pass" (held, its moments folded by pack as it lands: no second pass over
# shared memory; not the op's own choice until a GPU says it pays). A channels-last input has one form, "held".
FORMS = ("held", "wide", "reread", "one-pass")
UNROLL = 8
MAX_CLUSTER = 16  # Hopper's non-portable cluster size
PART_BYTES_LIMIT = 227 * 1024  # the shared memory a block may ask for on sm_90
DTYPES = tuple(C_TYPES)
LIBRARY = "kernelopt.group_norm"  # the builds' name in the build folder

CUDA_SOURCE = CUDA_PRELUDE + packaged("group_norm_kernel.cu")


def source_for(dtype: torch.dtype) -> str:
    """The CUDA source for one dtype (the input's and the output's)."""
    return (
        CUDA_SOURCE.replace("__T__", C_TYPES[dtype])
        .replace("__THREADS__", str(THREADS))
        .replace("__PIECES__", str(PIECES))
        .replace("__REGS_WIDE__", str(REGS_WIDE))
        .replace("__FORM_HELD__", str(FORMS.index("held")))
        .replace("__FORM_WIDE__", str(FORMS.index("wide")))
        .replace("__FORM_REREAD__", str(FORMS.index("reread")))
        .replace("__FORM_ONE_PASS__", str(FORMS.index("one-pass")))
        .replace("__UNROLL__", str(UNROLL))
        .replace("__MAX_CLUSTER__", str(MAX_CLUSTER))
    )


class Epilogue(NamedTuple):
    """What follows the normalisation in the kernel (its ``Epilogue``): ``act(((x - mean) * rstd *
    weight[c] + bias[c]) * (scale[n, c] + scale_offset) + shift[n, c])``. ``weight`` and ``bias``: ``C``
    elements, contiguous; ``scale`` and ``shift``: ``N, C, 1, ...`` in any strides; each None (1, 0, 1, 0)
    or of one dtype for all, float32 or the input's; ``silu``: act is SiLU, else the identity;
    ``input_bias``: ``C`` elements added to ``x`` by channel before the statistics (a convolution's bias;
    the channels-last kernel's alone)."""

    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    scale: torch.Tensor | None = None
    shift: torch.Tensor | None = None
    scale_offset: float = 0.0
    silu: bool = False
    input_bias: torch.Tensor | None = None

    def params(self) -> list[torch.Tensor | None]:
        """The five parameters in the order the C entry point takes their pointers."""
        return [self.weight, self.bias, self.scale, self.shift, self.input_bias]


class LaunchShape(NamedTuple):
    """The C entry point's arguments other than the pointers, eps and the epilogue's two numbers: checked
    once for a signature of the op's arguments and kept with its plan, so that a call hands over pointers
    alone (the op's host path is paid at every call of a small model: 55-90 µs a call on the H100 at
    level2/13 before plans, against Inductor's two launches)."""

    params_float: int
    strides: ctypes.Array[ctypes.c_int64]  # scale's and shift's, by sample and by channel (read only)
    rows: int
    cols: int
    hw: int
    per_group: int
    groups: int
    clusters: int
    form: int
    channels_last: int
    in_flight: int


class Library(BuiltLibrary):
    """One dtype's built kernel, launched through its C entry point."""

    op = "kernelopt.group_norm"

    def __init__(self, library: ctypes.CDLL) -> None:
        super().__init__(library)
        self._launch = library.kopt_group_norm
        self._launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
            ctypes.POINTER(ctypes.c_int64), ctypes.c_float, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
            ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
        ]  # fmt: skip
        self._launch.restype = ctypes.c_int

    def run(self, x: torch.Tensor, y: torch.Tensor, epilogue: Epilogue, groups: int, clusters: int, eps: float,
            form: str = "held", in_flight: int = 0) -> None:  # fmt: skip
        """Launch on the current stream of ``x``'s device: ``x`` (``N, C, ...``, contiguous or channels-last,
        :func:`is_channels_last`) into contiguous ``y``, then ``epilogue``; ``form`` one of :data:`FORMS`
        (all but "held" a contiguous ``x`` only), ``in_flight`` the reread form's clusters at once (0:
        one a group)."""
        shape = self.shape(x, y, epilogue, groups, clusters, form, in_flight)
        self.launch(x, y, epilogue.params(), shape, epilogue.scale_offset, epilogue.silu, eps)

    def launch(self, x: torch.Tensor, y: torch.Tensor, params: Sequence[torch.Tensor | None], shape: LaunchShape,
               scale_offset: float, silu: bool, eps: float) -> None:  # fmt: skip
        """:meth:`run` for arguments of a signature :meth:`shape` checked: ``params`` the epilogue's five
        (:meth:`Epilogue.params`), of that signature."""
        pointers = (ctypes.c_void_p * 5)(*(t.data_ptr() if t is not None else None for t in params))
        self._check(self._enter(x, y, pointers, shape, scale_offset, silu, eps, None))

    def addresses(self) -> tuple[int, int]:
        """The C entry point's and ``kopt_error_string``'s addresses, for the op's C++ host path
        (:mod:`~kernelopt.capture.rewrites.group_norm_host`), which launches through them."""
        return (
            ctypes.cast(self._launch, ctypes.c_void_p).value or 0,
            ctypes.cast(self._error, ctypes.c_void_p).value or 0,
        )

    def active_clusters(self, x: torch.Tensor, groups: int, clusters: int, form: str = "held") -> int:
        """How many clusters of this shape for ``x`` the GPU holds at once (0: none fits)."""
        active = ctypes.c_int(0)
        shape = self.shape(x, x, Epilogue(), groups, clusters, form, query=True)
        self._check(self._enter(x, x, (ctypes.c_void_p * 5)(), shape, 0.0, False, 0.0, active))
        return active.value

    def shape(self, x: torch.Tensor, y: torch.Tensor, epilogue: Epilogue, groups: int, clusters: int,
              form: str = "held", in_flight: int = 0, query: bool = False) -> LaunchShape:  # fmt: skip
        """The launch's :class:`LaunchShape`, once its arguments are checked (one line naming what is wrong
        else); ``query``: no output to check (:meth:`active_clusters`'s, and a plan's, made before its output)."""
        if form not in FORMS:
            raise ValueError(f"{self.op}: form {form!r}; pass one of {', '.join(FORMS)}")
        channels_last = not x.is_contiguous()
        if (channels_last and not is_channels_last(x)) or (not query and not y.is_contiguous()):
            raise ValueError(f"{self.op}: x contiguous or channels-last and y contiguous; pass them so")
        n, channels = x.shape[0], x.shape[1]
        hw = x.numel() // (n * channels)
        per_group = channels // groups
        present = [t for t in epilogue.params() if t is not None]
        params_float = any(t.dtype == torch.float32 for t in present)
        if any(t.dtype != (torch.float32 if params_float else x.dtype) for t in present):
            raise ValueError(f"{self.op}: the weight, bias, scale and shift of one dtype, float32 or the input's")
        strides = (ctypes.c_int64 * 4)(*(
            s for t in (epilogue.scale, epilogue.shift) for s in ((t.stride(0), t.stride(1)) if t is not None else (0, 0))
        ))  # fmt: skip
        return LaunchShape(
            int(params_float), strides, n * groups, per_group * hw, hw, per_group, groups, clusters,
            FORMS.index(form), int(channels_last), in_flight,
        )  # fmt: skip

    def _enter(self, x: torch.Tensor, y: torch.Tensor, pointers: ctypes.Array[ctypes.c_void_p], shape: LaunchShape,
               scale_offset: float, silu: bool, eps: float, active: ctypes.c_int | None) -> int:  # fmt: skip
        return _on_device(x, lambda stream: int(self._launch(
            x.data_ptr(), y.data_ptr(), pointers, shape.params_float, shape.strides, scale_offset, int(silu),
            shape.rows, shape.cols, shape.hw, shape.per_group, shape.groups, shape.clusters, shape.form,
            shape.channels_last, shape.in_flight, eps, stream, ctypes.byref(active) if active is not None else None,
        )))  # fmt: skip


def is_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` (``N, C, ...``) lies in memory as ``N, ..., C``, densely (a convolution's output laid
    out channels-last): the channels-last kernel's input."""
    return x.dim() >= 3 and x.movedim(1, -1).is_contiguous()


@functools.cache
def launcher(dtype: torch.dtype, arch: tuple[int, int]) -> Library:
    """The built kernel for one dtype and GPU architecture, kept (no hashing of the source per call)."""
    from kernelopt.capture.rewrites.cuda_library import build_library

    return Library(build_library(source_for(dtype), LIBRARY, arch))


def build_all(arch: tuple[int, int]) -> list[Path]:
    """The op built for every dtype and ``arch`` into the build folder (``kernelopt build-op``)."""
    from kernelopt.capture.rewrites.cuda_library import ensure_built, flags_for

    return [ensure_built(source_for(dtype), LIBRARY, flags_for(arch)) for dtype in DTYPES]


def prebuilt(dtype: torch.dtype, arch: tuple[int, int]) -> bool:
    """Whether the build for ``dtype`` and ``arch`` is already in the build folder (``kernelopt build-op``)."""
    from kernelopt.capture.rewrites.cuda_library import flags_for, library_path

    return library_path(source_for(dtype), LIBRARY, flags_for(arch)).is_file()
