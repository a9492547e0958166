"""The ``verify`` layer: the four gates a candidate kernel must pass before it counts.

Gate 1, :func:`check_static`, reads the candidate's source; the correctness,
model and performance gates run it. Every gate answers with a :class:`Verdict`.

The gates are the judge's: they refuse to load in the candidate's process
(``KERNELOPT_ROLE=runner``, set by :class:`~kernelopt.evaluate.remote.RemoteRunner`),
so nothing there can import a threshold by accident. That is a tripwire, not
the defence: the defence is that the verdicts are computed in another process.
"""

from __future__ import annotations

import os as _os

if _os.environ.get("KERNELOPT_ROLE") == "runner":
    raise ImportError("kernelopt.verify is the judge's and does not load in the candidate's process")

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
