"""Measure: timing, the bandwidth ceiling and roofline / Amdahl bounds.

Self-contained below capture: it times callables and does arithmetic on bytes
and microseconds, and knows nothing of artifacts or kernels.
"""

from __future__ import annotations

from kernelopt.measure.attribution import Attribution, EventRecord, attribute, summarize
from kernelopt.measure.bandwidth import Bandwidth, measure_copy_bandwidth
from kernelopt.measure.roofline import Roofline, amdahl_bound, geometric_mean, tensor_traffic_bytes
from kernelopt.measure.timer import (
    METHOD_CPU,
    METHOD_CUDA_EVENTS,
    METHOD_CUDA_GRAPH,
    Comparison,
    Timing,
    compare,
    l2_flush_bytes,
    resolve_device,
    time_fn,
)

__all__ = [
    "Attribution",
    "EventRecord",
    "attribute",
    "summarize",
    "METHOD_CPU",
    "METHOD_CUDA_EVENTS",
    "METHOD_CUDA_GRAPH",
    "Bandwidth",
    "Comparison",
    "Roofline",
    "Timing",
    "amdahl_bound",
    "compare",
    "geometric_mean",
    "l2_flush_bytes",
    "measure_copy_bandwidth",
    "resolve_device",
    "tensor_traffic_bytes",
    "time_fn",
]
