"""The program memcheck watches: one launch of a candidate kernel on recorded arguments.

    compute-sanitizer --tool memcheck ... python -m kernelopt.verify.memcheck_replay DIR

``DIR`` holds the candidate's source and its launch arguments, written by
:func:`kernelopt.verify.memcheck.run_memcheck`. The replay puts every tensor on
the GPU in its recorded shape, strides and dtype, builds the candidate with
Inductor's own loader, launches it once and synchronizes.

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
ARGS_FILE = "launch.pt"
READY_MARKER = "kernelopt-memcheck-replay: arguments on device"
DONE_MARKER = "kernelopt-memcheck-replay: launch completed"


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


def main(argv: list[str]) -> int:
    from kernelopt.capture.snapshot import launch
    from kernelopt.capture.swap import build_kernel

    if len(argv) != 2:
        print(f"usage: python -m kernelopt.verify.memcheck_replay DIR (got {argv[1:]})", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    payload = torch.load(directory / ARGS_FILE, weights_only=True)
    args = unpack_arguments(payload["args"], "cuda")
    torch.cuda.synchronize()
    print(READY_MARKER, flush=True)
    kernel = build_kernel((directory / SOURCE_FILE).read_text(), payload["kernel"])
    launch(kernel, args)
    torch.cuda.synchronize()
    print(DONE_MARKER, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
