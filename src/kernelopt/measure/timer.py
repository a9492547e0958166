"""Wall-clock timing of GPU work, and interleaved A/B comparison.

Every speedup kernelopt prints rests on these numbers, so they follow one
protocol (see the design brief's quality bar):

* warm-up calls first, so compilation, module load and handle creation stay out;
* on CUDA, device events around each call (the host clock would time the launch,
  not the kernel), with the L2 cache flushed before every timed call so a kernel
  is not credited with data a previous call left in the cache;
* a whole forward (``include_host``) reads the longer of its device time and the
  host's time to launch it, which is what back-to-back calls cost: a launch-bound
  forward queued behind the flush would otherwise read as its kernels alone;
* many trials, reported as a median with quartiles, never a mean;
* baseline and candidate timed in the same rounds, alternating which goes
  first (AB, BA, AB, ...), so clock drift, thermal throttling and neighbours on
  the machine hit both equally.

Both :func:`time_fn` and :func:`compare` drive the same per-trial loop
(:func:`_run_schedule`); they differ only in the schedule they hand it. The rest
of the protocol has one module per part: the clocks (CUDA events, the L2 flush,
the host clock) in :mod:`kernelopt.measure.clocks`, the statistics of the samples
(:class:`Timing`, :class:`Comparison`) in :mod:`kernelopt.measure.timing`, and the
per-call form for a comparison whose two sides live in two processes
(:func:`read_call`, :func:`read_host`, :func:`time_call`, :func:`compare_split`) in :mod:`kernelopt.measure.split_timer`.
All of them stay importable from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from kernelopt.errors import KerneloptError, UnsupportedEnvironment
from kernelopt.measure.clocks import (
    METHOD_CPU,
    METHOD_CUDA_EVENTS,
    METHOD_CUDA_GRAPH,
    MIN_FLUSH_BYTES,
    Backend,
    CudaEventBackend,
    DeviceLike,
    Fn,
    HostClockBackend,
    l2_flush_bytes,
    resolve_device,
)
from kernelopt.measure.split_timer import (
    HOST_READING,
    CallReading,
    SplitComparison,
    compare_split,
    read_call,
    read_host,
    time_call,
)
from kernelopt.measure.timing import Comparison, Timing

# --------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class _Subject:
    """One function to time and the state it needs refreshed before every call."""

    fn: Fn
    prepare: Fn | None = None

    def call_prepared(self) -> None:
        if self.prepare is not None:
            self.prepare()
        self.fn()


def _capture_graph(fn: Fn, warmup: int) -> Fn:
    """Capture ``fn`` into a CUDA graph and return its replay.

    Warm-up runs on a side stream first, as torch requires before capture
    (lazy initialisation such as cuBLAS handles or Triton compilation must not
    happen inside the capture); at least one warm-up call is always made.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise KerneloptError(
            f"could not capture the function into a CUDA graph ({first_line}); time it with cuda_graph=False"
        ) from exc
    # The first replays upload the graph; keep them out of the samples.
    for _ in range(max(1, warmup)):
        graph.replay()
    return graph.replay  # the bound method keeps the graph alive


def _warm_up(backend: Backend, subject: _Subject, warmup: int, cuda_graph: bool) -> _Subject:
    """Run the warm-up calls; return the subject to time (a graph replay under cuda_graph)."""
    if cuda_graph:
        timed = _Subject(fn=_capture_graph(subject.fn, warmup))
    else:
        for _ in range(warmup):
            subject.call_prepared()
        timed = subject
    backend.synchronize()
    return timed


def _prepared_calls(subjects: Sequence[_Subject], schedule: Sequence[Sequence[int]]) -> Iterator[tuple[int, _Subject]]:
    """Each call of the schedule in order, as (subject index, subject), its ``prepare`` run first (untimed)."""
    for order in schedule:
        for index in order:
            subject = subjects[index]
            if subject.prepare is not None:
                subject.prepare()
            yield index, subject


def _run_schedule(
    backend: Backend,
    subjects: Sequence[_Subject],
    schedule: Sequence[Sequence[int]],
    include_host: bool = False,
    host_clock: Callable[[], float] = time.perf_counter,
) -> list[tuple[float, ...]]:
    """The one per-trial loop: each round calls subjects in the round's order.

    Per call: ``prepare`` (untimed), L2 flush (untimed), start mark, the call,
    end mark. On CUDA nothing synchronizes until all rounds are queued, so the
    host never stalls the stream between trials; marks are read afterwards.
    ``include_host`` then runs the schedule once more for the host's part: each
    call made on an idle device (the host waits before it, so a full launch queue
    never lengthens it) and read on ``host_clock``; each sample is the larger of
    the two readings of its round. The marks' pass is the one without it, so a
    forward the device is busy with reads as before: the queued calls hide the
    host's work ahead of each one, as back-to-back calls do.
    Returns the samples of each subject, in round order.
    """
    backend.reserve(2 * sum(len(order) for order in schedule))
    marks: list[list[tuple[object, object]]] = [[] for _ in subjects]
    for index, subject in _prepared_calls(subjects, schedule):
        backend.flush_l2()
        start = backend.mark()
        subject.fn()
        end = backend.mark()
        marks[index].append((start, end))
    backend.synchronize()
    samples = [[backend.elapsed_ms(start, end) for start, end in pairs] for pairs in marks]
    if include_host:
        calls = [0] * len(subjects)
        for index, subject in _prepared_calls(subjects, schedule):
            backend.synchronize()
            began = host_clock()
            subject.fn()
            host_ms = (host_clock() - began) * 1000.0
            samples[index][calls[index]] = max(samples[index][calls[index]], host_ms)
            calls[index] += 1
        backend.synchronize()
    return [tuple(s) for s in samples]


