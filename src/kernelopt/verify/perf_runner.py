"""Gate 4 on the device: time the candidate kernel against the original, fairly, across two processes.

The candidate runs in its own process (:class:`~kernelopt.evaluate.remote.RemoteRunner`),
which times each call with its events while the judge's clock times the whole
call from outside. The original is timed the same way, in a *reference* process
that never loads a candidate: on the H200 the same kernel read up to 40 % apart
between the judge's own events and a worker's (and a verbatim candidate passed),
so both sides of the ratio must come from the same kind of process. Calls
alternate A B A B, each process after the other (a worker called twice in a row
reads slower: :func:`~kernelopt.measure.split_timer.compare_split`), the L2 is
flushed before every timed launch, and before every launch the inputs get fresh values and every
output is poisoned with a sentinel (alternating between calls), rotating
between two argument sets so no launch sees the pointers or values of the one
before. Both kernels rotate over the *same* sets (lent to the candidate's
process): a side whose buffers merely sit elsewhere in memory must not look
faster. The last timed candidate call's outputs are checked against the
original on the same inputs, so what was timed is what was verified. The
roofline floor comes from the launch's ideal traffic and the measured peak.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.recorder import describe_kernel_args, traffic_bytes
from kernelopt.capture.snapshot import launch
from kernelopt.measure.timer import SplitComparison, compare_split
from kernelopt.problem.layouts import RotatingInputs, clone_args, exact_clone
from kernelopt.verify.correctness import bitwise_changes, nan_fill_
from kernelopt.verify.performance import Calibration, PerformancePolicy, judge_performance, judge_timing_evidence
from kernelopt.verify.subkernel import check_launch, param_roles
from kernelopt.verify.verdict import Verdict

ROTATING_SETS = 2
ROTATION_MAX_BYTES = 4 << 30
"""An argument set larger than this rotates alone. Fresh values, poisoned outputs and the check of
the last timed call already catch a kernel that skips work or returns what it kept; a second
copy of a set this large would not fit beside the model (on the H200, row-L2's 17 GB set
ran the judge out of 141 GB: ``benchmarks/h200-2026-12-01-gate-memory``)."""
WARMUP = 3

Launcher = Callable[[Sequence[Any]], None]


def min_time_us(kernel: KernelDef, args: Sequence[Any], peak_gbps: float) -> float:
    """The fastest this launch could run: its ideal bytes at the measured peak bandwidth."""
    read, written = traffic_bytes(describe_kernel_args(kernel, tuple(args)))
    return (read + written) / (peak_gbps * 1e3)


def rotating_sets(args: Sequence[Any]) -> int:
    """How many argument sets the timed calls rotate over: :data:`ROTATING_SETS`, or one for a set
    above :data:`ROTATION_MAX_BYTES`."""
    size = sum(a.untyped_storage().nbytes() for a in args if isinstance(a, torch.Tensor))
    return ROTATING_SETS if size <= ROTATION_MAX_BYTES else 1


class _PoisonedRotation:
    """Rotating argument sets whose outputs are poisoned before every call (alternating sentinels).

    :meth:`fork` gives the other side of the comparison its own cursor over the same
    sets, so both kernels run on the same memory, each set equally often."""

    def __init__(self, kernel: KernelDef, args: Sequence[Any], inputs: RotatingInputs | None = None) -> None:
        roles = param_roles(kernel)
        self.kernel = kernel
        self.inputs = inputs or RotatingInputs(
            args, [i for i, (_, reads, _w) in enumerate(roles) if reads], rotating_sets(args)
        )
        self.outputs = [i for i, (_, reads, writes) in enumerate(roles) if writes and not reads]
        self.calls = 0

    def fork(self) -> _PoisonedRotation:
        return _PoisonedRotation(self.kernel, self.inputs.base, self.inputs.fork())

    @property
    def current(self) -> list[Any]:
        return self.inputs.current

    def prepare(self) -> None:
        self.inputs.prepare()
        for i in self.outputs:
            nan_fill_(self.current[i], alternate=self.calls % 2 == 1)
        self.calls += 1


def time_kernels(
    kernel: KernelDef,
    original: Any,
    runner: Any,
    key: str,
    args: Sequence[Any],
    trials: int = 50,
    reference: Any | None = None,
    keep_last: bool = True,
) -> tuple[SplitComparison, list[Any], list[Any]]:
    """Interleaved timing of the original against the candidate ``key`` (in ``runner``'s process).

    The original is timed in ``reference``'s process (clean: it only ever runs the
    original) when one is given, else launched and timed here.

    Returns the comparison, the arguments the last timed candidate call started from
    (a copy taken just before it) and the arguments it ended with (a copy taken right
    after it, before the original's next call reuses the set); both empty when ``keep_last`` is
    False (the screen, which checks no outputs, holds no copies)."""
    baseline = _PoisonedRotation(kernel, args)
    candidate = baseline.fork()
    total = WARMUP + trials
    before_last: list[Any] = []
    after_last: list[Any] = []

    def prepare_candidate() -> None:
        candidate.prepare()
        if keep_last and candidate.calls == total:
            before_last[:] = clone_args(candidate.current)

    def after_candidate() -> None:
        if keep_last and candidate.calls == total:
            after_last[:] = _after(kernel, before_last, candidate.current)

    timed_baseline: Callable[[], object] = (
        reference.timed_original(kernel.name, lambda: baseline.current)
        if reference is not None
        else lambda: launch(original, baseline.current)
    )
    try:
        split = compare_split(
            timed_baseline,
            runner.timed(kernel.name, key, lambda: candidate.current),
            warmup=WARMUP,
            trials=trials,
            prepare_baseline=baseline.prepare,
            prepare_candidate=prepare_candidate,
            after_candidate=after_candidate,
            baseline_remote=reference is not None,
        )
    finally:
        runner.release()
        if reference is not None:
            reference.release()
    return split, before_last, after_last


def _after(kernel: KernelDef, before: Sequence[Any], current: Sequence[Any]) -> list[Any]:
    """The record of the arguments a timed call left: a copy of what it wrote; a read-only input
    it left bit for bit as it was is the ``before`` copy itself (one copy of a big input fewer)."""
    record: list[Any] = []
    for (name, reads, writes), was, now in zip(param_roles(kernel), before, current):
        if not isinstance(now, torch.Tensor):
            record.append(now)
        elif reads and not writes and bitwise_changes(name, was, now)[0] == 0:
            record.append(was)
        else:
            record.append(exact_clone(now))
    return record


def run_performance_gate(
    kernel: KernelDef,
    original: Any,
    runner: Any,
    key: str,
    args: Sequence[Any],
    peak_gbps: float,
    policy: PerformancePolicy | None = None,
    trials: int = 50,
    reference: Any | None = None,
) -> tuple[Verdict, SplitComparison]:
    """Gate 4: a real, noise-aware speedup that does not beat the roofline, on readings the judge's clock
    bears out, by a kernel whose timed outputs are right."""
    policy = policy or PerformancePolicy()
    split, before, after = time_kernels(kernel, original, runner, key, args, trials, reference)
    timed = check_launch(kernel, lambda a: launch(original, a), before, after, "the last timed call")
    floor = min_time_us(kernel, args, peak_gbps)
    return judge_timed(timed, split, runner.calibration, floor, policy), split


def judge_timed(
    timed: Verdict,
    split: SplitComparison,
    calibration: Calibration,
    floor_us: float | None,
    policy: PerformancePolicy,
) -> Verdict:
    """Gate 4's verdict on a finished interleaved timing: the last timed call's outputs right (``timed``,
    the judge's check of them), the candidate's readings borne out by the judge's clock, then a real,
    noise-aware speedup above the roofline floor ``floor_us`` (None: unknown, not checked)."""
    if not timed.passed:
        return Verdict(
            "performance",
            False,
            f"the timed candidate's outputs are wrong: {timed.reason}",
            {"rule": "timed_outputs", **timed.details},
        )
    evidence = judge_timing_evidence(
        split.comparison.candidate.samples_ms, split.candidate_wall_ms, calibration, policy
    )
    if evidence is not None:
        return evidence
    verdict = judge_performance(split.comparison, floor_us, policy)
    verdict.details["wall_ms_median"] = sorted(split.candidate_wall_ms)[len(split.candidate_wall_ms) // 2]
    verdict.details["calibrated_overhead_ms"] = list(calibration.overhead_ms)
    verdict.details["calibration_lead_ms"] = list(calibration.lead_ms)  # inside each overhead above
    return verdict


def screen(
    kernel: KernelDef,
    original: Any,
    runner: Any,
    key: str,
    args: Sequence[Any],
    trials: int,
    reference: Any | None = None,
) -> SplitComparison:
    """The short interleaved run that screens slow candidates out before the costly gates."""
    split, _, _ = time_kernels(kernel, original, runner, key, args, trials, reference, keep_last=False)
    return split
