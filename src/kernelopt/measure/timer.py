"""Wall-clock timing of GPU work, and interleaved A/B comparison.

Every speedup kernelopt prints rests on these numbers, so they follow one
protocol (see the design brief's quality bar):

* warm-up calls first, so compilation, module load and handle creation stay out;
* on CUDA, device events around each call (the host clock would time the launch,
  not the kernel), with the L2 cache flushed before every timed call so a kernel
  is not credited with data a previous call left in the cache;
* many trials, reported as a median with quartiles, never a mean;
* baseline and candidate timed in the same rounds, alternating which goes
  first (AB, BA, AB, ...), so clock drift, thermal throttling and neighbours on
  the machine hit both equally.

Both :func:`time_fn` and :func:`compare` drive the same per-trial loop
(:func:`_run_schedule`); they differ only in the schedule they hand it.
:func:`time_call` and :func:`compare_split` are the per-call form of the same
protocol, for a comparison whose two sides live in two processes. Long because
the protocol is one thing: its statistics, backends and loops belong together.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelopt.errors import KerneloptError, UnsupportedEnvironment

Fn = Callable[[], object]
DeviceLike = str | torch.device | None

METHOD_CUDA_EVENTS = "cuda-events"
METHOD_CUDA_GRAPH = "cuda-graph"
METHOD_CPU = "cpu-perf-counter"

MIN_FLUSH_BYTES = 256 * 2**20
"""The L2 flush buffer is at least this large, and at least 4x the device's L2."""


