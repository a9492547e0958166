"""``kernelopt.group_norm``'s host path in C++: the op's CUDA kernel at the dispatcher, no Python between it
and the launch for a signature already planned.

A compiled graph that calls the op pays its host path at every call. Through Python (the dispatcher boxing
13 arguments into Python objects, the signature's tuple, the plan's lookup, ``torch.empty``, ctypes) it took
70 µs more of host a forward than Inductor's two launches it replaces at level2/13 on the H100 (177.5 µs
against 107.7 in a loop), so that a candidate 1.20x faster on the device was refused host-bound at gate 4.
The kernel in ``group_norm_host.cpp`` keeps a plan for each signature it has seen and launches through the
op's CUDA library directly; a signature it has not seen goes to ``kernelopt::group_norm_planned`` (the op's
Python path: its checks, its plan, its fallbacks and their counts), which hands back the plans the C++
kernel may launch (:meth:`Host.keep`). Python's path stays the op's whole behaviour; the C++ kernel only
repeats a launch Python planned.

Built by nvcc as host C++ against the running torch's headers and libraries (seconds; no pybind11, no
``torch.utils.cpp_extension``, which would need ninja), into the same build folder as the op's kernels, and
loaded with ctypes. :mod:`~kernelopt.capture.rewrites.group_norm_op` puts it at the op's CUDA key
(:func:`~kernelopt.capture.rewrites.group_norm_op.use_host`).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites.group_norm_kernel import LaunchShape, Library
from kernelopt.capture.rewrites.row_softmax_kernel import packaged

LIBRARY = "kernelopt.group_norm_host"


def source(plans_kept: int) -> str:
    """The C++ source, keeping at most ``plans_kept`` plans (as Python's path does), for the running torch
    (its version in the text, so that an upgrade builds afresh)."""
    text = packaged("group_norm_host.cpp")
    return f"// torch {torch.__version__}\n" + text.replace("__PLANS_KEPT__", str(plans_kept))


def torch_paths() -> tuple[list[Path], Path]:
    """torch's header folders and its library folder (``torch.utils.cpp_extension``'s ``include_paths()``
    and ``library_paths()``, without importing it: setuptools at every import of the op)."""
    root = Path(torch.__file__).parent
    return [root / "include", root / "include" / "torch" / "csrc" / "api" / "include"], root / "lib"


def flags() -> list[str]:
    """nvcc's flags: host C++ as torch's own extensions are built (C++20, torch's ABI), linked against the
    libraries the kernel calls (the dispatcher and ``at::empty``: torch_cpu and c10; the stream and the
    device guard: c10_cuda), found at run time where torch has them."""
    includes, lib = torch_paths()
    return [
        "-O2", "-std=c++20", "-shared", "-Xcompiler", "-fPIC",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(compat.cxx11_abi())}",
        *(f"-I{folder}" for folder in includes),
        f"-L{lib}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-Xlinker", f"-rpath={lib}",
    ]  # fmt: skip


def library_path(plans_kept: int) -> Path:
    """Where the build lives (keyed by source and flags, in the op's build folder)."""
    from kernelopt.capture.rewrites.cuda_library import library_path as path_of

    return path_of(source(plans_kept), LIBRARY, flags())


def build(plans_kept: int) -> Path:
    """The build, made now unless it is already there (a ``CudaBuildError`` naming why not)."""
    from kernelopt.capture.rewrites.cuda_library import ensure_built

    return ensure_built(source(plans_kept), LIBRARY, flags(), language="cpp")  # one build whatever the GPU


class Host:
    """The loaded build: its registration at the op's CUDA key, the plans it keeps and its counts."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._library = library
        library.kopt_gn_register.restype = ctypes.c_int
        library.kopt_gn_last_error.restype = ctypes.c_char_p
        self._keep = library.kopt_gn_keep
        self._keep.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
            ctypes.c_int64,
        ]  # fmt: skip
        self._keep.restype = ctypes.c_int

    def register(self) -> str | None:
        """The C++ kernel at ``kernelopt::group_norm``'s CUDA key (none may be there already); why not, else
        None."""
        if self._library.kopt_gn_register() != 0:
            return f"the C++ host path did not register: {self._library.kopt_gn_last_error().decode()}"
        return None

    def unregister(self) -> None:
        """The C++ kernel off the op's CUDA key (its plans kept, should it come back)."""
        self._library.kopt_gn_unregister()

    def keep(self, library: Library, shape: LaunchShape) -> bool:
        """Keep the launch of a plan for the signature the C++ kernel handed Python's path on this thread:
        False where it handed none (Python's path called otherwise)."""
        launch, error = library.addresses()
        return bool(self._keep(
            launch, error, shape.params_float, shape.strides, shape.rows, shape.cols, shape.hw, shape.per_group,
            shape.groups, shape.clusters, shape.form, shape.channels_last, shape.in_flight,
        ))  # fmt: skip

    def counts(self) -> tuple[int, int, int]:
        """Plans kept, calls the C++ kernel launched, calls it handed to Python's path."""
        out = (ctypes.c_int64 * 3)()
        self._library.kopt_gn_counts(out)
        return out[0], out[1], out[2]


@functools.cache
def load(plans_kept: int) -> Host:
    """The build loaded (made now unless it is there; ``CudaBuildError`` or ``OSError`` naming why not),
    once a process: its plans and registration are the process's."""
    return Host(ctypes.CDLL(str(build(plans_kept))))
