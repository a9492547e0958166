"""The ``verify`` layer: the four gates a candidate kernel must pass before it counts.

Gate 1, :func:`check_static`, reads the candidate's source; the correctness,
model and performance gates run it. Every gate answers with a :class:`Verdict`.
"""

from kernelopt.verify.static import RULES, KernelSignature, Param, check_static, kernel_signature
from kernelopt.verify.verdict import GATES, Verdict

__all__ = ["GATES", "RULES", "KernelSignature", "Param", "Verdict", "check_static", "kernel_signature"]