# --------------------------------------------------------------------------- statistics


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), defined for one sample too."""
    n = len(sorted_values)
    position = (n - 1) * q
    low = math.floor(position)
    high = min(low + 1, n - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def _format_ms(value_ms: float) -> str:
    """Milliseconds for long calls, microseconds for short ones, 3-4 significant digits."""
    if value_ms >= 0.1:
        return f"{value_ms:.3f} ms"
    return f"{value_ms * 1000:.2f} us"


def _check_samples(name: str, values: Sequence[float]) -> tuple[float, ...]:
    samples = tuple(float(v) for v in values)
    if not samples:
        raise ValueError(f"{name} must hold at least one value")
    if any(not math.isfinite(v) or v < 0 for v in samples):
        raise ValueError(f"{name} must be finite and non-negative, got {samples}")
    return samples


@dataclass(frozen=True)
class Timing:
    """Samples of one timed function, with how and where they were taken.

    ``device`` is ``"cpu"`` for host-clock timings, so a report can say the
    number is CPU-only; on CUDA it names the GPU (``"cuda:0 NVIDIA H200"``).
    """

    samples_ms: tuple[float, ...]
    device: str
    method: str
    l2_flushed: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples_ms", _check_samples("samples_ms", self.samples_ms))

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return _quantile(sorted(self.samples_ms), 0.5)

    @property
    def q1_ms(self) -> float:
        return _quantile(sorted(self.samples_ms), 0.25)

    @property
    def q3_ms(self) -> float:
        return _quantile(sorted(self.samples_ms), 0.75)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def rel_spread(self) -> float:
        """Interquartile range over median: the noise a difference must clear.

        0.0 when every sample is equal; infinite when the median is 0 but the
        samples are not all 0 (a clock too coarse for what it timed).
        """
        iqr, median = self.iqr_ms, self.median_ms
        if iqr == 0:
            return 0.0
        return iqr / median if median > 0 else math.inf

    @property
    def is_cpu_only(self) -> bool:
        return self.device == "cpu"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the summary statistics are included for readers, ignored by from_dict."""
        return {
            "samples_ms": list(self.samples_ms),
            "device": self.device,
            "method": self.method,
            "l2_flushed": self.l2_flushed,
            "median_ms": self.median_ms,
            "q1_ms": self.q1_ms,
            "q3_ms": self.q3_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timing:
        return cls(
            samples_ms=tuple(data["samples_ms"]),
            device=str(data["device"]),
            method=str(data["method"]),
            l2_flushed=bool(data["l2_flushed"]),
        )

    def __str__(self) -> str:
        cache = "L2 flushed" if self.l2_flushed else "L2 not flushed"
        if self.is_cpu_only:
            cache = "CPU only"
        spread = self.rel_spread * 100
        return f"{_format_ms(self.median_ms)} ±{spread:.1f}% (IQR, n={self.n}, {self.method}, {cache})"


def _ratio(baseline_ms: float, candidate_ms: float) -> float:
    """baseline/candidate; a zero-length candidate sample (coarse clock) is infinitely fast."""
    if candidate_ms > 0:
        return baseline_ms / candidate_ms
    return math.inf if baseline_ms > 0 else 1.0


@dataclass(frozen=True)
class Comparison:
    """An interleaved A/B measurement: ratio > 1 means the candidate is faster.

    The speedup is the median of per-round ratios rather than the ratio of the
    two medians: a round's two calls ran back to back, so slow drift cancels
    inside each ratio.
    """

    baseline: Timing
    candidate: Timing
    ratios: tuple[float, ...]

    def __post_init__(self) -> None:
        ratios = tuple(float(r) for r in self.ratios)
        if not ratios:
            raise ValueError("ratios must hold at least one value")
        if any(math.isnan(r) or r < 0 for r in ratios):
            raise ValueError(f"ratios must be non-negative numbers, got {ratios}")
        object.__setattr__(self, "ratios", ratios)

    @classmethod
    def from_timings(cls, baseline: Timing, candidate: Timing) -> Comparison:
        """Pair the i-th samples of two timings taken in the same rounds."""
        if baseline.n != candidate.n:
            raise ValueError(f"timings have {baseline.n} and {candidate.n} samples; rounds must pair up")
        ratios = tuple(_ratio(b, c) for b, c in zip(baseline.samples_ms, candidate.samples_ms))
        return cls(baseline=baseline, candidate=candidate, ratios=ratios)

    @property
    def speedup(self) -> float:
        return _quantile(sorted(self.ratios), 0.5)

    @property
    def speedup_q1(self) -> float:
        return _quantile(sorted(self.ratios), 0.25)

    @property
    def speedup_q3(self) -> float:
        return _quantile(sorted(self.ratios), 0.75)

    @property
    def noise(self) -> float:
        """Relative half-width of the middle half of the per-round ratios.

        ``(speedup_q3 - speedup_q1) / (2 * speedup)``: comparing a function with
        itself gives a speedup of about ``1 ± noise``, so a speedup whose
        distance from 1 is not well above ``noise`` is not a measured speedup.
        It describes one round, not the median of all rounds, so it is a
        conservative margin for a performance gate.
        """
        speedup = self.speedup
        spread = self.speedup_q3 - self.speedup_q1
        if spread == 0 or math.isnan(spread):
            return 0.0
        return spread / (2 * speedup) if 0 < speedup < math.inf else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "ratios": list(self.ratios),
            "speedup": self.speedup,
            "speedup_q1": self.speedup_q1,
            "speedup_q3": self.speedup_q3,
            "noise": self.noise,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(
            baseline=Timing.from_dict(data["baseline"]),
            candidate=Timing.from_dict(data["candidate"]),
            ratios=tuple(data["ratios"]),
        )

    def __str__(self) -> str:
        return (
            f"{self.speedup:.3f}x [{self.speedup_q1:.3f}-{self.speedup_q3:.3f}] "
            f"(noise ±{self.noise * 100:.1f}%, n={len(self.ratios)}, {self.baseline.method})"
        )


# --------------------------------------------------------------------------- devices


def resolve_device(device: DeviceLike = None) -> torch.device:
    """The device to time on: the current CUDA device when there is one, else the CPU.

    Raises :class:`UnsupportedEnvironment` for a CUDA device that is not there
    and for device types we cannot time (anything but ``cuda`` and ``cpu``).
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    target = torch.device(device)
    if target.type == "cpu":
        return target
    if target.type != "cuda":
        raise UnsupportedEnvironment(f"cannot time on a {target.type!r} device; use 'cuda' or 'cpu'")
    if not torch.cuda.is_available():
        raise UnsupportedEnvironment(
            f"timing on {target} was asked for but torch sees no CUDA device "
            f"(torch {torch.__version__}); install a CUDA build of torch or time on 'cpu'"
        )
    index = torch.cuda.current_device() if target.index is None else target.index
    if index >= torch.cuda.device_count():
        raise UnsupportedEnvironment(
            f"timing on cuda:{index} was asked for but only {torch.cuda.device_count()} CUDA device(s) exist"
        )
    return torch.device("cuda", index)


def l2_flush_bytes(device: torch.device) -> int:
    """Size of the buffer written before each timed call: max(256 MiB, 4 x L2)."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    return max(MIN_FLUSH_BYTES, 4 * int(l2))


# --------------------------------------------------------------------------- backends


class _Backend(Protocol):
    """What the per-trial loop needs from a clock: marks, and elapsed time between two."""

    label: str
    method: str
    l2_flushed: bool

    def reserve(self, n_marks: int) -> None: ...
    def flush_l2(self) -> None: ...
    def mark(self) -> object: ...
    def synchronize(self) -> None: ...
    def elapsed_ms(self, start: object, end: object) -> float: ...


class _HostClockBackend:
    """Host clock around each call; correct only for synchronous (CPU) work."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.label = "cpu"
        self.method = METHOD_CPU
        self.l2_flushed = False

    def reserve(self, n_marks: int) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def mark(self) -> float:
        return self._clock()

    def synchronize(self) -> None:
        pass

    def elapsed_ms(self, start: object, end: object) -> float:
        return (float(end) - float(start)) * 1000.0  # type: ignore[arg-type]


class _CudaEventBackend:
    """CUDA events recorded on the current stream, read once after a final synchronize."""

    def __init__(self, device: torch.device, flush_l2: bool, cuda_graph: bool) -> None:
        self.label = f"cuda:{device.index} {torch.cuda.get_device_name(device)}"
        self.method = METHOD_CUDA_GRAPH if cuda_graph else METHOD_CUDA_EVENTS
        self.l2_flushed = flush_l2
        self._flush_buffer = torch.empty(l2_flush_bytes(device), dtype=torch.int8, device=device) if flush_l2 else None
        self._events: list[torch.cuda.Event] = []
        self._next = 0

    def reserve(self, n_marks: int) -> None:
        # Created ahead so no event creation sits between a call and its end mark.
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(n_marks)]
        self._next = 0

    def flush_l2(self) -> None:
        if self._flush_buffer is not None:
            self._flush_buffer.zero_()

    def mark(self) -> torch.cuda.Event:
        event = self._events[self._next]
        self._next += 1
        event.record()
        return event

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def elapsed_ms(self, start: object, end: object) -> float:
        return float(start.elapsed_time(end))  # type: ignore[attr-defined]


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


def _warm_up(backend: _Backend, subject: _Subject, warmup: int, cuda_graph: bool) -> _Subject:
    """Run the warm-up calls; return the subject to time (a graph replay under cuda_graph)."""
    if cuda_graph:
        timed = _Subject(fn=_capture_graph(subject.fn, warmup))
    else:
        for _ in range(warmup):
            subject.call_prepared()
        timed = subject
    backend.synchronize()
    return timed


def _run_schedule(
    backend: _Backend, subjects: Sequence[_Subject], schedule: Sequence[Sequence[int]]
) -> list[tuple[float, ...]]:
    """The one per-trial loop: each round calls subjects in the round's order.

    Per call: ``prepare`` (untimed), L2 flush (untimed), start mark, the call,
    end mark. On CUDA nothing synchronizes until all rounds are queued, so the
    host never stalls the stream between trials; marks are read afterwards.
    Returns the samples of each subject, in round order.
    """
    backend.reserve(2 * sum(len(order) for order in schedule))
    marks: list[list[tuple[object, object]]] = [[] for _ in subjects]
    for order in schedule:
        for index in order:
            subject = subjects[index]
            if subject.prepare is not None:
                subject.prepare()
            backend.flush_l2()
            start = backend.mark()
            subject.fn()
            end = backend.mark()
            marks[index].append((start, end))
    backend.synchronize()
    return [tuple(backend.elapsed_ms(start, end) for start, end in pairs) for pairs in marks]


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
        return _measure_on(_HostClockBackend(clock or time.perf_counter), subjects, schedule, warmup, False)
    with torch.cuda.device(target):
        backend = _CudaEventBackend(target, flush_l2=flush_l2, cuda_graph=cuda_graph)
        return _measure_on(backend, subjects, schedule, warmup, cuda_graph)


def _measure_on(
    backend: _Backend,
    subjects: Sequence[_Subject],
    schedule: Sequence[Sequence[int]],
    warmup: int,
    cuda_graph: bool,
) -> list[Timing]:
    timed = [_warm_up(backend, subject, warmup, cuda_graph) for subject in subjects]
    samples = _run_schedule(backend, timed, schedule)
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
    _clock: Callable[[], float] | None = None,
) -> Comparison:
    """Interleaved A/B timing: ``trials`` rounds, each timing both functions.

    Rounds alternate the order (AB, BA, AB, ...) so that whatever drifts over
    time (clocks, temperature, other processes) costs both sides equally; the
    speedup is the median of the per-round ratios baseline/candidate. Other
    arguments are as for :func:`time_fn`.
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
    )
    return Comparison.from_timings(base, cand)


