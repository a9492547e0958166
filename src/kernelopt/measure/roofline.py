"""Memory roofline and Amdahl arithmetic: what a kernel could gain, before searching.

A kernel already moving its bytes at the measured copy bandwidth cannot be made
faster by any rewrite that keeps its traffic, and a kernel that is a small
share of the model cannot buy more than that share end to end. Both bounds are
printed beside every speedup. Pure arithmetic: units are bytes, microseconds
and GB/s with GB = 1e9 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


def tensor_traffic_bytes(shape: Sequence[int], stride: Sequence[int], itemsize: int) -> int:
    """Bytes of the distinct memory elements a strided view touches.

    A broadcast dimension (stride 0) reads the same elements again and counts
    once; a transposed view counts its elements once. Computed as
    ``min(n, 1 + sum((size_i - 1) * |stride_i|)) * itemsize`` where ``n`` is
    the number of elements after dropping broadcast dimensions: exact for
    dense, permuted, sliced and broadcast views, an upper bound for
    overlapping views with gaps. 0 when any size is 0.
    """
    if len(shape) != len(stride):
        raise ValueError(f"shape {tuple(shape)} and stride {tuple(stride)} differ in length")
    if itemsize <= 0:
        raise ValueError(f"itemsize must be positive, got {itemsize}")
    if any(size < 0 for size in shape):
        raise ValueError(f"sizes must be non-negative, got {tuple(shape)}")
    if any(size == 0 for size in shape):
        return 0
    distinct = math.prod(size for size, st in zip(shape, stride) if st != 0)
    span = 1 + sum((size - 1) * abs(st) for size, st in zip(shape, stride))
    return min(distinct, span) * itemsize


@dataclass(frozen=True)
class Roofline:
    """A kernel's traffic and time against the device's measured peak bandwidth."""

    bytes_read: int
    bytes_written: int
    time_us: float
    peak_gbps: float

    def __post_init__(self) -> None:
        if self.bytes_read < 0 or self.bytes_written < 0:
            raise ValueError(
                f"byte counts must be non-negative, got {self.bytes_read} read, {self.bytes_written} written"
            )
        if not (self.time_us > 0 and math.isfinite(self.time_us)):
            raise ValueError(f"time_us must be positive and finite, got {self.time_us}")
        if not (self.peak_gbps > 0 and math.isfinite(self.peak_gbps)):
            raise ValueError(f"peak_gbps must be positive and finite, got {self.peak_gbps}")

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def achieved_gbps(self) -> float:
        return self.bytes_total / (self.time_us * 1e3)

    @property
    def pct_of_peak(self) -> float:
        """Achieved over peak bandwidth, in percent."""
        return 100.0 * self.achieved_gbps / self.peak_gbps

    @property
    def min_time_us(self) -> float:
        """The time the traffic takes at peak bandwidth: no rewrite with this traffic beats it."""
        return self.bytes_total / (self.peak_gbps * 1e3)

    @property
    def headroom_us(self) -> float:
        """Time a perfect kernel with the same traffic could save."""
        return max(0.0, self.time_us - self.min_time_us)

    def at_roofline(self, threshold: float = 0.9) -> bool:
        """True when the kernel reaches ``threshold`` of peak: searching it is unlikely to pay."""
        return self.achieved_gbps >= threshold * self.peak_gbps

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "time_us": self.time_us,
            "peak_gbps": self.peak_gbps,
            "achieved_gbps": self.achieved_gbps,
            "pct_of_peak": self.pct_of_peak,
            "min_time_us": self.min_time_us,
            "headroom_us": self.headroom_us,
        }


ROOFLINE_DONE = 90.0  # percent of the peak copy bandwidth past which a kernel has little left to buy


def amdahl_bound(total_us: float, headroom_us: float) -> float:
    """Best end-to-end speedup from removing ``headroom_us`` of ``total_us``.

    ``total / (total - headroom)``; infinite when the headroom is the whole
    time. A kernel that is 2 % of the model cannot buy more than about 1.02x.
    """
    if not (total_us > 0 and math.isfinite(total_us)):
        raise ValueError(f"total_us must be positive and finite, got {total_us}")
    if not (0 <= headroom_us <= total_us):
        raise ValueError(f"headroom_us must lie between 0 and total_us ({total_us}), got {headroom_us}")
    remaining = total_us - headroom_us
    return total_us / remaining if remaining > 0 else math.inf


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean, the right average of speedup ratios (1/2x and 2x average to 1x)."""
    items = [float(v) for v in values]
    if not items:
        raise ValueError("geometric_mean of no values")
    if any(not (v > 0) or math.isinf(v) for v in items):
        raise ValueError(f"geometric_mean needs positive finite values, got {items}")
    return math.exp(math.fsum(math.log(v) for v in items) / len(items))
