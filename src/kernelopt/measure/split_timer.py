"""The timing protocol when the two sides of a comparison live in two processes.

The judge never runs a candidate in its own process, so gate 4 cannot hand both
functions to :func:`kernelopt.measure.timer.compare`. Instead each side times its
own call with :func:`read_call` (the per-call form of the protocol: L2 flushed,
the device kept busy while the host launches, marks around the call, then a
synchronize) and :func:`compare_split` interleaves those readings strictly A B A B,
every call after the other side's. Because a reading that comes from another
process could be forged, :class:`SplitComparison` keeps this process's own
wall-clock view of every remote call beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.measure.clocks import (
    METHOD_CPU,
    METHOD_CUDA_EVENTS,
    Backend,
    CudaEventBackend,
    DeviceLike,
    Fn,
    HostClockBackend,
    resolve_device,
)
from kernelopt.measure.timing import Comparison, Timing

_BACKENDS: dict[tuple[str, bool], Backend] = {}


def _backend_for(target: torch.device, flush_l2: bool, clock: Callable[[], float] | None = None) -> Backend:
    if target.type == "cpu":
        return HostClockBackend(clock or time.perf_counter)
    key = (str(target), flush_l2)
    if key not in _BACKENDS:  # one flush buffer per device, not one per call
        with torch.cuda.device(target):
            _BACKENDS[key] = CudaEventBackend(target, flush_l2=flush_l2, cuda_graph=False)
    return _BACKENDS[key]


@dataclass(frozen=True)
class CallReading:
    """One timed call (:func:`read_call`): its reading, and how long the device's lead before it ran (the
    judge takes the lead out of the wall time it checks readings against: the calibration's, not this)."""

    ms: float
    lead_ms: float


def read_call(
    fn: Fn,
    *,
    device: DeviceLike = None,
    flush_l2: bool = True,
    include_host: bool = False,
    _clock: Callable[[], float] | None = None,
) -> CallReading:
    """One call of ``fn``: L2 flushed, the device kept busy a while (the backend's ``lead``), marks around
    the call, then a synchronize.

    The per-call form of the protocol, for a comparison whose two sides live in two
    processes (:func:`compare_split`): each side times its own call and waits for it
    before the other side runs. The lead has the call's launches queued before the
    device reaches the start mark, so the marks read the device's time as back-to-back
    calls pay it, not the host's path to its launches. ``include_host``: as for
    :func:`~kernelopt.measure.timer.compare` (a model's forward, whose host-side launches
    the reading must hold: the longer of the device's and the host's time)."""
    target = resolve_device(device)
    backend = _backend_for(target, flush_l2, _clock)
    backend.reserve(3)
    host_clock = _clock or time.perf_counter
    backend.flush_l2()
    led = backend.mark()
    backend.lead()
    start = backend.mark()
    began = host_clock()
    fn()
    host_ms = (host_clock() - began) * 1000.0
    end = backend.mark()
    backend.synchronize()
    device_ms = backend.elapsed_ms(start, end)
    return CallReading(max(device_ms, host_ms) if include_host else device_ms, backend.elapsed_ms(led, start))


HOST_READING = "looped"
"""How the judge's two-process readings of a forward take the host's time (:func:`read_host`: a forward
called right after another), as a bench row records it: rows without it took the one timed call's, cold."""


def read_host(
    fn: Fn,
    *,
    calls: int = 20,
    device: DeviceLike = None,
    budget_s: float = 0.5,
    _clock: Callable[[], float] | None = None,
) -> float:
    """The host's milliseconds for one call of ``fn`` made right after another: the median of up to
    ``calls`` calls back to back (after one untimed), as many as ``budget_s`` holds, the device queueing
    their work and waited on once at the end.

    What a forward called in a loop costs the host at each call, for a whole forward's reading beside its
    device time (:func:`read_call` without the host's part). One call read alone, as :func:`read_call`
    reads it after the other side's process ran, finds the host's caches cold: on the H100, level2/13's
    compiled forward took its host 0.21-0.39 ms so against 0.10 ms in a loop, and the group-norm op's
    Python path three times its looped 40 µs, so that gate 4 read the op's 1.05x device gain as 0.63x."""
    target = resolve_device(device)
    clock = _clock or time.perf_counter
    fn()
    times: list[float] = []
    began = clock()
    for _ in range(max(calls, 1)):
        started = clock()
        fn()
        ended = clock()
        times.append((ended - started) * 1000.0)
        if ended - began > budget_s:
            break
    if target.type == "cuda":
        torch.cuda.synchronize(target)
    return statistics.median(times)


