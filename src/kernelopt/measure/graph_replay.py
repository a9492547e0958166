"""A whole forward recorded as one CUDA graph, for timing it the way a CUDA-graph mode runs it.

A launch-bound model (a transformer at small batch: the GPU busy a third of the wall time) is
delivered under a CUDA-graph mode, where its launches cost almost nothing. Timed without graphs,
a kernel's gain there is diluted by launch overhead the user never pays, and falls within the
noise. Recording the forward once with :class:`torch.cuda.CUDAGraph` and timing its replays
measures what the graphs leave: the kernels' own time. Both sides of a comparison are recorded
the same way, each in its own process, on static inputs whose values the caller may change
between replays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

WARMUP = 2  # calls on a side stream before recording: lazy initialisation must not land in the graph


class GraphCaptureError(RuntimeError):
    """The forward could not be recorded as a CUDA graph (it synchronizes, or reads a value on the host)."""


class RecordedForward:
    """``fn`` recorded once as a CUDA graph; :meth:`replay` runs its launches again on the same memory.

    ``outputs`` are the tensors the recorded call returned: the graph writes them on every replay.
    Delete the object (or drop every reference) to hand the graph's memory pool back."""

    def __init__(self, fn: Callable[[], Any], device: torch.device) -> None:
        if device.type != "cuda":
            raise GraphCaptureError(f"CUDA graphs record CUDA work; this forward runs on {device.type}")
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        try:
            with torch.cuda.stream(side):
                for _ in range(WARMUP):
                    fn()
            torch.cuda.current_stream(device).wait_stream(side)
            torch.cuda.synchronize(device)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outputs = fn()
        except Exception as exc:  # a capture error leaves the message, not the traceback, as the reason
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise GraphCaptureError(f"the forward could not be recorded as a CUDA graph: {first}") from exc
        torch.cuda.synchronize(device)

    def replay(self) -> None:
        self.graph.replay()
