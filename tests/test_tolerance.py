"""Tolerance policy: the per-dtype table, exact integers, and the magnitude-scaled atol."""

from __future__ import annotations

import pytest
import torch

from kernelopt.verify.tolerance import Tolerance, tolerance_for


@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [
        (torch.float64, 1e-9, 1e-12),
        (torch.float32, 1e-4, 1e-5),
        (torch.float16, 1e-2, 1e-3),
        (torch.bfloat16, 2e-2, 1e-2),
        (torch.float8_e4m3fn, 1e-1, 1e-1),
        (torch.float8_e5m2, 1e-1, 1e-1),
        (torch.float8_e4m3fnuz, 1e-1, 1e-1),
        (torch.float8_e5m2fnuz, 1e-1, 1e-1),
        (torch.complex64, 1e-4, 1e-5),
        (torch.complex128, 1e-9, 1e-12),
    ],
)
def test_floating_table(dtype: torch.dtype, rtol: float, atol: float) -> None:
    assert tolerance_for(dtype) == Tolerance(rtol=rtol, atol=atol)
    assert not tolerance_for(dtype).exact


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
        torch.uint16, torch.uint32, torch.uint64,
    ],  # fmt: skip
)
def test_integer_and_bool_are_exact(dtype: torch.dtype) -> None:
    tol = tolerance_for(dtype)
    assert (tol.rtol, tol.atol) == (0.0, 0.0)
    assert tol.exact


def test_quantized_dtypes_are_refused() -> None:
    with pytest.raises(ValueError, match="quantized"):
        tolerance_for(torch.qint8)


def test_effective_atol_scales_with_magnitude_but_never_below_atol() -> None:
    tol = Tolerance(rtol=1e-4, atol=1e-5)
    assert tol.effective_atol(0.0) == 1e-5
    assert tol.effective_atol(0.5) == 1e-5
    assert tol.effective_atol(1.0) == 1e-5
    assert tol.effective_atol(250.0) == pytest.approx(2.5e-3)


def test_negative_tolerances_are_rejected() -> None:
    with pytest.raises(ValueError):
        Tolerance(rtol=-1e-4, atol=0.0)
    with pytest.raises(ValueError):
        Tolerance(rtol=0.0, atol=float("nan"))


def test_tolerance_is_frozen() -> None:
    tol = tolerance_for(torch.float32)
    with pytest.raises(AttributeError):
        tol.rtol = 1.0  # type: ignore[misc]
