"""Tensors one process lends another: the judge's buffers, opened in the candidate's process.

The judge allocates every input and output buffer a candidate touches and hands
the candidate's process a :class:`SharedTensor` (a storage handle plus the
view's layout), never a copy: the candidate writes where the judge reads, the
judge's references never leave the judge, and gigabyte tensors cost no transfer.
On CUDA the handle is a CUDA IPC handle; on the CPU (tests) a shared-memory file.
The private torch calls behind it live in :mod:`kernelopt.capture.compat`. A root
lender hands the files behind a handle to the user its workers run as
(:func:`kernelopt.workers.identity.lend`), but cannot lend CUDA memory to another user (the
driver refuses: :func:`~kernelopt.workers.identity.check_cuda_lending`); a judge that is itself a worker lends to
a worker of its own user and hands over nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.workers.identity import check_cuda_lending, lend, worker_identity


@dataclass(frozen=True)
class SharedTensor:
    """A view of shared memory: where the storage is, and the view's exact layout."""

    kind: str
    handle: tuple[Any, ...]
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    def open(self) -> torch.Tensor:
        dtype = getattr(torch, self.dtype)
        if self.kind == "empty":  # nothing to share: an empty tensor of the same layout, on the same device
            return torch.empty_strided(self.shape, self.stride, dtype=dtype, device=self.handle[0])
        if self.kind == "cuda":
            torch.cuda.init()  # opening an IPC handle in a process whose CUDA is not yet initialised crashes it
        storage = compat.open_shared_storage(self.kind, self.handle)
        return torch.empty(0, dtype=dtype, device=storage.device).set_(storage, self.offset, self.shape, self.stride)


def share(t: torch.Tensor) -> SharedTensor:
    """Lend ``t`` (its whole storage) to another process. An empty storage has no memory to lend (CUDA
    cannot make a handle for it): the borrower makes its own empty tensor."""
    if t.untyped_storage().nbytes() == 0:
        kind, handle = "empty", (str(t.device),)
    else:
        if t.device.type == "cuda":
            check_cuda_lending(worker_identity())
        kind, handle = compat.share_storage(t.untyped_storage())
        lend(*compat.shared_storage_paths(kind, handle), worker_identity())
    return SharedTensor(
        kind, handle, str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()), int(t.storage_offset())
    )


def share_args(args: Sequence[Any]) -> list[Any]:
    """A kernel's argument list with every tensor replaced by its :class:`SharedTensor`."""
    return [share(a) if isinstance(a, torch.Tensor) else a for a in args]


def open_args(args: Sequence[Any]) -> list[Any]:
    """The inverse of :func:`share_args`, in the borrowing process."""
    return [a.open() if isinstance(a, SharedTensor) else a for a in args]
