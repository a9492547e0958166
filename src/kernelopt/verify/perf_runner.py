"""Gate 4 on the device: time the candidate kernel against the original, fairly.

Interleaved rounds, L2 flushed before every timed launch, and fresh input
values before every timed launch (outside the timed region), rotating between
two argument sets so no launch sees the pointers or values of the one before.
The roofline floor comes from the launch's ideal traffic and the measured peak.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.recorder import describe_kernel_args, traffic_bytes
from kernelopt.capture.snapshot import clone_args, launch, perturbed_copy_
from kernelopt.measure import Comparison, compare
from kernelopt.verify.performance import PerformancePolicy, judge_performance
from kernelopt.verify.subkernel import param_roles
from kernelopt.verify.verdict import Verdict

ROTATING_SETS = 2


def min_time_us(kernel: KernelDef, args: Sequence[Any], peak_gbps: float) -> float:
    """The fastest this launch could run: its ideal bytes at the measured peak bandwidth."""
    read, written = traffic_bytes(describe_kernel_args(kernel, tuple(args)))
    return (read + written) / (peak_gbps * 1e3)


def _refresher(kernel: KernelDef, sets: list[list[Any]], base: Sequence[Any]) -> Callable[[], None]:
    """Before each timed launch: next argument set, its floating inputs nudged to new values."""
    inputs = [i for i, (_, reads, _w) in enumerate(param_roles(kernel))
              if reads and isinstance(base[i], torch.Tensor) and base[i].is_floating_point()]
    order = itertools.cycle(range(len(sets)))
    state = {"current": sets[0]}

    def prepare() -> None:
        args = sets[next(order)]
        for i in inputs:
            perturbed_copy_(args[i], base[i])
        state["current"] = args

    prepare.state = state  # type: ignore[attr-defined]
    return prepare


def time_kernels(
    kernel: KernelDef, original: Any, candidate: Any, args: Sequence[Any], trials: int = 50
) -> Comparison:
    """Interleaved A/B timing of two launchers of one kernel on rotating, refreshed inputs."""
    base_sets = [clone_args(args) for _ in range(ROTATING_SETS)]
    cand_sets = [clone_args(args) for _ in range(ROTATING_SETS)]
    prep_b, prep_c = _refresher(kernel, base_sets, args), _refresher(kernel, cand_sets, args)
    return compare(
        lambda: launch(original, prep_b.state["current"]),  # type: ignore[attr-defined]
        lambda: launch(candidate, prep_c.state["current"]),  # type: ignore[attr-defined]
        trials=trials,
        prepare_baseline=prep_b,
        prepare_candidate=prep_c,
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
