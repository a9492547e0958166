"""The measured memory-bandwidth ceiling of the device.

Roofline percentages are only as honest as the peak they divide by, and
datasheet numbers are leads, not facts: the peak is measured once, as a large
device-to-device copy, counting bytes read plus bytes written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.measure.timer import DeviceLike, Timing, resolve_device, time_fn


@dataclass(frozen=True)
class Bandwidth:
    """Copy bandwidth from the median trial; ``device`` is ``"cpu"`` for a host measurement."""

    gbps: float
    timing: Timing
    device: str
    nbytes: int

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written by one copy."""
        return 2 * self.nbytes

    @property
    def best_gbps(self) -> float:
        """Bandwidth of the fastest trial: an upper estimate of the ceiling."""
        return _gbps(self.bytes_moved, self.timing.min_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"gbps": self.gbps, "timing": self.timing.to_dict(), "device": self.device, "nbytes": self.nbytes}


def _gbps(nbytes: int, ms: float) -> float:
    """GB/s with GB = 1e9 bytes, as vendors and the roofline module count."""
    return nbytes / (ms * 1e6) if ms > 0 else float("inf")


def measure_copy_bandwidth(device: DeviceLike = None, nbytes: int = 2**30, trials: int = 20) -> Bandwidth:
    """Time ``dst.copy_(src)`` of ``nbytes`` random bytes with the L2 flushed.

    The source holds random data, not zeros (a zero-filled buffer can run
    faster than real data), and the copy is checked once afterwards so a
    no-op cannot report a bandwidth. ``nbytes`` should be far larger than the
    last-level cache; the default 1 GiB is for GPUs.
    """
    if nbytes <= 0:
        raise ValueError(f"nbytes must be positive, got {nbytes}")
    target = resolve_device(device)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=target)
    dst = torch.empty_like(src)
    timing = time_fn(lambda: dst.copy_(src), device=target, trials=trials, flush_l2=True)
    if not torch.equal(dst, src):
        raise RuntimeError(f"the bandwidth copy on {timing.device} produced a wrong result")
    return Bandwidth(gbps=_gbps(2 * nbytes, timing.median_ms), timing=timing, device=timing.device, nbytes=nbytes)
