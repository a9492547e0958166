"""The ``verify`` layer: the four gates a candidate kernel must pass before it counts.

Gate 1, :func:`check_static`, reads the candidate's source; the correctness,
model and performance gates run it. Every gate answers with a :class:`Verdict`.
"""

from kernelopt.verify.correctness import (
    TensorDiff,
    bitwise_changes,
    check_case,
    combine_cases,
    compare_tensor,
    diff_tensor,
    nan_fill_,
)
from kernelopt.verify.model_gate import ModelGatePolicy, SeedResult, judge_model, output_stats, relative_error
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end, judge_performance
from kernelopt.verify.static import RULES, KernelSignature, Param, check_static, kernel_signature
from kernelopt.verify.tolerance import Tolerance, tolerance_for
from kernelopt.verify.verdict import GATES, Verdict

__all__ = [
    "GATES",
    "RULES",
    "KernelSignature",
    "ModelGatePolicy",
    "Param",
    "PerformancePolicy",
    "SeedResult",
    "TensorDiff",
    "Tolerance",
    "Verdict",
    "bitwise_changes",
    "check_case",
    "check_static",
    "combine_cases",
    "compare_tensor",
    "diff_tensor",
    "judge_end_to_end",
    "judge_model",
    "judge_performance",
    "kernel_signature",
    "nan_fill_",
    "output_stats",
    "relative_error",
    "tolerance_for",
]
