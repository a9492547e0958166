"""Walk big tensors in bounded blocks, so a check never copies a whole tensor.

Outputs compared by the gates can be larger than a gigabyte on a GPU that is
already holding the model. Upcasting such a tensor to float64, or taking
``reshape(-1)`` of a non-contiguous one, would allocate several times its size.
Instead the gates walk both tensors in the same blocks of at most
``CHUNK_ELEMENTS`` elements, in logical row-major order, and upcast one block
at a time. The block plan depends on the shape only, never on the strides, so
two tensors of the same shape yield matching blocks whatever their layouts.
What a check learns per block stays on the device (:class:`BlockStats`) until the
walk is over, and comes back in one transfer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch

CHUNK_ELEMENTS = 1 << 20
"""The smallest block, and the block on the CPU: 8 MiB as float64; a comparison's
temporaries peak near 100 MiB whatever the tensor's size."""
MAX_CHUNK_ELEMENTS = 1 << 24
"""The largest block: 128 MiB as float64, temporaries near 2 GiB."""
BYTES_PER_ELEMENT_BUDGET = 8 * 16 * 8
"""float64 bytes x about 16 live temporaries per element x 8: the temporaries take at
most an eighth of the device's free memory."""


def chunk_elements_for_free(free_bytes: int) -> int:
    """The block size for a device with ``free_bytes`` free: the largest power of two whose
    temporaries fit an eighth of it, between CHUNK_ELEMENTS and MAX_CHUNK_ELEMENTS.

    Each block costs a dozen-odd kernel launches whatever its size: on the H200, 1 Mi
    blocks made gate 2 on row-L2's 8.6 GB output launch-bound (4.8 s a candidate,
    36864 ``isfinite`` calls in cProfile), so blocks grow when memory allows."""
    fit = max(1, int(free_bytes) // BYTES_PER_ELEMENT_BUDGET)
    return max(CHUNK_ELEMENTS, min(MAX_CHUNK_ELEMENTS, 1 << (fit.bit_length() - 1)))


def chunk_elements_for(t: torch.Tensor) -> int:
    """The block size for comparing tensors on ``t``'s device (CHUNK_ELEMENTS off the GPU)."""
    if t.device.type != "cuda":
        return CHUNK_ELEMENTS
    free, _total = torch.cuda.mem_get_info(t.device)
    return chunk_elements_for_free(free)


Index = tuple[object, ...]


def blocks(shape: Sequence[int], limit: int = CHUNK_ELEMENTS) -> Iterator[tuple[int, Index]]:
    """``(offset, index)`` pairs: ``t[index].reshape(-1)`` is the block starting at row-major ``offset``.

    Blocks cover every element exactly once, in order; each holds at most
    ``limit`` elements (at least one whole innermost element).
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    dims = tuple(int(d) for d in shape)
    if math.prod(dims) == 0:
        return
    if not dims:
        yield 0, ()
        return
    yield from _blocks((), dims, 0, limit)


def _blocks(prefix: Index, dims: tuple[int, ...], offset: int, limit: int) -> Iterator[tuple[int, Index]]:
    inner = math.prod(dims[1:])
    if dims[0] * inner <= limit:
        yield offset, prefix
        return
    if inner <= limit:
        step = max(1, limit // inner)
        for start in range(0, dims[0], step):
            yield offset + start * inner, prefix + (slice(start, min(start + step, dims[0])),)
        return
    for i in range(dims[0]):
        yield from _blocks(prefix + (i,), dims[1:], offset + i * inner, limit)


def flat(t: torch.Tensor, index: Index) -> torch.Tensor:
    """The block of ``t`` at ``index`` as a 1-D tensor (a view when the block is contiguous)."""
    return t[index].reshape(-1)  # type: ignore[index]  # Index holds ints and slices


def unravel(position: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major flat position -> multi-dimensional index."""
    out: list[int] = []
    for size in reversed(tuple(shape)):
        out.append(position % size)
        position //= size
    return tuple(reversed(out))


_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(block: torch.Tensor) -> torch.Tensor:
    """A 1-D block reinterpreted as signed integers of its width, for bitwise comparison.

    Complex elements become two integers each (shape ``(n, 2)``). Comparing bits
    rather than values makes NaN equal to the same NaN and ``-0.0`` differ from
    ``0.0``, which is what "did this memory change" means.
    """
    if block.dtype.is_complex:
        block = torch.view_as_real(block)
    if block.dtype == torch.bool:
        block = block.view(torch.uint8)
    return block.view(_BITS[block.dtype.itemsize])


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """Position of the first True in a 1-D mask (0 when there is none), without a host sync."""
    return torch.argmax(mask.to(torch.uint8))


class BlockStats:
    """Per-block statistics kept on the device and read back in one transfer (no host sync per block)."""

    def __init__(self) -> None:
        self.rows: list[torch.Tensor] = []
        self.offsets: list[int] = []

    def add(self, offset: int, *values: torch.Tensor) -> None:
        self.offsets.append(offset)
        self.rows.append(torch.stack([v.to(torch.float64) for v in values]))

    def read(self) -> list[list[float]]:
        return torch.stack(self.rows).cpu().tolist()

    @staticmethod
    def first(rows: list[list[float]], offsets: list[int], count: int, pos: int) -> tuple[int, int | None]:
        """Total of column ``count`` and the global position of the first hit (column ``pos``)."""
        total, first = 0, None
        for row, offset in zip(rows, offsets):
            if row[count] > 0:
                total += int(row[count])
                if first is None:
                    first = offset + int(row[pos])
        return total, first

    @staticmethod
    def worst(rows: list[list[float]], offsets: list[int], value: int, pos: int) -> tuple[float, int | None]:
        """Largest column ``value`` over blocks and its global position (None when all are < 0)."""
        best, where = -1.0, None
        for row, offset in zip(rows, offsets):
            if row[value] > best:
                best, where = row[value], offset + int(row[pos])
        return best, where
