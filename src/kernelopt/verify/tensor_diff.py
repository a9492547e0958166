"""How one output of the candidate differs from the original's, element by element.

The comparison behind gate 2's verdict on outputs (:mod:`kernelopt.verify.correctness`):
layout first (shape, dtype, strides: Inductor's launcher and the kernels after this
one read the buffer with the original's strides), then NaN exactly where the
original has NaN, so an element the candidate never wrote (still the
:func:`~kernelopt.verify.correctness.nan_fill_` sentinel) is named exactly, ±Inf
where it has the same ±Inf, and every finite element within the dtype's tolerance
(integers and bools: equal). Outputs can be gigabytes, so both tensors are walked in
bounded blocks (:mod:`kernelopt.verify._chunks`) and upcast one block at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from kernelopt.verify import _format as fmt
from kernelopt.verify._chunks import BlockStats, as_bits, blocks, chunk_elements_for, first_true, flat, unravel
from kernelopt.verify.tolerance import Tolerance, tolerance_for


@dataclass(frozen=True)
class TensorDiff:
    """How one output of the candidate differs from the original's.

    ``reason`` is None when they match. ``max_abs_err`` and ``max_rel_err`` are
    taken over the elements finite in both (NaN when the layouts differ, so
    nothing was compared); the relative error's denominator is
    ``max(|original|, effective atol)`` so near-zero elements do not explode it.
    ``mismatched`` counts elements that broke any rule.
    """

    name: str
    numel: int
    reason: str | None
    max_abs_err: float
    max_rel_err: float
    mismatched: int

    @property
    def matched(self) -> bool:
        return self.reason is None

    def to_dict(self) -> dict[str, object]:
        return {
            "numel": self.numel,
            "mismatched": self.mismatched,
            "max_abs_err": fmt.finite_or_none(self.max_abs_err),
            "max_rel_err": fmt.finite_or_none(self.max_rel_err),
        }


def compare_tensor(name: str, expected: Tensor, actual: Tensor, tol: Tolerance | None = None) -> str | None:
    """None when ``actual`` (the candidate's) matches ``expected`` (the original's); else a one-line reason.

    ``tol`` defaults to :func:`tolerance_for` of the dtype. See :func:`diff_tensor`.
    """
    return diff_tensor(name, expected, actual, tol).reason


def diff_tensor(
    name: str,
    expected: Tensor,
    actual: Tensor,
    tol: Tolerance | None = None,
    *,
    chunk_elements: int | None = None,
) -> TensorDiff:
    """Compare two outputs element by element, in blocks of ``chunk_elements``.

    Rules, reported in this order: same shape, dtype and strides; NaN exactly
    where the original has NaN; ±Inf exactly where the original has the same
    ±Inf; every finite element within ``tol`` (integer and bool: equal). The
    two tensors may live on different devices (blocks of ``actual`` move to
    ``expected``'s), so an original result parked in host memory still works.
    Memory: a few float64 blocks of ``chunk_elements`` (None: sized to the device's
    free memory, :func:`chunk_elements_for`), never a whole upcast.
    """
    layout = _layout_mismatch(name, expected, actual)
    if layout is not None:
        return TensorDiff(name, expected.numel(), layout, math.nan, math.nan, expected.numel())
    tol = tolerance_for(expected.dtype) if tol is None else tol
    if expected.numel() == 0:
        return TensorDiff(name, 0, None, 0.0, 0.0, 0)
    chunk_elements = chunk_elements or chunk_elements_for(expected)
    exact = not (expected.dtype.is_floating_point or expected.dtype.is_complex) and tol.exact
    if exact:
        return _diff_exact(name, expected, actual, chunk_elements)
    return _diff_inexact(name, expected, actual, tol, chunk_elements)


def _layout_mismatch(name: str, expected: Tensor, actual: Tensor) -> str | None:
    if expected.shape != actual.shape:
        return f"{name}: shape {tuple(actual.shape)} differs from the original's {tuple(expected.shape)}"
    if expected.dtype != actual.dtype:
        return f"{name}: dtype {actual.dtype} differs from the original's {expected.dtype}"
    if _significant_strides(expected) != _significant_strides(actual):
        return f"{name}: strides {actual.stride()} differ from the original's {expected.stride()}"
    return None


def _significant_strides(t: Tensor) -> tuple[int | None, ...]:
    """Strides that decide the memory layout: those of size-1 dims and of empty tensors do not."""
    if t.numel() == 0:
        return ()
    return tuple(stride if size > 1 else None for size, stride in zip(t.shape, t.stride()))


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.complex128 if dtype.is_complex else torch.float64


def _value(t: Tensor, position: tuple[int, ...]) -> str:
    element = t[position]
    if t.dtype.is_complex:
        return str(complex(element.to(torch.complex128).item()))
    if t.dtype.is_floating_point:
        return fmt.number(element.to(torch.float64).item())
    return str(element.item())


def _diff_exact(name: str, expected: Tensor, actual: Tensor, chunk: int) -> TensorDiff:
    """Integer and bool outputs: any difference fails; the float64 errors are for the report only."""
    acc = BlockStats()
    for offset, index in blocks(expected.shape, chunk):
        e = flat(expected, index)
        a = flat(actual, index).to(e.device)
        differs = as_bits(e) != as_bits(a)
        diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
        flagged = torch.where(differs, diff, -1.0)
        rel = diff / e.to(torch.float64).abs().clamp_min(1.0)
        acc.add(offset, differs.sum(), flagged.max(), flagged.argmax(), diff.max(), rel.max())
    rows = acc.read()
    numel = expected.numel()
    mismatched = sum(int(r[0]) for r in rows)
    max_abs = max(r[3] for r in rows)
    max_rel = max(r[4] for r in rows)
    if mismatched == 0:
        return TensorDiff(name, numel, None, max_abs, max_rel, 0)
    worst, where = BlockStats.worst(rows, acc.offsets, 1, 2)
    assert where is not None
    position = unravel(where, expected.shape)
    reason = (
        f"{name}: {mismatched} of {numel} elements differ (exact comparison for {expected.dtype}); "
        f"max abs err {fmt.number(worst)} at index {fmt.index(position)} "
        f"(original {_value(expected, position)}, candidate {_value(actual, position)})"
    )
    return TensorDiff(name, numel, reason, max_abs, max_rel, mismatched)


def _max_abs_finite(t: Tensor, chunk: int) -> float:
    """Largest finite magnitude of ``t`` (0 when none), the scale of the absolute tolerance."""
    maxima = []
    for _, index in blocks(t.shape, chunk):
        block = flat(t, index).to(_wide(t.dtype))
        maxima.append(torch.where(torch.isfinite(block), block.abs(), 0.0).max())
    return float(torch.stack(maxima).max().item())


def _diff_inexact(name: str, expected: Tensor, actual: Tensor, tol: Tolerance, chunk: int) -> TensorDiff:
    scale = max(1.0, _max_abs_finite(expected, chunk))
    atol = tol.effective_atol(scale)
    rel_floor = max(atol, 1e-300)
    wide = _wide(expected.dtype)
    acc = BlockStats()
    for offset, index in blocks(expected.shape, chunk):
        e = flat(expected, index).to(wide)
        a = flat(actual, index).to(device=e.device, dtype=wide)
        e_nan, a_nan = torch.isnan(e), torch.isnan(a)
        both_finite = torch.isfinite(e) & torch.isfinite(a)
        unwritten = a_nan & torch.isfinite(e)
        lost_nan = e_nan & torch.isfinite(a)
        special = ~both_finite & ~(e_nan & a_nan) & ~unwritten & ~lost_nan & (e != a)
        e_abs = e.abs()
        diff = torch.where(both_finite, (a - e).abs(), 0.0)
        beyond = diff > atol + tol.rtol * torch.where(both_finite, e_abs, 0.0)
        flagged = torch.where(beyond, diff, -1.0)
        rel = diff / e_abs.nan_to_num(posinf=0.0).clamp_min(rel_floor)
        acc.add(
            offset,
            unwritten.sum(), first_true(unwritten),
            lost_nan.sum(), first_true(lost_nan),
            special.sum(), first_true(special),
            beyond.sum(), flagged.max(), flagged.argmax(),
            diff.max(), rel.max(),
        )  # fmt: skip
    rows, offsets = acc.read(), acc.offsets
    numel = expected.numel()
    max_abs = max(r[9] for r in rows)
    max_rel = max(r[10] for r in rows)
    n_unwritten, first_unwritten = BlockStats.first(rows, offsets, 0, 1)
    n_lost, first_lost = BlockStats.first(rows, offsets, 2, 3)
    n_special, first_special = BlockStats.first(rows, offsets, 4, 5)
    n_beyond = sum(int(r[6]) for r in rows)
    mismatched = n_unwritten + n_lost + n_special + n_beyond

    def at(position: int) -> tuple[int, ...]:
        return unravel(position, expected.shape)

    reason: str | None = None
    if first_unwritten is not None:
        reason = (
            f"{name}: {n_unwritten} of {numel} elements NaN where the original wrote finite values "
            f"(unwritten output?); first at index {fmt.index(at(first_unwritten))}"
        )
    elif first_lost is not None:
        reason = (
            f"{name}: {n_lost} of {numel} elements finite where the original has NaN; "
            f"first at index {fmt.index(at(first_lost))}"
        )
    elif first_special is not None:
        position = at(first_special)
        reason = (
            f"{name}: {n_special} of {numel} elements disagree with the original on Inf/NaN; "
            f"first at index {fmt.index(position)}: original {_value(expected, position)}, "
            f"candidate {_value(actual, position)}"
        )
    elif n_beyond:
        worst, where = BlockStats.worst(rows, offsets, 7, 8)
        assert where is not None
        position = at(where)
        atol_text = fmt.number(tol.atol)
        if scale > 1.0:
            atol_text = f"{fmt.number(atol)} ({fmt.number(tol.atol)} x max|original| {fmt.number(scale)})"
        reason = (
            f"{name}: {n_beyond} of {numel} elements differ beyond rtol={fmt.number(tol.rtol)}, atol={atol_text}; "
            f"max abs err {fmt.number(worst)} at index {fmt.index(position)} "
            f"(original {_value(expected, position)}, candidate {_value(actual, position)})"
        )
    return TensorDiff(name, numel, reason, max_abs, max_rel, mismatched)
