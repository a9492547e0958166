"""Peak bytes of the CPU memory torch allocates inside a piece of code, read off the profiler.

A gate that holds too many copies of a gigabyte problem runs out of GPU memory on a real model
(row-L2 at 8.6 GB in, 8.6 GB out did on the H200); the copies a gate makes are the same on the
CPU, so they are counted here from the allocator's own events (``profile_memory``): each op's
allocations at its start, each free as it happens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile


def peak_bytes(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(the most bytes allocated inside ``fn`` and alive at once, ``fn``'s result)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    deltas = sorted(
        (event.time_range.start, event.cpu_memory_usage if event.name == "[memory]" else event.self_cpu_memory_usage)
        for event in prof.events()
    )
    current = peak = 0
    for _start, delta in deltas:
        current += delta
        peak = max(peak, current)
    return peak, result
