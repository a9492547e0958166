"""Timing and Comparison: the samples a measurement returns, and their statistics.

Every number kernelopt reports is one of these two records: a :class:`Timing` (the
samples of one timed function, with how and where they were taken) or a
:class:`Comparison` (two timings taken in the same interleaved rounds, and the
per-round ratios). They are plain data: they cross the worker boundary, go into
results files and come back through ``from_dict``, so this module needs no torch
and no device. How the samples are taken is :mod:`kernelopt.measure.timer`'s job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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
