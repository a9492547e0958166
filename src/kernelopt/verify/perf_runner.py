"""Gate 4 on the device: time the candidate kernel against the original, fairly.

Interleaved rounds, L2 flushed before every timed launch, and fresh input
values before every timed launch (outside the timed region), rotating between
two argument sets so no launch sees the pointers or values of the one before.
The roofline floor comes from the launch's ideal traffic and the measured peak.
"""

from __future__ import annotations

from typing import Any, Sequence

from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.recorder import describe_kernel_args, traffic_bytes
from kernelopt.capture.snapshot import RotatingInputs, launch
from kernelopt.measure import Comparison, compare
from kernelopt.verify.performance import PerformancePolicy, judge_performance
from kernelopt.verify.subkernel import param_roles
from kernelopt.verify.verdict import Verdict

ROTATING_SETS = 2


def min_time_us(kernel: KernelDef, args: Sequence[Any], peak_gbps: float) -> float:
    """The fastest this launch could run: its ideal bytes at the measured peak bandwidth."""
    read, written = traffic_bytes(describe_kernel_args(kernel, tuple(args)))
    return (read + written) / (peak_gbps * 1e3)


def time_kernels(
    kernel: KernelDef, original: Any, candidate: Any, args: Sequence[Any], trials: int = 50
) -> Comparison:
    """Interleaved A/B timing of two launchers of one kernel on rotating, refreshed inputs."""
    reads = [i for i, (_, r, _w) in enumerate(param_roles(kernel)) if r]
    a, b = RotatingInputs(args, reads, ROTATING_SETS), RotatingInputs(args, reads, ROTATING_SETS)
    return compare(
        lambda: launch(original, a.current),
        lambda: launch(candidate, b.current),
        trials=trials,
        prepare_baseline=a.prepare,
        prepare_candidate=b.prepare,
    )


def run_performance_gate(
    kernel: KernelDef,
    original: Any,
    candidate: Any,
    args: Sequence[Any],
    peak_gbps: float,
    policy: PerformancePolicy | None = None,
    trials: int = 50,
) -> tuple[Verdict, Comparison]:
    """Gate 4: a real, noise-aware speedup that does not beat the roofline."""
    comparison = time_kernels(kernel, original, candidate, args, trials)
    verdict = judge_performance(comparison, min_time_us(kernel, args, peak_gbps), policy or PerformancePolicy())
    return verdict, comparison
