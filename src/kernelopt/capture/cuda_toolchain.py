"""Whether this machine can build CUDA C++ as kernelopt does: PyTorch's ``load_inline`` for candidates,
which drives nvcc (found through PyTorch's ``CUDA_HOME``) with ninja, and nvcc alone for kernelopt's own op.

A GPU machine with PyTorch from pip has the CUDA runtime but often no toolkit. Every CUDA C++ build
there fails (an LLM's candidate in a kernel's slot, kernelopt's own row-softmax op), so it is asked
before one is tried: the Planner is told not to plan CUDA C++, the cluster-softmax rewrite refuses in
one line, a build says what to install, and ``kernelopt doctor`` lists it.
"""

from __future__ import annotations

import functools
import os
import shutil


@functools.cache
def missing() -> str | None:
    """Why this machine cannot build CUDA C++ candidates (``load_inline``: nvcc and ninja; what to
    install), or None where it can; asked once."""
    unable = nvcc_missing()
    if unable is not None:
        return unable
    if ninja_dir() is None:
        return "no ninja (PyTorch's extensions build with it): pip install ninja"
    return None


def nvcc() -> str:
    """nvcc's path, as PyTorch finds it (``CUDA_HOME``); where there is none, :func:`nvcc_missing` says so."""
    from torch.utils import cpp_extension

    return os.path.join(cpp_extension.CUDA_HOME or "", "bin", "nvcc")


@functools.cache
def nvcc_missing() -> str | None:
    """Why this machine has no nvcc (what kernelopt's own op builds with, :mod:`~kernelopt.capture.rewrites.cuda_library`),
    or None where it has; asked once."""
    from torch.utils import cpp_extension

    home = cpp_extension.CUDA_HOME
    if home is None:
        return (
            "PyTorch finds no CUDA toolkit (a CPU build of torch, or CUDA_HOME unset and no nvcc on PATH): "
            "install the CUDA toolkit and set CUDA_HOME"
        )
    if not os.path.isfile(nvcc()):
        return f"no nvcc at {nvcc()} (PyTorch's CUDA_HOME is {home}): install the CUDA toolkit there or set CUDA_HOME"
    return None


def ninja_dir() -> str | None:
    """The folder of the ninja binary: on PATH, or the ``ninja`` wheel's (which puts it outside PATH)."""
    found = shutil.which("ninja")
    if found is not None:
        return os.path.dirname(found)
    try:
        import ninja  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return str(ninja.BIN_DIR)


def ensure_ninja() -> None:
    """Put ninja on PATH for ``load_inline`` where only the wheel has it (checked by :func:`missing`)."""
    folder = ninja_dir()
    if folder is not None and shutil.which("ninja") is None:
        os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
