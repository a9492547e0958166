"""Edge-case input values: the ranges a kernel silently assumes, probed on purpose.

Gate 2's random cases (normal samples, rescaled) are symmetric, finite and
moderate, so a kernel wrong only at the edges passes them: a softmax without
the max subtraction, a max that drops NaN, a max initialised at 0. Each
distribution here fills a tensor in its *exact* layout (shape, strides, dtype;
stride-0 and gapped views included) with values aimed at one such assumption.

What "row" means. Broadcast dimensions (stride 0) are set aside first: their
copies share memory, so they share values. Of the remaining dimensions of
size > 1, the row is the one with the smallest stride: the innermost
contiguous dimension (stride 1) when the tensor has one, else the innermost in
memory. Every other index combination is one row. A tensor with one element is
one row of one. Row-wise properties (a whole NaN row, constant rows) then hold
along the dimension a reduction kernel usually walks, and hold in memory as a
contiguous run when the row has stride 1. Gaps between rows (views with
padding) get values of the same distribution, drawn for the span as one row.
A view whose remaining dimensions still overlap in memory (sliding windows) is
filled as one row over its whole span; row-wise properties then hold only for
the span, and per-element ones still hold.

Floating dtypes get the distribution; integer inputs (indices, offsets) are
drawn uniformly from the recorded tensor's own [min, max], both endpoints
included at known positions, so every index stays valid; bool inputs are
random bits; complex inputs keep the recorded values. Every draw comes from
the caller's ``torch.Generator``, so a seed fixes the tensor bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from kernelopt.errors import KerneloptError
from kernelopt.problem.layouts import span_elements

EdgeFill = Callable[[int, int, torch.dtype, torch.Generator, torch.device], Tensor]
"""``fill(rows, n, dtype, generator, device)`` -> a contiguous ``(rows, n)`` tensor of ``dtype``."""


# --------------------------------------------------------------------------- value makers


def _overflow_point(dtype: torch.dtype) -> float:
    """log(max finite value): exp of anything larger overflows in ``dtype``."""
    return math.log(torch.finfo(dtype).max)


def _uniform(rows: int, n: int, lo: float, hi: float, gen: torch.Generator, device: torch.device) -> Tensor:
    return lo + (hi - lo) * torch.rand(rows, n, generator=gen, device=device, dtype=torch.float32)


def _signs(rows: int, n: int, gen: torch.Generator, device: torch.device) -> Tensor:
    flips = torch.rand(rows, n, generator=gen, device=device, dtype=torch.float32) < 0.5
    return torch.where(flips, -1.0, 1.0)


def _log_uniform(rows: int, n: int, lo: float, hi: float, gen: torch.Generator, device: torch.device) -> Tensor:
    return _uniform(rows, n, math.log(lo), math.log(hi), gen, device).exp()


def _diagonal(rows: int, n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """One known position per row: column ``row % n``."""
    r = torch.arange(rows, device=device)
    return r, r % n


def large(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Mixed signs, magnitudes from 0.9 x the dtype's exp overflow point to 1.05 x the
    overflow point of the dtype the kernel computes in (float32 for 16-bit floats, which
    Inductor upcasts). Element ``(r, r % n)`` of every row is the largest positive value,
    so exp overflows in every row and a softmax that skips the max subtraction gets inf."""
    compute = torch.float32 if dtype.itemsize < 4 else dtype
    lo, hi = 0.9 * _overflow_point(dtype), 1.05 * _overflow_point(compute)
    values = _uniform(rows, n, lo, hi, gen, device) * _signs(rows, n, gen, device)
    values[_diagonal(rows, n, device)] = hi
    return values.to(dtype)


ROW_SCALES = (1e-2, 1e2)
"""One-signed distributions: each row's scale, log-uniform over four decades."""
WITHIN_ROW = (1.0, 4.0)
"""One-signed distributions: each element's factor on its row's scale, log-uniform."""


def _one_signed(rows: int, n: int, gen: torch.Generator, device: torch.device) -> Tensor:
    """Magnitudes of varied scale, none zero, and every row's nearest-to-zero element at
    least its row's scale: a wrong 0 (a max initialised at 0) is off by that much."""
    return _log_uniform(rows, 1, *ROW_SCALES, gen, device) * _log_uniform(rows, n, *WITHIN_ROW, gen, device)


