"""How far a candidate kernel's output may sit from the original kernel's output.

The correctness gate compares a candidate with the *original Inductor kernel*
at the same precision, not with a float64 ideal (that is the model gate's
job). Two correct kernels at the same precision still differ: a reduction that
adds its terms in another order (another block size, a split reduction, a tree
instead of a loop) changes the rounding. For float32 over about 1e5 terms the
relative difference is around 1e-5, so ``rtol=1e-4`` leaves a 10x margin while
still catching the precision downgrades that matter (a bfloat16 GEMM inside an
fp32 kernel errs by about 2e-4; KernelBench used the same 1e-4). Half precision
types round at 2^-11 (float16) and 2^-8 (bfloat16), float8 at 2^-3 to 2^-4,
and the bounds scale with that. Integer and bool outputs are exact: there is
no rounding to excuse a difference.

The absolute tolerance scales with the magnitude of the original's output:
``effective atol = atol * max(1, max|original|)`` over its finite elements, so
an output whose values are in the thousands is not held to 1e-5 absolute near
its zero crossings, while an output of tiny values is still held to ``atol``
(which is what makes zeros fail unless the whole output is near zero; the
model gate flags that degenerate case separately).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


@dataclass(frozen=True)
class Tolerance:
    """An ``allclose``-style bound: ``|actual - expected| <= atol_eff + rtol * |expected|``."""

    rtol: float
    atol: float

    def __post_init__(self) -> None:
        if not (self.rtol >= 0 and self.atol >= 0):
            raise ValueError(f"tolerances must be non-negative numbers, got rtol={self.rtol}, atol={self.atol}")

    @property
    def exact(self) -> bool:
        """True when any difference at all fails (integer and bool outputs)."""
        return self.rtol == 0 and self.atol == 0

    def effective_atol(self, max_abs_expected: float) -> float:
        """``atol`` scaled by the original's largest finite magnitude, never below ``atol``."""
        return self.atol * max(1.0, float(max_abs_expected))


_FLOAT = {
    torch.float64: Tolerance(rtol=1e-9, atol=1e-12),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-5),
    torch.float16: Tolerance(rtol=1e-2, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=2e-2, atol=1e-2),
}
_FLOAT8 = Tolerance(rtol=1e-1, atol=1e-1)
_EXACT = Tolerance(rtol=0.0, atol=0.0)


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    """The tolerance for comparing two kernels' outputs of ``dtype``.

    TF32 is not a dtype (it is float32 computed on tensor cores) and gets the
    float32 bound, which a TF32 candidate of an fp32 original usually fails on
    reductions of any length: that is intended. Complex dtypes use the bound of
    their real component type. Quantized dtypes are refused: comparing them
    means comparing scales and zero points too.
    """
    if dtype in _QUANTIZED:
        raise ValueError(f"no tolerance policy for quantized dtype {dtype}; dequantize before comparing")
    if dtype.is_complex:
        dtype = dtype.to_real()
    if dtype.is_floating_point:
        if dtype in _FLOAT:
            return _FLOAT[dtype]
        if dtype.itemsize == 1:  # every float8 variant
            return _FLOAT8
        raise ValueError(f"no tolerance policy for floating dtype {dtype}")
    return _EXACT  # integers (signed and unsigned) and bool
