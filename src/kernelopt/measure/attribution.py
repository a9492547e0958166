"""Per-launch GPU time from the PyTorch profiler.

The caller wraps each launch in a profiler range named ``<prefix><index>``
(``capture.recorder`` does this). Kineto links every GPU kernel to the CPU
range that was open when it was launched, so a range's ``device_time_total``
is the GPU time of exactly the kernels that launch issued: a Triton kernel,
or the several cuBLAS / cuDNN kernels one vendor call may issue. Raw profiler
events are first reduced to plain records so the arithmetic is tested on CPU.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.errors import UnsupportedEnvironment


@dataclass(frozen=True)
class EventRecord:
    """The fields of one profiler event that attribution needs."""

    name: str
    on_device: bool  # a GPU activity (kernel, memcpy, memset) rather than a CPU range
    annotation: bool  # a GPU-side mirror of a CPU range, not work: never summed
    duration_us: float  # device events: their own duration
    device_time_total_us: float  # CPU ranges: GPU time of kernels launched inside, children included

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass(frozen=True)
class Attribution:
    """Mean GPU time per model call, by launch label, plus everything the GPU did."""

    per_label_us: dict[str, float]
    device_total_us: float
    iterations: int

    @property
    def attributed_us(self) -> float:
        return sum(self.per_label_us.values())

    @property
    def unattributed_us(self) -> float:
        return max(0.0, self.device_total_us - self.attributed_us)


def summarize(records: Iterable[EventRecord], prefix: str, iterations: int) -> Attribution:
    """Average labelled-range GPU time and total device time over ``iterations`` calls."""
    if iterations <= 0:
        raise ValueError("iterations must be positive")
    per_label: dict[str, float] = defaultdict(float)
    total = 0.0
    for rec in records:
        if rec.on_device:
            if not rec.annotation:
                total += rec.duration_us
        elif rec.name.startswith(prefix):
            per_label[rec.name] += rec.device_time_total_us
    return Attribution(
        per_label_us={k: v / iterations for k, v in per_label.items()},
        device_total_us=total / iterations,
        iterations=iterations,
    )


def event_records(events: Iterable[Any]) -> list[EventRecord]:
    """Reduce ``profile.events()`` to :class:`EventRecord` (version drift stays here)."""
    records = []
    for e in events:
        on_device = e.device_type != torch.autograd.DeviceType.CPU
        records.append(
            EventRecord(
                name=e.name,
                on_device=on_device,
                annotation=bool(getattr(e, "is_user_annotation", False)),
                duration_us=float(e.time_range.elapsed_us()) if on_device else 0.0,
                device_time_total_us=0.0 if on_device else float(e.device_time_total),
            )
        )
    return records


def profile_records(fn: Callable[[], Any], iterations: int = 10, warmup: int = 2) -> list[EventRecord]:
    """Run ``fn`` under the CUDA profiler and return its event records."""
    if not torch.cuda.is_available():
        raise UnsupportedEnvironment("per-launch GPU time needs a CUDA GPU; none is visible to torch")
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            fn()
        torch.cuda.synchronize()
    return event_records(prof.events())


def attribute(fn: Callable[[], Any], prefix: str, iterations: int = 10, warmup: int = 2) -> Attribution:
    """Mean GPU time per call of ``fn`` for every profiler range whose name starts with ``prefix``."""
    return summarize(profile_records(fn, iterations, warmup), prefix, iterations)