def all_negative(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Every element strictly negative, magnitudes as in :func:`_one_signed`
    (a max initialised at 0, a ReLU assumed away, a sign test all fail here)."""
    return (-_one_signed(rows, n, gen, device)).to(dtype)


def all_positive(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Every element strictly positive, magnitudes as in :func:`_one_signed`."""
    return _one_signed(rows, n, gen, device).to(dtype)


NONFINITE = (math.nan, math.inf, -math.inf)


def nonfinite(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Standard normal values with NaN, +inf and -inf at known positions.

    Row 0 is entirely NaN (with a single row: its first ``ceil(n / 2)`` elements).
    In the elements after that run, in row-major order, every ``step``-th one is
    special, cycling NaN, +inf, -inf, where ``step = min(n + 1, remaining // 3)``
    (at least 1): one per row on a shifting diagonal when rows are many, and all
    three kinds whenever at least three elements remain.
    """
    values = torch.randn(rows, n, generator=gen, device=device, dtype=torch.float32)
    flat = values.view(-1)
    run = n if rows > 1 else (n + 1) // 2
    flat[:run] = math.nan
    remaining = flat.numel() - run
    if remaining > 0:
        step = max(1, min(n + 1, remaining // 3))
        positions = torch.arange(run, flat.numel(), step, device=device)
        kinds = torch.tensor(NONFINITE, device=device, dtype=torch.float32)
        flat[positions] = kinds[torch.arange(positions.numel(), device=device) % 3]
    return values.to(dtype)


def tiny(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Subnormals of the dtype and exact zeros of both signs.

    Each element is +0, -0 (a quarter each) or a subnormal of random sign with a
    magnitude uniform below the smallest normal. The first four elements in
    row-major order are fixed where they exist: +0, -0, the smallest subnormal,
    minus the largest subnormal.
    """
    info = torch.finfo(dtype)
    smallest = info.tiny * info.eps  # IEEE: the smallest subnormal is 2^-(mantissa bits) x the smallest normal
    wide = torch.float64 if device.type != "mps" else torch.float32
    pick = torch.rand(rows, n, generator=gen, device=device, dtype=torch.float32)
    sub = torch.rand(rows, n, generator=gen, device=device, dtype=wide) * info.tiny
    sub = sub.clamp_min(smallest) * _signs(rows, n, gen, device).to(wide)
    zeros = torch.where(pick < 0.25, 0.0, -0.0).to(wide)
    values = torch.where(pick < 0.5, zeros, sub).to(dtype)
    fixed = torch.tensor([0.0, -0.0, smallest, -(info.tiny - smallest)], dtype=wide, device=device).to(dtype)
    count = min(4, values.numel())
    values.view(-1)[:count] = fixed[:count]
    return values


def constant(rows: int, n: int, dtype: torch.dtype, gen: torch.Generator, device: torch.device) -> Tensor:
    """Every row holds one value repeated (zero variance), the value differing per row:
    random sign, magnitude log-uniform in [1e-2, 1e2]. A variance taken as
    E[x^2] - E[x]^2 cancels badly here and can go negative."""
    per_row = _log_uniform(rows, 1, 1e-2, 1e2, gen, device) * _signs(rows, 1, gen, device)
    return per_row.expand(rows, n).to(dtype).contiguous()


EDGE_DISTRIBUTIONS: dict[str, EdgeFill] = {
    "large": large,
    "all_negative": all_negative,
    "all_positive": all_positive,
    "nonfinite": nonfinite,
    "tiny": tiny,
    "constant": constant,
}
"""Edge-case distributions by name; a caller picks a subset by name."""


def check_edge_names(names: Sequence[str]) -> None:
    """Raise a one-line :class:`KerneloptError` naming the known distributions for any unknown name."""
    if isinstance(names, str):
        raise KerneloptError(f"edge cases must be a sequence of names, got the string {names!r}")
    unknown = [name for name in names if name not in EDGE_DISTRIBUTIONS]
    if unknown:
        raise KerneloptError(
            f"unknown edge-case distribution {unknown[0]!r}; choose from {', '.join(EDGE_DISTRIBUTIONS)}"
        )


# --------------------------------------------------------------------------- layouts


def _without_broadcast(view: Tensor) -> Tensor:
    """``view`` with every stride-0 dimension narrowed to size 1 (its copies share memory)."""
    for dim, (size, stride) in enumerate(zip(view.shape, view.stride())):
        if stride == 0 and size > 1:
            view = view.narrow(dim, 0, 1)
    return view


def _overlaps(view: Tensor) -> bool:
    """True unless each dimension, taken by increasing stride, steps past everything before it."""
    extent = 0
    for stride, size in sorted((st, sz) for sz, st in zip(view.shape, view.stride()) if sz > 1):
        if stride <= extent:
            return True
        extent += (size - 1) * stride
    return False


def row_dim(view: Tensor) -> int | None:
    """The row dimension (see the module docstring): the size > 1 dimension of smallest
    nonzero stride; None when there is none (one element, or only broadcast dimensions)."""
    candidates = [(st, d) for d, (sz, st) in enumerate(zip(view.shape, view.stride())) if sz > 1 and st != 0]
    return min(candidates)[1] if candidates else None


def _fill_layout(t: Tensor, make: Callable[[int, int], Tensor]) -> Tensor:
    """A fresh tensor in ``t``'s layout whose rows are the rows of ``make(rows, n)``."""
    span = span_elements(t)
    if span == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    flat = torch.empty(span, dtype=t.dtype, device=t.device)
    view = flat.as_strided(t.shape, t.stride(), 0)
    target = _without_broadcast(view)
    if _overlaps(target) or target.numel() < span:
        flat.copy_(make(1, span).reshape(span))  # the whole span as one row: gaps, or the overlap fallback
        if _overlaps(target):
            return view
    dim = row_dim(target)
    if dim is None:
        target.copy_(make(1, 1).reshape(target.shape))
        return view
    order = [d for d in range(target.dim()) if d != dim] + [dim]
    rows_last = target.permute(order)
    n = rows_last.shape[-1]
    rows = target.numel() // n
    if rows_last.is_contiguous():  # the common case: rows are the flat span, written in place
        _fill_rows(rows_last.view(rows, n), make)
    else:
        rows_last.copy_(_fill_rows(torch.empty(rows, n, dtype=t.dtype, device=t.device), make).view(rows_last.shape))
    return view


FILL_BLOCK_ELEMENTS = 1 << 24
"""Rows are made about this many elements at a time: an edge distribution's temporaries
(float64 and masks of the whole tensor) would otherwise be several times a gigabyte input."""


def _fill_rows(out: Tensor, make: Callable[[int, int], Tensor]) -> Tensor:
    """``out`` (rows x n) filled with ``make``'s rows, a block of rows at a time; returns ``out``.
    A tensor of at most :data:`FILL_BLOCK_ELEMENTS` elements is made in one call."""
    rows, n = out.shape
    step = max(1, FILL_BLOCK_ELEMENTS // max(n, 1))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop].copy_(make(stop - start, n))
    return out


def _exact_copy(t: Tensor) -> Tensor:
    span = span_elements(t)
    if span == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return torch.as_strided(t, (span,), (1,), t.storage_offset()).clone().as_strided(t.shape, t.stride(), 0)


def _integers(t: Tensor, gen: torch.Generator) -> Callable[[int, int], Tensor]:
    """Uniform integers in ``t``'s own [min, max]; the first element is min and the last max."""
    lo, hi = int(t.min().item()), int(t.max().item())
    top = torch.iinfo(torch.int64).max
    high = hi + 1 if hi < top else hi  # randint's bound is exclusive; the endpoint is placed below anyway

    def make(rows: int, n: int) -> Tensor:
        if high <= lo:
            values = torch.full((rows, n), lo, dtype=torch.int64, device=t.device)
        else:
            values = torch.randint(lo, high, (rows, n), generator=gen, device=t.device, dtype=torch.int64)
        flat = values.view(-1)
        flat[0], flat[-1] = lo, hi
        return values.to(t.dtype)

    return make


def edge_like_layout(t: Tensor, name: str, generator: torch.Generator) -> Tensor:
    """Fresh values of the edge distribution ``name`` in ``t``'s exact layout.

    Floating tensors get :data:`EDGE_DISTRIBUTIONS` ``[name]``; integer tensors
    uniform values within ``t``'s own [min, max] (whatever ``name``); bool
    tensors random bits; complex tensors an exact copy of ``t``. The result
    has ``t``'s shape, strides and dtype, storage offset 0, on ``t``'s device.
    """
    check_edge_names([name])
    dtype, device = t.dtype, t.device
    if dtype.is_complex:
        return _exact_copy(t)
    if dtype == torch.bool:
        return _fill_layout(
            t, lambda rows, n: torch.randint(0, 2, (rows, n), generator=generator, device=device).bool()
        )
    if not dtype.is_floating_point:
        if t.numel() == 0:
            return _exact_copy(t)
        return _fill_layout(t, _integers(t, generator))
    fill = EDGE_DISTRIBUTIONS[name]
    return _fill_layout(t, lambda rows, n: fill(rows, n, dtype, generator, device))
