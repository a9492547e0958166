"""CUDA C++ candidates for a Triton kernel's slot: built with ``load_inline``, launched in its place.

A CUDA C++ candidate is a source file whose first line is :data:`CUDA_MARKER`. It holds one or
more ``__global__`` kernels and one host function ``void launch(...)`` taking the Triton kernel's
runtime parameters in order (a ``torch::Tensor`` per pointer, a scalar per size); gate 1 reads it
first (:mod:`kernelopt.verify.static_cuda`). :func:`build_cuda_kernel` compiles it with PyTorch's
``torch.utils.cpp_extension.load_inline`` (nvcc and ninja, the tools PyTorch's own extensions
use) into a build folder named by the source's hash, so the same source builds once per user
and machine, and wraps ``launch`` in a launcher with a Triton kernel's ``run(*args, stream=...)``:
the wrapper, the gates' sub-kernel runs and the timers call it exactly as they call Inductor's.
The kernel must launch on the current stream, which is the one the wrapper passes.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelopt.capture import cuda_toolchain

CUDA_MARKER = "// kernelopt: cuda"
_LAUNCH = re.compile(r"\bvoid\s+launch\s*\(([^()]*)\)\s*\{")
_BUILT: dict[str, Any] = {}  # source hash -> the loaded extension, per process


class CudaBuildError(Exception):
    """The candidate did not compile; the message is nvcc's first error, for the Repairer."""


def is_cuda_source(source: str) -> bool:
    """Whether ``source`` is a CUDA C++ candidate (its first non-blank line is the marker)."""
    for line in source.splitlines():
        if line.strip():
            return line.strip() == CUDA_MARKER
    return False


def launch_prototype(source: str) -> str:
    """The declaration of the source's ``launch`` for the generated bindings."""
    found = _LAUNCH.search(source)
    if found is None:
        raise CudaBuildError("the source defines no host function `void launch(...) {`")
    params = " ".join(found.group(1).split())
    return f"#include <torch/extension.h>\nvoid launch({params});\n"


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def build_root() -> Path:
    """Where builds live: ``KERNELOPT_CUDA_BUILD_DIR`` (workers get the workers' user's own cache folder
    from :func:`~kernelopt.pipeline.evaluator.compile_cache_env`, shared by every worker and run), else a
    folder of this user's under the temp dir: a user's own process (``kernelopt.load_kernel``) never loads
    a library that a worker of another user built."""
    configured = os.environ.get("KERNELOPT_CUDA_BUILD_DIR")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"kernelopt-cuda-{os.getuid()}"


class CudaLauncher:
    """A built candidate with a Triton launcher's call shape: ``run(*args, stream=...)``."""

    def __init__(self, fn: Any, name: str, build_s: float, key: str) -> None:
        self._fn = fn
        self.__name__ = name
        self.build_s = build_s  # seconds nvcc took (0.0: a cached build), reported apart from evaluation
        self.key = key

    def run(self, *args: Any, stream: Any = None, **_: Any) -> None:
        self._fn(*args)


def _first_error(text: str) -> str:
    """The compiler's first ``file(line): error: ...`` line, else the first line that says error."""
    lines = text.splitlines()
    for line in lines:
        if re.search(r"(?:\)|:\d+:\d*):?\s*(?:fatal )?error\b", line):
            return line.strip()[:400]
    for line in lines:
        if "error" in line.lower() and not line.startswith("Error building extension"):
            return line.strip()[:400]
    return " ".join(text.split())[:400] or "no compiler output"


def build_cuda_kernel(source: str, name: str, arch: tuple[int, int] | None = None) -> CudaLauncher:
    """Compile (or reuse the build of) a CUDA C++ candidate and return its launcher. ``arch``: the
    compute capability to build for, whatever ``TORCH_CUDA_ARCH_LIST`` says (kernelopt's own ops, which
    use features of that architecture: a list without it would build a library that cannot launch);
    without it, PyTorch's choice (that variable, else the visible GPUs)."""
    flags = ["-O3"]  # no fast math: the candidate's numerics are its own source's
    if arch is not None:
        flags.append(f"-gencode=arch=compute_{arch[0]}{arch[1]},code=sm_{arch[0]}{arch[1]}")
    key = source_key(source if arch is None else f"{source}\n// {' '.join(flags)}")
    started = time.monotonic()
    module = _BUILT.get(key)
    if module is None:
        from torch.utils.cpp_extension import load_inline

        unable = cuda_toolchain.missing()
        if unable is not None:
            raise CudaBuildError(f"this machine cannot build CUDA C++ ({name}): {unable}")
        cuda_toolchain.ensure_ninja()
        folder = build_root() / key
        folder.mkdir(parents=True, exist_ok=True)
        try:
            module = load_inline(
                name=f"kopt_cuda_{key}",
                cpp_sources=launch_prototype(source),
                cuda_sources=source,
                functions=["launch"],
                build_directory=str(folder),
                extra_cuda_cflags=flags,  # with a -gencode, PyTorch adds no architectures of its own
                verbose=False,
            )
        except Exception as exc:  # nvcc's output is in the message: its first error goes to the Repairer
            raise CudaBuildError(f"candidate for {name} does not compile: {_first_error(str(exc))}") from exc
        _BUILT[key] = module
    return CudaLauncher(module.launch, name, time.monotonic() - started, key)
