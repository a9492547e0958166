"""The clocks a timing is read from: the device to time on, and one backend per clock.

On CUDA, device events recorded around each call (the host clock would time the
launch, not the kernel), with an L2 flush buffer written before each timed call;
on the CPU, the host clock, which is correct only for synchronous work. Both
expose the same small interface (:class:`Backend`), so the timing loops in
:mod:`kernelopt.measure.timer` and :mod:`kernelopt.measure.split_timer` never ask
which clock they hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from kernelopt.errors import UnsupportedEnvironment

Fn = Callable[[], object]
DeviceLike = str | torch.device | None

METHOD_CUDA_EVENTS = "cuda-events"
METHOD_CUDA_GRAPH = "cuda-graph"
METHOD_CPU = "cpu-perf-counter"

MIN_FLUSH_BYTES = 256 * 2**20
"""The L2 flush buffer is at least this large, and at least 4x the device's L2."""


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


# Device clock cycles the per-call form (split_timer.read_call) keeps the device busy for after the flush,
# before its start mark: about 1 ms at Hopper's clocks. A call whose host-side path outlasts the flush
# otherwise left the device idle inside its reading: on the H200 the cluster op's graph read 0.59-0.76 ms
# a call for a 0.59 ms kernel, a noise of 4.4 % (benchmarks/h200-2026-12-03-suite-modes, eighteenth
# session), where back-to-back calls hide the host's path, as the in-process loop reads them.
LEAD_CYCLES = 2_000_000


def device_sleep(cycles: int) -> None:
    """A kernel that spins ``cycles`` clock cycles on the current stream: PyTorch's own test helper,
    ``torch.cuda._sleep`` (private; ``tests/test_measure_timer.py`` fails loudly where it moves)."""
    torch.cuda._sleep(cycles)


class Backend(Protocol):
    """What the per-trial loop needs from a clock: marks, and elapsed time between two."""

    label: str
    method: str
    l2_flushed: bool

    def reserve(self, n_marks: int) -> None: ...
    def flush_l2(self) -> None: ...
    def lead(self) -> None: ...
    def mark(self) -> object: ...
    def synchronize(self) -> None: ...
    def elapsed_ms(self, start: object, end: object) -> float: ...


class HostClockBackend:
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

    def lead(self) -> None:
        pass

    def mark(self) -> float:
        return self._clock()

    def synchronize(self) -> None:
        pass

    def elapsed_ms(self, start: object, end: object) -> float:
        return (float(end) - float(start)) * 1000.0  # type: ignore[arg-type]


class CudaEventBackend:
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

    def lead(self) -> None:
        """Keep the device busy for :data:`LEAD_CYCLES` before the next mark, so that a call made after
        it has its launches queued before the device reaches them (:func:`device_sleep`)."""
        device_sleep(LEAD_CYCLES)

    def mark(self) -> torch.cuda.Event:
        event = self._events[self._next]
        self._next += 1
        event.record()
        return event

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def elapsed_ms(self, start: object, end: object) -> float:
        return float(start.elapsed_time(end))  # type: ignore[attr-defined]
