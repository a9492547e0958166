"""Guarded buffers: a tensor with poisoned memory on both sides, to catch out-of-bounds writes.

A kernel that writes past its view (a store whose mask was dropped, an index
off by one row) can land in memory nobody reads back, and pass every value
comparison. Here the view's whole span is allocated inside a larger buffer
whose guard regions before and after hold a sentinel; after the kernel ran,
:func:`guards_intact` checks the guards bit for bit and names the side and the
first element that changed.

The returned view keeps the shape, strides and dtype it was asked for
(stride-0 and gapped views included), so an Inductor kernel indexes it exactly
as it would the original. Its storage offset is the guard length; guards are
a multiple of 16 bytes long, so the view's data pointer keeps the 16-byte
alignment Triton specialises on.

Sentinels are compared as bits, not values: the default float sentinel is a
quiet NaN with a payload (not the canonical NaN any arithmetic produces), so a
stray store of NaN is seen too. Integers get the dtype's minimum (signed) or
maximum (unsigned); bool bytes get 0xA5, which is neither True nor False.

The guard layout of each tensor handed out is kept in a registry keyed by the
tensor object itself (weakly), so a caller checks exactly the tensor it got;
a view derived from it is not registered.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

GUARD_ELEMENTS = 4096
"""Elements of guard on each side (a multiple of 16, so alignment survives for any itemsize)."""

_PAYLOAD_NAN_BITS: dict[torch.dtype, int] = {
    torch.float64: 0x7FF8_A5A5_A5A5_A5A5,
    torch.float32: 0x7FC5_A5A5,
    torch.float16: 0x7E5A,
    torch.bfloat16: 0x7FE5,
}
_INT_OF_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class _Guard:
    buffer: Tensor  # the whole allocation, as bytes
    pattern: Tensor  # one element's sentinel, as bytes
    guard: int  # guard elements on each side
    span: int  # elements of the view's span
    itemsize: int


_REGISTRY: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _span(t: Tensor) -> int:
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def sentinel_bytes(dtype: torch.dtype, sentinel: float | int | bool | None = None) -> Tensor:
    """One element of ``dtype`` holding ``sentinel`` (None: the default poison), as uint8 bytes on the CPU."""
    if sentinel is not None:
        return torch.tensor([sentinel], dtype=dtype).view(torch.uint8)
    if dtype in _PAYLOAD_NAN_BITS:
        bits = _PAYLOAD_NAN_BITS[dtype]
        width = _INT_OF_WIDTH[dtype.itemsize]
        signed = bits - (1 << (8 * dtype.itemsize)) if bits >= 1 << (8 * dtype.itemsize - 1) else bits
        return torch.tensor([signed], dtype=width).view(torch.uint8)
    if dtype == torch.bool:
        return torch.tensor([0xA5], dtype=torch.uint8)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.full((1,), float("nan"), dtype=dtype).view(torch.uint8)
    info = torch.iinfo(dtype)
    return torch.tensor([info.min if info.min < 0 else info.max], dtype=dtype).view(torch.uint8)


def guarded_empty_like(t: Tensor, sentinel: float | int | bool | None = None, *, guard: int = GUARD_ELEMENTS) -> Tensor:
    """An uninitialised tensor with ``t``'s shape, strides, dtype and device, inside poisoned guards.

    ``guard`` elements before and after the view's span hold ``sentinel``
    (None: the default poison described in the module docstring). Check them
    with :func:`guards_intact`.
    """
    if guard < 0 or guard % 16:
        raise ValueError(f"guard must be a non-negative multiple of 16 elements, got {guard}")
    itemsize = t.element_size()
    span = _span(t)
    pattern = sentinel_bytes(t.dtype, sentinel).to(t.device)
    buffer = torch.empty((2 * guard + span) * itemsize, dtype=torch.uint8, device=t.device)
    for start in (0, (guard + span) * itemsize):
        buffer[start : start + guard * itemsize].view(guard, itemsize).copy_(pattern.expand(guard, itemsize))
    view = buffer.view(t.dtype).as_strided(t.shape, t.stride(), guard)
    _REGISTRY[view] = _Guard(buffer, pattern, guard, span, itemsize)
    return view


def guarded_clone(t: Tensor, sentinel: float | int | bool | None = None, *, guard: int = GUARD_ELEMENTS) -> Tensor:
    """A copy of ``t`` in its exact layout (the whole span, gaps included) inside poisoned guards."""
    out = guarded_empty_like(t, sentinel, guard=guard)
    span = _span(t)
    if span:
        src = torch.as_strided(t, (span,), (1,), t.storage_offset())
        torch.as_strided(out, (span,), (1,), out.storage_offset()).copy_(src)
    return out


def is_guarded(t: Tensor) -> bool:
    """True for a tensor returned by :func:`guarded_empty_like` or :func:`guarded_clone`."""
    return t in _REGISTRY


def guards_intact(t: Tensor) -> str | None:
    """None when both guards of ``t`` still hold the sentinel bit for bit, else a one-line reason.

    The reason names the side and the changed element nearest the view
    (offsets in elements: negative before the view's first element, counted
    from its span's end after it). ``t`` must be a tensor this module handed
    out (ValueError otherwise: checking an unguarded tensor is a caller's bug).
    """
    info = _REGISTRY.get(t)
    if info is None:
        raise ValueError("guards_intact: this tensor was not allocated by guarded_empty_like or guarded_clone")
    size = info.guard * info.itemsize
    expected = info.pattern.expand(info.guard, info.itemsize)
    before = info.buffer[:size].view(info.guard, info.itemsize)
    after = info.buffer[size + info.span * info.itemsize :].view(info.guard, info.itemsize)
    changed_before = (before != expected).any(dim=1)
    changed_after = (after != expected).any(dim=1)
    counts = torch.stack([changed_before.sum(), changed_after.sum()]).tolist()
    if counts[0]:
        nearest = info.guard - 1 - int(torch.argmax(changed_before.flip(0).to(torch.uint8)).item())
        return (
            f"guard before the buffer overwritten: {counts[0]} of {info.guard} elements changed, "
            f"nearest at offset {nearest - info.guard} (elements before the view's first)"
        )
    if counts[1]:
        nearest = int(torch.argmax(changed_after.to(torch.uint8)).item())
        return (
            f"guard after the buffer overwritten: {counts[1]} of {info.guard} elements changed, "
            f"nearest at offset +{nearest} past the span's end ({info.span} elements)"
        )
    return None
