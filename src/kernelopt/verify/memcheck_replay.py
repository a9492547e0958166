"""The program memcheck watches: one launch of a candidate kernel on recorded arguments.

    compute-sanitizer --tool memcheck ... python -m kernelopt.verify.memcheck_replay DIR

``DIR`` holds the candidate's source and its launch arguments, written by
:func:`kernelopt.verify.memcheck.run_memcheck`. The replay puts every tensor on
the GPU in its recorded shape, strides and dtype, builds the candidate with
Inductor's own loader, launches it once and synchronizes. A kernel file's candidate
(named ``file:ENTRY``) is imported from its own path and its entry runs once on the
file's inputs; a CUDA C++ candidate for a kernel file (``candidate.cu`` beside the file) is built
and bound into the file's slot first, as the candidate's process does it.

Each tensor gets an allocation of its own holding exactly the memory span its
view addresses, starting at the view's first element (the storage offset is
recorded, not reproduced): memcheck knows allocations by their ``cudaMalloc``
bounds, so the first byte past the span, or before it, is out of bounds. The
parent starts this program with PyTorch's caching allocator off
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``); with it on, tensors share large blocks
and a read past one tensor lands inside the block, unseen (so on an H200:
the same unmasked Triton load was reported with the allocator off, clean with it on).

Two lines tell the parent how far the replay got. :data:`READY_MARKER` is printed
once the arguments are on the GPU and before any candidate code runs, so whatever
was printed before it cannot come from the candidate (the parent reads "Device not
supported" only there). :data:`DONE_MARKER` is printed after the launch has
synchronized: a replay that exits early does not count as clean.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

SOURCE_FILE = "candidate.py"
CUDA_FILE = "candidate.cu"  # a kernel file's CUDA C++ candidate; candidate.py is then the original file
ARGS_FILE = "launch.pt"
READY_MARKER = "kernelopt-memcheck-replay: arguments on device"
DONE_MARKER = "kernelopt-memcheck-replay: launch completed"
FILE_PREFIX = "file:"  # a kernel file's replay runs its entry point ("file:launch") on the arguments


def unpack_arguments(entries: list[dict[str, Any]], device: str | torch.device) -> list[Any]:
    """Launch arguments from :func:`kernelopt.verify.memcheck.pack_arguments`' entries, on ``device``.

    A tensor entry becomes a view with its recorded shape and strides at offset 0 of
    a fresh allocation of exactly its span; any other entry is its value.
    """
    args: list[Any] = []
    for entry in entries:
        if "tensor" not in entry:
            args.append(entry["value"])
            continue
        flat: torch.Tensor = entry["tensor"]
        shape, stride = tuple(entry["shape"]), tuple(entry["stride"])
        if flat.numel() == 0:
            args.append(torch.empty_strided(shape, stride, dtype=flat.dtype, device=device))
        else:
            args.append(flat.to(device, copy=True).as_strided(shape, stride, 0))
    return args


def _synchronize(device: str | torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _import_file(path: Path) -> Any:
    """A kernel file imported from its own path (Triton reads a kernel's source back through it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kernelopt_memcheck_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def replay(directory: Path, device: str | torch.device = "cuda") -> None:
    """The replay itself: the arguments on ``device``, the ready line, one launch, the done line.
    A kernel named ``file:ENTRY`` is a kernel file's: its ``ENTRY`` function runs on the arguments."""
    from kernelopt.capture.snapshot import launch
    from kernelopt.capture.swap import build_kernel

    payload = torch.load(directory / ARGS_FILE, weights_only=True)
    args = unpack_arguments(payload["args"], device)
    _synchronize(device)
    print(READY_MARKER, flush=True)
    name = str(payload["kernel"])
    if name.startswith(FILE_PREFIX):
        module = _import_file(directory / SOURCE_FILE)
        if "cuda" in payload:
            from kernelopt.capture.cuda_kernel import build_cuda_kernel
            from kernelopt.capture.cuda_slot import bind_cuda_slot

            slot, runtime = str(payload["cuda"]["slot"]), [str(p) for p in payload["cuda"]["runtime"]]
            bind_cuda_slot(module, slot, build_cuda_kernel((directory / CUDA_FILE).read_text(), slot), runtime)
        getattr(module, name[len(FILE_PREFIX) :])(*args)
    else:
        launch(build_kernel((directory / SOURCE_FILE).read_text(), name), args)
    _synchronize(device)
    print(DONE_MARKER, flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: python -m kernelopt.verify.memcheck_replay DIR (got {argv[1:]})", file=sys.stderr)
        return 2
    replay(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
