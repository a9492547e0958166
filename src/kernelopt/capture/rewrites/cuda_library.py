"""kernelopt's own CUDA code built as a plain shared library by nvcc alone and called through ``ctypes``.

PyTorch's ``load_inline`` (what CUDA C++ candidates build with, :mod:`~kernelopt.capture.cuda_kernel`)
compiles PyTorch's headers and pybind11 bindings with every source: 50-60 s of nvcc a build on a fresh
H200, paid by each dtype pair of the row-softmax op on each fresh machine and in each build folder. A source
that needs no PyTorch types (pointers in, a ``cudaError_t`` back, the stream handed over as a pointer) builds
in seconds instead. The CUDA runtime is linked statically (nvcc's default): it shares the driver's primary
context, and so PyTorch's streams and memory, with PyTorch's own runtime.

Builds live under :func:`~kernelopt.capture.cuda_kernel.build_root`, one folder per source and flags; a
file lock (``filelock``, which PyTorch itself depends on) lets one process build while the others wait for
it, and the library is moved into place whole, so a reader never loads half a file.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.cuda_kernel import CudaBuildError, _first_error, build_root, source_key

BUILD_TIMEOUT_S = 600.0


def flags_for(arch: tuple[int, int]) -> list[str]:
    """nvcc's flags: optimized, position-independent, for exactly ``arch`` (no fast math: the numerics are
    the source's own)."""
    return [
        "-O3",
        "-std=c++17",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        f"-gencode=arch=compute_{arch[0]}{arch[1]},code=sm_{arch[0]}{arch[1]}",
    ]


def library_path(source: str, name: str, flags: Sequence[str]) -> Path:
    """Where the build of ``source`` with nvcc's ``flags`` lives (its folder keyed by source and flags)."""
    key = source_key(f"{source}\n// {' '.join(flags)}")
    return build_root() / f"lib-{key}" / f"{name.replace('.', '_')}.so"


def build_library(source: str, name: str, arch: tuple[int, int]) -> ctypes.CDLL:
    """The library ``source`` builds to for ``arch``, loaded; built now unless a build of it is already
    there (:func:`ensure_built`)."""
    return ctypes.CDLL(str(ensure_built(source, name, flags_for(arch))))


def ensure_built(source: str, name: str, flags: Sequence[str], language: str = "cu") -> Path:
    """Where the library ``source`` builds to with nvcc's ``flags`` (:func:`flags_for` a GPU's architecture,
    or a host build's own) is, built now unless it is already there. A build already in place needs no nvcc:
    one made on a machine with the CUDA toolkit (``kernelopt build-op``) into the folder a machine without one
    reads (``KERNELOPT_CUDA_BUILD_DIR``) is loaded there as it is (the library is moved into place whole, so
    one that exists is complete). ``language``: the source file's suffix ("cpp": host C++ alone, compiled by
    nvcc's host compiler with CUDA's headers)."""
    library = library_path(source, name, flags)
    if library.exists():
        return library
    unable = cuda_toolchain.nvcc_missing()
    if unable is not None:
        raise CudaBuildError(f"this machine cannot build CUDA C++ ({name}): {unable}")
    library.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(library.parent / "build.lock")):
        if not library.exists():
            _compile(source, library, flags, name, f"source.{language}")
    return library


def _compile(source: str, library: Path, flags: Sequence[str], name: str, file: str) -> None:
    folder = library.parent
    (folder / file).write_text(source)
    partial = folder / f"partial-{os.getpid()}.so"
    command = [cuda_toolchain.nvcc(), *flags, file, "-o", partial.name]
    try:
        built = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise CudaBuildError(f"{name} did not compile within {BUILD_TIMEOUT_S:.0f} s") from exc
    if built.returncode != 0:
        partial.unlink(missing_ok=True)
        raise CudaBuildError(f"{name} does not compile: {_first_error(built.stderr + built.stdout)}")
    os.replace(partial, library)  # whole or not at all