# --------------------------------------------------------------------------- one process judges, another runs

_BACKENDS: dict[tuple[str, bool], _Backend] = {}


def _backend_for(target: torch.device, flush_l2: bool, clock: Callable[[], float] | None = None) -> _Backend:
    if target.type == "cpu":
        return _HostClockBackend(clock or time.perf_counter)
    key = (str(target), flush_l2)
    if key not in _BACKENDS:  # one flush buffer per device, not one per call
        with torch.cuda.device(target):
            _BACKENDS[key] = _CudaEventBackend(target, flush_l2=flush_l2, cuda_graph=False)
    return _BACKENDS[key]


def time_call(
    fn: Fn, *, device: DeviceLike = None, flush_l2: bool = True, _clock: Callable[[], float] | None = None
) -> float:
    """Milliseconds of one call of ``fn``: L2 flushed, marks around the call, then a synchronize.

    The per-call form of the protocol, for a comparison whose two sides live in two
    processes (:func:`compare_split`): each side times its own call and waits for it
    before the other side runs."""
    target = resolve_device(device)
    backend = _backend_for(target, flush_l2, _clock)
    backend.reserve(2)
    backend.flush_l2()
    start = backend.mark()
    fn()
    end = backend.mark()
    backend.synchronize()
    return backend.elapsed_ms(start, end)


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
    _clock: Callable[[], float] | None = None,
) -> SplitComparison:
    """:func:`compare` when the candidate runs in another process.

    ``baseline`` is timed here with :func:`time_call` or, with ``baseline_remote``,
    is itself a remote call that returns its reading (a clean process no candidate
    ran in: the two sides are then timed the same way, which on the H200 mattered
    more than the kernels did); ``remote_candidate()`` asks the other process for
    one timed call and returns its reading in ms. Rounds alternate
    AB / BA as in :func:`compare`; ``prepare_*`` run before every call and
    ``after_candidate`` after every candidate call, outside the timed region, and this
    process synchronizes before each remote call so what it prepared is in memory
    when the other side starts.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    target = resolve_device(device)
    clock = _clock or time.perf_counter

    def sync() -> None:
        if target.type == "cuda":
            torch.cuda.synchronize(target)

    def run_baseline() -> float:
        if prepare_baseline is not None:
            prepare_baseline()
        if baseline_remote:
            sync()
            return float(baseline())  # type: ignore[arg-type]
        return time_call(baseline, device=target, flush_l2=flush_l2, _clock=_clock)

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
    for round_index in range(trials):
        order = (0, 1) if round_index % 2 == 0 else (1, 0)
        for side in order:
            if side == 0:
                base.append(run_baseline())
            else:
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