def time_call(
    fn: Fn,
    *,
    device: DeviceLike = None,
    flush_l2: bool = True,
    include_host: bool = False,
    _clock: Callable[[], float] | None = None,
) -> float:
    """Milliseconds of one call of ``fn`` (:func:`read_call`'s reading)."""
    return read_call(fn, device=device, flush_l2=flush_l2, include_host=include_host, _clock=_clock).ms


@dataclass(frozen=True)
class SplitComparison:
    """An interleaved A/B measurement whose candidate was timed by another process.

    ``comparison`` pairs the baseline's own readings with the candidate's *reported*
    readings; ``candidate_wall_ms`` is what this process's host clock saw for each
    whole remote call (request to reply, the other process's flush and synchronize
    included), the evidence a reported reading is checked against."""

    comparison: Comparison
    candidate_wall_ms: tuple[float, ...]

    def unexplained_ms(self) -> tuple[float, ...]:
        """Per call, the wall time the candidate's reported reading does not account for."""
        return tuple(w - r for w, r in zip(self.candidate_wall_ms, self.comparison.candidate.samples_ms))

    def to_dict(self) -> dict[str, Any]:
        return {**self.comparison.to_dict(), "candidate_wall_ms": list(self.candidate_wall_ms)}


def compare_split(
    baseline: Fn,
    remote_candidate: Callable[[], float],
    *,
    device: DeviceLike = None,
    warmup: int = 3,
    trials: int = 30,
    flush_l2: bool = True,
    prepare_baseline: Fn | None = None,
    prepare_candidate: Fn | None = None,
    after_candidate: Fn | None = None,
    baseline_remote: bool = False,
    baseline_host: bool = False,
    _clock: Callable[[], float] | None = None,
) -> SplitComparison:
    """:func:`compare` when the candidate runs in another process.

    ``baseline`` is timed here with :func:`time_call` or, with ``baseline_remote``,
    is itself a remote call that returns its reading (a clean process no candidate
    ran in: the two sides are then timed the same way, which on the H200 mattered
    more than the kernels did); ``remote_candidate()`` asks the other process for
    one timed call and returns its reading in ms. Calls alternate strictly, A B A B,
    so every reading follows the other side's call: on the H200 a worker process
    called twice in a row read its forward 3-20 % slower than after the other process
    (the same forwards in one process showed no such effect,
    ``benchmarks/h200-2026-12-03-split-order``), and :func:`compare`'s AB / BA rounds,
    which put each side after itself half the time, made such ratios bimodal: a
    noise margin the size of the effect, a median that depended on it. The baseline
    opens every round; with calls about a millisecond apart, drift between the two
    halves of a round is far below the noise. ``prepare_*`` run before every call and
    ``after_candidate`` after every candidate call, outside the timed region, and this
    process synchronizes before each remote call so what it prepared is in memory
    when the other side starts. ``baseline_host`` (a baseline timed here): each of its
    readings the longer of its device time and its host's time of a call made right
    after another (:func:`read_host`, read once), as a worker's ``timed_model`` reads
    a forward: a whole forward against a whole forward, both with the host's part.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if baseline_host and baseline_remote:
        raise ValueError("baseline_host is for a baseline timed here; a remote baseline reads its own host time")
    target = resolve_device(device)
    clock = _clock or time.perf_counter
    host_ms = read_host(baseline, device=target, _clock=_clock) if baseline_host else 0.0

    def sync() -> None:
        if target.type == "cuda":
            torch.cuda.synchronize(target)

    def run_baseline() -> float:
        if prepare_baseline is not None:
            prepare_baseline()
        if baseline_remote:
            sync()
            return float(baseline())  # type: ignore[arg-type]
        return max(time_call(baseline, device=target, flush_l2=flush_l2, _clock=_clock), host_ms)

    def run_candidate() -> tuple[float, float]:
        if prepare_candidate is not None:
            prepare_candidate()
        sync()
        started = clock()
        reported = float(remote_candidate())
        seen = (clock() - started) * 1000.0
        if after_candidate is not None:
            after_candidate()
        return reported, seen

    for _ in range(warmup):
        run_baseline()
        run_candidate()
    base: list[float] = []
    cand: list[float] = []
    wall: list[float] = []
    for _ in range(trials):
        base.append(run_baseline())
        reported, seen = run_candidate()
        cand.append(reported)
        wall.append(seen)
    label = "cpu" if target.type == "cpu" else f"cuda:{target.index} {torch.cuda.get_device_name(target)}"
    method = METHOD_CPU if target.type == "cpu" else METHOD_CUDA_EVENTS
    flushed = flush_l2 and target.type == "cuda"
    comparison = Comparison.from_timings(
        Timing(tuple(base), label, method, flushed), Timing(tuple(max(c, 0.0) for c in cand), label, method, flushed)
    )
    return SplitComparison(comparison, tuple(wall))