def _measure(
    subjects: Sequence[_Subject],
    schedule: Sequence[Sequence[int]],
    *,
    device: DeviceLike,
    warmup: int,
    trials: int,
    flush_l2: bool,
    cuda_graph: bool,
    clock: Callable[[], float] | None,
    include_host: bool = False,
) -> list[Timing]:
    """Validate, pick the backend, warm up, run the schedule, wrap the samples."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if warmup < 0:
        raise ValueError(f"warmup must be non-negative, got {warmup}")
    if cuda_graph and any(s.prepare is not None for s in subjects):
        raise KerneloptError(
            "cuda_graph=True cannot be combined with prepare: a captured graph replays fixed "
            "inputs; drop prepare or time with cuda_graph=False"
        )
    target = resolve_device(device)
    if target.type == "cpu":
        if cuda_graph:
            raise UnsupportedEnvironment("cuda_graph=True needs a CUDA device; time on 'cuda' or drop cuda_graph")
        return _measure_on(HostClockBackend(clock or time.perf_counter), subjects, schedule, warmup, False, False)
    with torch.cuda.device(target):
        backend = CudaEventBackend(target, flush_l2=flush_l2, cuda_graph=cuda_graph)
        return _measure_on(backend, subjects, schedule, warmup, cuda_graph, include_host, clock or time.perf_counter)


def _measure_on(
    backend: Backend,
    subjects: Sequence[_Subject],
    schedule: Sequence[Sequence[int]],
    warmup: int,
    cuda_graph: bool,
    include_host: bool,
    host_clock: Callable[[], float] = time.perf_counter,
) -> list[Timing]:
    timed = [_warm_up(backend, subject, warmup, cuda_graph) for subject in subjects]
    samples = _run_schedule(backend, timed, schedule, include_host, host_clock)
    return [
        Timing(samples_ms=s, device=backend.label, method=backend.method, l2_flushed=backend.l2_flushed)
        for s in samples
    ]


# --------------------------------------------------------------------------- public entry points


def time_fn(
    fn: Fn,
    *,
    device: DeviceLike = None,
    warmup: int = 3,
    trials: int = 30,
    flush_l2: bool = True,
    cuda_graph: bool = False,
    prepare: Fn | None = None,
    _clock: Callable[[], float] | None = None,
) -> Timing:
    """Time ``fn()`` ``trials`` times after ``warmup`` calls.

    ``device`` None means CUDA when available, else the CPU (host clock; the
    Timing then says device ``"cpu"``). ``prepare`` runs before every call of
    ``fn``, warm-up included, outside the timed region: use it for fresh
    inputs. ``cuda_graph`` times replays of a graph captured from ``fn``, which
    removes launch gaps for many small launches; it cannot honour ``prepare``.
    ``flush_l2`` has no effect on the CPU. ``_clock`` (seconds, like
    ``time.perf_counter``) replaces the host clock in tests.
    """
    (timing,) = _measure(
        [_Subject(fn, prepare)],
        [(0,)] * trials,
        device=device,
        warmup=warmup,
        trials=trials,
        flush_l2=flush_l2,
        cuda_graph=cuda_graph,
        clock=_clock,
    )
    return timing


def compare(
    baseline: Fn,
    candidate: Fn,
    *,
    device: DeviceLike = None,
    warmup: int = 3,
    trials: int = 30,
    flush_l2: bool = True,
    cuda_graph: bool = False,
    prepare_baseline: Fn | None = None,
    prepare_candidate: Fn | None = None,
    include_host: bool = False,
    _clock: Callable[[], float] | None = None,
) -> Comparison:
    """Interleaved A/B timing: ``trials`` rounds, each timing both functions.

    Rounds alternate the order (AB, BA, AB, ...) so that whatever drifts over
    time (clocks, temperature, other processes) costs both sides equally; the
    speedup is the median of the per-round ratios baseline/candidate.
    ``include_host`` is for whole forwards: a forward called back to back costs
    the longer of its device time and its host's time to launch it, so each
    reading is the larger of the two, the host's read in a second pass over the
    rounds (queued behind the 256 MiB flush, a launch-bound forward's launches
    are made while the flush runs, and the marks alone read its kernels only).
    Other arguments are as for :func:`time_fn`.
    """
    schedule = [(0, 1) if round_index % 2 == 0 else (1, 0) for round_index in range(trials)]
    base, cand = _measure(
        [_Subject(baseline, prepare_baseline), _Subject(candidate, prepare_candidate)],
        schedule,
        device=device,
        warmup=warmup,
        trials=trials,
        flush_l2=flush_l2,
        cuda_graph=cuda_graph,
        clock=_clock,
        include_host=include_host,
    )
    return Comparison.from_timings(base, cand)


# The protocol's whole public face, importable from here: the records live in
# ``timing``, the clocks in ``clocks``, the two-process form in ``split_timer``.
__all__ = [
    "HOST_READING",
    "METHOD_CPU",
    "METHOD_CUDA_EVENTS",
    "METHOD_CUDA_GRAPH",
    "MIN_FLUSH_BYTES",
    "CallReading",
    "Comparison",
    "DeviceLike",
    "Fn",
    "SplitComparison",
    "Timing",
    "compare",
    "compare_split",
    "l2_flush_bytes",
    "read_call",
    "read_host",
    "resolve_device",
    "time_call",
    "time_fn",
]
