"""Plain-data views of kernels and measurements for prompt templates.

Templates see dictionaries of strings and numbers only, built here from the
objects the caller holds (a :class:`KernelDef`, a roofline's numbers, an Nsight
Compute metrics dict). Keeping the conversion in one place keeps the prompts
free of formatting logic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelopt.agents.roles.base import format_number, kernel_kind
from kernelopt.capture.output_code import KernelDef

# Roofline keys in the order a reader wants them, with their labels and units.
_ROOFLINE_FIELDS = (
    ("time_us", "kernel time", "us"),
    ("bytes_total", "bytes moved (read + written)", "B"),
    ("bytes_read", "bytes read", "B"),
    ("bytes_written", "bytes written", "B"),
    ("achieved_gbps", "achieved bandwidth", "GB/s"),
    ("peak_gbps", "measured peak copy bandwidth", "GB/s"),
    ("pct_of_peak", "share of peak bandwidth", "%"),
    ("min_time_us", "time at peak bandwidth (lower bound)", "us"),
    ("headroom_us", "headroom (time minus lower bound)", "us"),
    ("flops", "floating-point operations", ""),
    ("achieved_tflops", "achieved arithmetic rate", "TFLOP/s"),
    ("share_pct", "share of the model's GPU time", "%"),
    ("amdahl_bound", "best end-to-end speedup from this kernel (Amdahl)", "x"),
)


def kernel_view(kernel: KernelDef) -> dict[str, Any]:
    """What the prompts show of a kernel: name, kind, decorator, parameters and source."""
    return {
        "name": kernel.name,
        "kind": kernel_kind(kernel.heuristic),
        "decorator": kernel.heuristic or "<kind>",
        "source": kernel.source.strip(),
        "runtime_params": [p.name for p in kernel.runtime_params],
        "constexpr_params": [p.name for p in kernel.params if p.constexpr],
    }


def measurement_lines(values: Mapping[str, Any] | Any) -> list[tuple[str, str]]:
    """(label, value) lines for a roofline-like mapping (or an object with ``to_dict()``).

    Known keys come first in a fixed order with units; other keys follow as they are.
    """
    data = dict(values.to_dict() if hasattr(values, "to_dict") else values)
    if "bytes_total" not in data and "bytes_read" in data and "bytes_written" in data:
        data["bytes_total"] = data["bytes_read"] + data["bytes_written"]
    lines = []
    for key, label, unit in _ROOFLINE_FIELDS:
        if data.get(key) is None:
            continue
        value = data.pop(key)
        text = format_number(value)
        if unit == "B" and isinstance(value, (int, float)):
            text = f"{text} B ({format_bytes(value)})"
        elif unit:
            text = f"{text} {unit}"
        lines.append((label, text))
    for key in sorted(data):
        if data[key] is not None:
            lines.append((key, format_number(data[key])))
    return lines


def format_bytes(n: float) -> str:
    """Bytes in decimal units with three significant digits: 16.9 KB, 8.59 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:g} B"


def launch_view(launch: Mapping[str, Any] | None) -> dict[str, str]:
    """Launch arguments (shape, dtype, stride strings or sizes) as name -> text."""
    return {str(k): format_number(v) if isinstance(v, (int, float)) else str(v) for k, v in (launch or {}).items()}
