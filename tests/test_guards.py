"""Guarded buffers: an out-of-bounds write on either side is caught, bit for bit; layouts are kept.

CPU always; CUDA too where a GPU is present (the same code path)."""

from __future__ import annotations

import math

import pytest
import torch

from kernelopt.capture.guards import (
    GUARD_ELEMENTS,
    guarded_clone,
    guarded_empty_like,
    guards_intact,
    is_guarded,
    sentinel_bytes,
)
from kernelopt.verify._chunks import as_bits

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8,
          torch.bool, torch.complex64)


def _sample(dtype: torch.dtype, device: str, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return (torch.rand(*shape, generator=g) < 0.5).to(device)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    return torch.randint(0, 100, shape, generator=g).to(device=device, dtype=dtype)


def _span(t: torch.Tensor) -> int:
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def _poke(t: torch.Tensor, offset: int) -> None:
    """Write one element at ``offset`` elements from the view's first, past the view if need be."""
    cell = torch.as_strided(t, (1,), (1,), t.storage_offset() + offset)
    cell.copy_(torch.ones(1, dtype=t.dtype, device=t.device) * (0 if t.dtype == torch.bool else 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_write_one_past_either_end_is_caught_and_an_in_bounds_write_is_not(dtype: torch.dtype, device: str) -> None:
    t = _sample(dtype, device, 4, 8)
    g = guarded_clone(t)
    assert torch.equal(g, t) and guards_intact(g) is None
    g.copy_(_sample(dtype, device, 4, 8).flip(0))  # every element of the view, rewritten
    assert guards_intact(g) is None

    after = guarded_clone(t)
    _poke(after, _span(t))
    reason = guards_intact(after)
    assert reason is not None and reason.startswith("guard after the buffer overwritten: 1 of 4096 elements")
    assert "offset +0 past the span's end (32 elements)" in reason

    before = guarded_clone(t)
    _poke(before, -3)
    reason = guards_intact(before)
    assert reason is not None and reason.startswith("guard before the buffer overwritten: 1 of 4096 elements")
    assert "nearest at offset -3" in reason


@pytest.mark.parametrize("device", DEVICES)
def test_the_far_ends_of_the_guards_are_checked_too(device: str) -> None:
    g = guarded_empty_like(torch.empty(10, device=device))
    _poke(g, -GUARD_ELEMENTS)
    assert "offset -4096" in (guards_intact(g) or "")
    g = guarded_empty_like(torch.empty(10, device=device))
    _poke(g, 10 + GUARD_ELEMENTS - 1)
    assert "offset +4095" in (guards_intact(g) or "")


@pytest.mark.parametrize("device", DEVICES)
def test_a_stray_nan_is_caught_although_the_sentinel_is_a_nan(device: str) -> None:
    g = guarded_empty_like(torch.empty(16, device=device))
    guard_cell = torch.as_strided(g, (1,), (1,), g.storage_offset() - 1)
    assert math.isnan(float(guard_cell))  # the sentinel reads as NaN ...
    guard_cell.fill_(math.nan)  # ... but a computed NaN has other bits
    assert not torch.equal(as_bits(guard_cell), as_bits(torch.as_strided(g, (1,), (1,), g.storage_offset() - 2)))
    assert "guard before" in (guards_intact(g) or "")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "layout",
    [
        lambda d: torch.randn(1, 8, device=d).expand(4, 8),  # stride 0
        lambda d: torch.randn(4, 16, device=d)[:, :8],  # gapped rows
        lambda d: torch.randn(8, 4, device=d).t(),  # transposed
        lambda d: torch.randn(20, device=d)[3:15:2],  # storage offset and step
    ],
    ids=["stride-0", "gapped", "transposed", "offset-and-step"],
)
def test_layouts_are_kept_and_the_whole_span_is_copied(layout, device: str) -> None:
    t = layout(device)
    g = guarded_clone(t)
    assert (g.shape, g.stride(), g.dtype, g.device) == (t.shape, t.stride(), t.dtype, t.device)
    assert g.storage_offset() == GUARD_ELEMENTS and g.data_ptr() % 16 == 0
    span = _span(t)
    src = torch.as_strided(t, (span,), (1,), t.storage_offset())
    assert torch.equal(torch.as_strided(g, (span,), (1,), g.storage_offset()), src)  # gaps included
    _poke(g, span - 1)  # the last element of the span is still inside
    assert guards_intact(g) is None


@pytest.mark.parametrize("device", DEVICES)
def test_sentinels_per_dtype_and_an_explicit_one(device: str) -> None:
    def guard_value(g: torch.Tensor) -> torch.Tensor:
        return torch.as_strided(g, (1,), (1,), g.storage_offset() - 1)

    assert int(guard_value(guarded_empty_like(torch.empty(3, dtype=torch.int32, device=device)))) == -(2**31)
    assert int(guard_value(guarded_empty_like(torch.empty(3, dtype=torch.uint8, device=device)))) == 255
    flag = guarded_empty_like(torch.empty(3, dtype=torch.bool, device=device))
    assert int(guard_value(flag).view(torch.uint8)) == 0xA5  # neither True nor False
    seven = guarded_empty_like(torch.empty(3, device=device), 7.0)
    assert float(guard_value(seven)) == 7.0
    _poke(seven, 3)
    assert "guard after" in (guards_intact(seven) or "")
    assert torch.equal(sentinel_bytes(torch.float32), torch.tensor([0x7FC5A5A5], dtype=torch.int32).view(torch.uint8))


def test_only_tensors_handed_out_are_registered() -> None:
    g = guarded_clone(torch.randn(4, 4))
    assert is_guarded(g) and not is_guarded(g[1:]) and not is_guarded(torch.randn(4))
    with pytest.raises(ValueError, match="not allocated by guarded_empty_like"):
        guards_intact(g[1:])
    empty = guarded_empty_like(torch.empty(0, 3))
    assert empty.shape == (0, 3) and guards_intact(empty) is None
    with pytest.raises(ValueError, match="multiple of 16"):
        guarded_empty_like(torch.empty(3), guard=10)


def test_the_registry_does_not_keep_tensors_alive() -> None:
    import gc
    import weakref

    g = guarded_clone(torch.randn(64))
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None
