"""kernelopt's row softmax (:mod:`~kernelopt.capture.rewrites.row_softmax_op`): its CUDA source
(``row_softmax_kernel.cu`` after ``cluster_prelude.cuh``, both beside this module), its build and launch.

Two kernels, one row a cluster (sm_90: Hopper's thread-block clusters, co-scheduled by the hardware), each
also built as a row's L2 normalisation (``NORM``: ``x / max(||x||, eps)``, the sum of squares exchanged
instead of the max and the sum of exponentials):
each block of the cluster takes its part of the row, in registers (``kopt_row_softmax``: 512 threads x 32
elements, 16-byte loads where rows are aligned) or in shared memory (``kopt_row_softmax_bulk``: the
part's aligned middle by bulk TMA copies in :data:`BULK_PIECES` pieces, each with its mbarrier, the
elements around it by plain loads; one online pass for the max and the sum, 16-byte stores); the blocks
exchange their partial max and sum through distributed shared memory at one cluster barrier and write
their part of the output. One read of the row, one write.

The source needs no PyTorch header: it is built once per machine, source and GPU architecture by nvcc
alone into a shared library (:mod:`~kernelopt.capture.rewrites.cuda_library`, seconds where ``load_inline`` took
50-60 s a dtype pair on the H200) at the op's first CUDA call, for the architecture of the GPU it runs
on, and launched through ``ctypes`` on PyTorch's current stream.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import torch

from kernelopt.capture import compat

THREADS = 512  # per block: two blocks per SM keep reads in flight while the other one reduces or writes
ITEMS = 32  # elements per thread, compiled: a block holds THREADS * ITEMS elements of a row
MAX_CLUSTER = 8  # the portable cluster size
MIN_BLOCKS = 2  # blocks an SM holds at once (__launch_bounds__): on the H200 1 let a thread take registers enough to leave one block an SM, 1.2-1.5x slower
# the NaN-keeping max's body (PTX max.NaN: one instruction, as fmaxf), named for the test that holds it to fmaxf's cost
NAN_MAX_BODY = 'float r;\n  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));\n  return r;'
# the shared-memory form's threads a block: on an H100 (benchmarks/h100-2026-12-05-cluster) 256 ran as fast
# as 512 or up to 4 % faster at every shape but the 65535-wide norm's (equal) with the op's cluster sizes
BULK_THREADS = 256
# The shared-memory form's build (scripts/device/row_softmax_bulk_probe.py times each; on an H100,
# benchmarks/h100-2026-12-05-bulk-variants): its part of a row arrives in this many bulk copies, each with its
# own mbarrier, the threads folding one piece while the next lands (2 ran 1-4 % faster than 1 on float32
# softmax rows, 4 up to 9 % slower than 2); its exponentials by PTX's ex2.approx of values scaled by
# log2(e), as Triton's float32 exp (so Inductor's) compiles, not expf (10-15 % faster on softmax rows,
# its error within 2x the stock compile's); its output by streaming stores (st.global.cs: evict first),
# not plain ones (2-5 % faster)
BULK_PIECES = 2
BULK_FAST_EXP = True
BULK_STREAMING = True


def packaged(name: str) -> str:
    """One of kernelopt's own CUDA files, beside this module (package data in ``pyproject.toml``): kernels kept
    in files that nvcc and an editor read as CUDA, their placeholders (``__THREADS__`` and the like) filled
    in by the module that builds them."""
    return resources.files("kernelopt.capture.rewrites").joinpath(name).read_text()


# What every kernelopt cluster kernel's source starts with (its own comment says what it holds).
CUDA_PRELUDE = packaged("cluster_prelude.cuh")

CUDA_SOURCE = CUDA_PRELUDE + (
    packaged("row_softmax_kernel.cu")
    .replace("__THREADS__", str(THREADS))
    .replace("__ITEMS__", str(ITEMS))
    .replace("__MIN_BLOCKS__", str(MIN_BLOCKS))
    .replace("__NAN_MAX_BODY__", NAN_MAX_BODY)
)

# each dtype the kernel reads or writes: its C++ type
C_TYPES = {torch.float32: "float", torch.bfloat16: "__nv_bfloat16", torch.float16: "__half"}
DTYPES = tuple(C_TYPES)
# every input and output dtype pair the op launches (one build each): a dtype to itself, and a lower
# precision's to float32 (the op's ``out_float``)
PAIRS = tuple((d, d) for d in DTYPES) + tuple((d, torch.float32) for d in DTYPES if d != torch.float32)
LIBRARY = "kernelopt.row_softmax"  # the builds' name in the build folder


def source_for(
    in_dtype: torch.dtype,
    out_dtype: torch.dtype,
    pieces: int = BULK_PIECES,
    fast_exp: bool = BULK_FAST_EXP,
    streaming: bool = BULK_STREAMING,
) -> str:
    """The CUDA source for one input and output dtype (each pair builds in seconds; all four in one
    source would build every pair's kernels each time); the shared-memory form's pieces, exponentials and
    stores as given (the op's own by default; the probe builds the others)."""
    if pieces < 1:
        raise ValueError(f"pieces must be 1 or more, not {pieces}")
    return (
        CUDA_SOURCE.replace("__IN__", C_TYPES[in_dtype])
        .replace("__OUT__", C_TYPES[out_dtype])
        .replace("__BULK_PIECES__", str(pieces))
        .replace("__BULK_FAST_EXP__", "true" if fast_exp else "false")
        .replace("__BULK_STREAMING__", "true" if streaming else "false")
    )


class BuiltLibrary:
    """A built library of kernelopt's own (every one has ``kopt_error_string``): a launch's CUDA error back
    as a one-line error naming the op."""

    op = "kernelopt.row_softmax"

    def __init__(self, library: ctypes.CDLL) -> None:
        self._error = library.kopt_error_string
        self._error.argtypes = [ctypes.c_int]
        self._error.restype = ctypes.c_char_p

    def _check(self, error: int) -> None:
        if error != 0:
            raise RuntimeError(f"{self.op} launch failed: {self._error(error).decode()} (CUDA error {error})")


class Library(BuiltLibrary):
    """One dtype pair's built kernel, launched through its C entry point (``ctypes``: a few microseconds a
    call, under the op's own Python path)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        super().__init__(library)
        self._launch = library.kopt_row_softmax
        self._launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
        ]  # fmt: skip
        self._launch.restype = ctypes.c_int
        self._bulk = library.kopt_row_softmax_bulk
        self._bulk.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
            ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        ]  # fmt: skip
        self._bulk.restype = ctypes.c_int

    def run(self, x: torch.Tensor, y: torch.Tensor, clusters: int, vectorized: bool, scale: float, log: bool,
            lse: bool, norm: bool = False, eps: float = 0.0) -> None:  # fmt: skip
        """Launch on the current stream of ``x``'s device (contiguous ``x`` and ``y`` of the pair's dtypes):
        the library's CUDA runtime launches on the current device's context. ``norm``: each row's L2
        normalisation, ``x / max(||x||, eps)``, instead of its softmax."""
        cols = x.shape[-1]
        self._check(_on_device(x, lambda stream: self._launch(
            x.data_ptr(), y.data_ptr(), x.numel() // cols, cols, clusters, int(vectorized), scale, int(log),
            int(lse), int(norm), eps, stream,
        )))  # fmt: skip

    def run_bulk(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int, scale: float, log: bool,
                 lse: bool, norm: bool = False, eps: float = 0.0) -> None:  # fmt: skip
        """The shared-memory form, as :meth:`run` launches the register form (``threads``: 256 or 512)."""
        self._check(self._bulk_call(x, y, clusters, threads, scale, log, lse, norm, eps, None))

    def active_clusters(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int) -> int:
        """How many clusters of the shared-memory form's shape for ``x`` the GPU holds at once."""
        active = ctypes.c_int(0)
        self._check(self._bulk_call(x, y, clusters, threads, 1.0, False, False, False, 0.0, active))
        return active.value

    def _bulk_call(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int, scale: float, log: bool,
                   lse: bool, norm: bool, eps: float, active: ctypes.c_int | None) -> int:  # fmt: skip
        cols = x.shape[-1]
        return _on_device(x, lambda stream: int(self._bulk(
            x.data_ptr(), y.data_ptr(), x.numel() // cols, cols, clusters, threads, scale, int(log), int(lse),
            int(norm), eps, stream, ctypes.byref(active) if active is not None else None,
        )))  # fmt: skip


def _on_device(x: torch.Tensor, launch: Callable[[int], int]) -> int:
    """``launch`` given the handle of the current stream of ``x``'s device, that device current: made
    current only where it is not, since a device guard and a Stream object at every call were a large part
    of the op's host time (a launch-bound graph pays it at each call)."""
    device = x.device.index
    assert device is not None, "a CUDA tensor's device has an index"
    if torch.cuda.current_device() == device:
        return launch(compat.raw_stream(device))
    with torch.cuda.device(device):
        return launch(compat.raw_stream(device))


@functools.cache
def launcher(in_dtype: torch.dtype, out_dtype: torch.dtype, arch: tuple[int, int]) -> Library:
    """The built kernel for one dtype pair and GPU architecture, kept: a call then costs no hashing of
    the source (tens of microseconds a call on the host, which a launch-bound graph would pay). Built for
    ``arch``: clusters need sm_90 code."""
    return built(source_for(in_dtype, out_dtype), arch)


def built(source: str, arch: tuple[int, int]) -> Library:
    """``source`` (the op's, or a variant of it a probe times) built for ``arch`` and loaded."""
    from kernelopt.capture.rewrites.cuda_library import build_library

    return Library(build_library(source, LIBRARY, arch))


def prebuilt(in_dtype: torch.dtype, out_dtype: torch.dtype, arch: tuple[int, int]) -> bool:
    """Whether the op's build for this dtype pair and ``arch`` is already in the build folder, so that a
    machine without nvcc can run the op (:func:`build_all` made it on one with nvcc)."""
    from kernelopt.capture.rewrites.cuda_library import flags_for, library_path

    return library_path(source_for(in_dtype, out_dtype), LIBRARY, flags_for(arch)).is_file()


def build_all(arch: tuple[int, int]) -> list[Path]:
    """The op built for every dtype pair it launches (:data:`PAIRS`) and ``arch``, into the build folder
    (``KERNELOPT_CUDA_BUILD_DIR``): ``kernelopt build-op``, for a machine that has no CUDA toolkit to build it."""
    from kernelopt.capture.rewrites.cuda_library import ensure_built, flags_for

    return [ensure_built(source_for(i, o), LIBRARY, flags_for(arch)) for i, o in PAIRS]
