"""Gate 2: does the candidate kernel write what the original kernel writes?

The orchestrator runs the original Inductor kernel and the candidate on
identical inputs (a snapshot of a real launch, then several seeds and input
distributions) into output buffers pre-filled with :func:`nan_fill_`, and hands
this module the tensors. The decisions here are pure tensor arithmetic, on
whatever device the tensors live, and they target the reward hacks that a
comparison of values can see (the reference's section 3):

* partial or skipped writes (hack 7, 10): an element the candidate never wrote
  still holds the NaN sentinel where the original wrote a finite value;
* precision downgrades beyond the dtype's tolerance (hack 13): every finite
  element is held to :func:`~kernelopt.verify.tolerance.tolerance_for`;
* input mutation (hack 8): every read-only input must be bitwise unchanged;
* stale or uninitialised memory and races: two runs on identical inputs must
  agree bitwise, NaN positions included.

Layout is checked too (shape, dtype, strides): Inductor's launcher and the
kernels after this one read the buffer with the original's strides.

Longer than most modules: exact and inexact comparison share the blockwise
reduction that keeps gigabyte outputs within a few blocks of memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from kernelopt.verify import _format as fmt
from kernelopt.verify._chunks import as_bits, blocks, chunk_elements_for, first_true, flat, unravel
from kernelopt.verify.tolerance import Tolerance, tolerance_for
from kernelopt.verify.verdict import Verdict

GATE = "correctness"


# --------------------------------------------------------------------------- sentinels


def nan_fill_(t: Tensor, *, alternate: bool = False) -> Tensor:
    """Fill an output buffer with a sentinel before a kernel runs, in place; returns ``t``.

    An element the kernel does not write keeps the sentinel, so a candidate
    that skips part of its output cannot pass on values the allocator happened
    to leave behind (often the original's own results, freed a moment before).

    * floating and complex: NaN, which no finite result equals, so
      :func:`compare_tensor` names unwritten elements exactly;
    * signed integers: the dtype's minimum; unsigned: its maximum;
    * bool: True (neither value is rare in a mask).

    An integer or bool sentinel can coincide with a legitimate value, so an
    unwritten element goes unseen wherever the original wrote that very value.
    ``alternate=True`` gives a second sentinel (signed: maximum, unsigned:
    half the maximum + 1, bool: False, floating: still NaN); filling with it in
    every other case makes a skipped element fail in some case. Within one case
    the original's and the candidate's buffers must get the same sentinel.
    """
    dtype = t.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return t.fill_(math.nan)
    if dtype == torch.bool:
        return t.fill_(not alternate)
    info = torch.iinfo(dtype)
    if info.min < 0:
        return t.fill_(info.max if alternate else info.min)
    return t.fill_(info.max // 2 + 1 if alternate else info.max)


# --------------------------------------------------------------------------- one tensor


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


class _Blocks:
    """Per-block statistics kept on the device and read back in one transfer."""

    def __init__(self) -> None:
        self.rows: list[Tensor] = []
        self.offsets: list[int] = []

    def add(self, offset: int, *values: Tensor) -> None:
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


def _diff_exact(name: str, expected: Tensor, actual: Tensor, chunk: int) -> TensorDiff:
    """Integer and bool outputs: any difference fails; the float64 errors are for the report only."""
    acc = _Blocks()
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
    worst, where = _Blocks.worst(rows, acc.offsets, 1, 2)
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
    acc = _Blocks()
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
    n_unwritten, first_unwritten = _Blocks.first(rows, offsets, 0, 1)
    n_lost, first_lost = _Blocks.first(rows, offsets, 2, 3)
    n_special, first_special = _Blocks.first(rows, offsets, 4, 5)
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
        worst, where = _Blocks.worst(rows, offsets, 7, 8)
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


# --------------------------------------------------------------------------- bitwise


def bitwise_changes(
    name: str, before: Tensor, after: Tensor, *, chunk_elements: int | None = None
) -> tuple[int, tuple[int, ...] | None]:
    """How many elements differ bit for bit, and the index of the first one (None when none do).

    For "is this the same memory content": inputs before and after the
    candidate ran, or two runs of the candidate. NaN equals the same NaN here.
    A shape or dtype mismatch is the caller's bug (both come from one buffer),
    so it raises ``ValueError`` instead of failing the candidate.
    """
    if before.shape != after.shape or before.dtype != after.dtype:
        raise ValueError(
            f"{name}: cannot compare {tuple(before.shape)} {before.dtype} with {tuple(after.shape)} {after.dtype} "
            "bitwise; both tensors must come from the same buffer"
        )
    acc = _Blocks()
    for offset, index in blocks(before.shape, chunk_elements or chunk_elements_for(before)):
        b = flat(before, index)
        differs = as_bits(b) != as_bits(flat(after, index).to(b.device))
        if differs.dim() == 2:  # complex: real and imaginary bits
            differs = differs.any(dim=1)
        acc.add(offset, differs.sum(), first_true(differs))
    if not acc.rows:
        return 0, None
    count, first = _Blocks.first(acc.read(), acc.offsets, 0, 1)
    return count, None if first is None else unravel(first, before.shape)


# --------------------------------------------------------------------------- one case, all cases


def check_case(
    case: str,
    written: Mapping[str, tuple[Tensor, Tensor]],
    inputs_before_after: Mapping[str, tuple[Tensor, Tensor]],
    rerun: Mapping[str, tuple[Tensor, Tensor]] | None,
) -> Verdict:
    """Gate 2 on one case (one set of inputs): outputs, input integrity, determinism.

    ``written``: output parameter -> (original's result, candidate's result).
    ``inputs_before_after``: read-only input -> (before the candidate ran, after).
    ``rerun``: output -> (candidate's first run, second run on identical inputs),
    or None when the case was run once. Every failure is listed in
    ``details["failures"]``; the reason shows the most telling one: input
    mutation first (it can make a wrong output look right), then outputs,
    then non-determinism. Reasons start with the ``case`` label.
    """
    failures: list[str] = []
    if not written:
        failures.append("no outputs were compared; pass every parameter the kernel writes in `written`")
    for name, (before, after) in inputs_before_after.items():
        changed, first = bitwise_changes(name, before, after)
        if changed:
            failures.append(
                f"{name} was modified by the candidate (input mutation): {changed} elements changed, "
                f"first at index {fmt.index(first or ())}"
            )
    outputs: dict[str, dict[str, object]] = {}
    for name, (original, candidate) in written.items():
        diff = diff_tensor(name, original, candidate)
        outputs[name] = diff.to_dict()
        if diff.reason is not None:
            failures.append(diff.reason)
    for name, (first_run, second_run) in (rerun or {}).items():
        changed, first = bitwise_changes(name, first_run, second_run)
        if changed:
            failures.append(
                f"{name} differs between two runs on the same inputs (non-deterministic or reads "
                f"uninitialised memory): {changed} of {first_run.numel()} elements, "
                f"first at index {fmt.index(first or ())}"
            )
    details: dict[str, object] = {
        "case": case,
        "outputs": outputs,
        "inputs_checked": sorted(inputs_before_after),
        "rerun_checked": sorted(rerun) if rerun is not None else None,
        "failures": [f"{case}: {f}" for f in failures],
    }
    if failures:
        return Verdict(GATE, False, f"{case}: {failures[0]}", details)
    return Verdict(GATE, True, f"{case}: {len(written)} output(s) matched the original kernel", details)


def combine_cases(verdicts: list[Verdict]) -> Verdict:
    """One gate-2 verdict from every case: it passes only if each case passed.

    Details keep each case's outcome and, per output, the worst errors over
    all cases (what a report shows as "how close").
    """
    n = len(verdicts)
    worst_abs: dict[str, float] = {}
    worst_rel: dict[str, float] = {}
    for verdict in verdicts:
        for name, stats in (verdict.details.get("outputs") or {}).items():
            for key, worst in (("max_abs_err", worst_abs), ("max_rel_err", worst_rel)):
                value = stats.get(key)
                if value is not None:
                    worst[name] = max(worst.get(name, 0.0), float(value))
    failed = [v for v in verdicts if not v.passed]
    details: dict[str, object] = {
        "n_cases": n,
        "n_failed": len(failed),
        "cases": [{"case": v.details.get("case"), "passed": v.passed, "reason": v.reason} for v in verdicts],
        "max_abs_err": worst_abs,
        "max_rel_err": worst_rel,
    }
    if n == 0:
        return Verdict(GATE, False, "no cases were run; the correctness gate needs at least one", details)
    if failed:
        return Verdict(GATE, False, f"{failed[0].reason} ({len(failed)} of {n} cases failed)", details)
    return Verdict(GATE, True, f"{n} cases (snapshot + seeds x distributions) matched the original kernel", details)
