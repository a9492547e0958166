"""The analysis of a captured model: where its GPU time goes, and how much of it is headroom.

Eager and compiled models are timed interleaved in one process with the L2
flushed; every launch of the compiled forward is attributed its GPU time with
the profiler; each generated Triton launch gets its ideal traffic (each tensor
argument read or written once), achieved bandwidth against the measured peak,
and headroom. The Amdahl bound is the best end-to-end speedup reachable by
bringing every Triton launch to the roofline while vendor calls stay as they are.
Beside it, the *traffic floor*: the time the whole forward would take if it moved
its inputs, weights and outputs once at the peak (what a graph fused into one
memory-bound kernel could reach); where only generated kernels run, the compiled
time over that floor is the *fusion bound*, headroom no single kernel's roofline
shows, since every intermediate tensor's round trip through memory counts against it.
It runs wherever the captured model lives: in ``kernelopt analyze``'s process,
or in an evaluation worker for ``optimize``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kernelopt.capture import Artifact, Launch, LaunchSink
from kernelopt.capture.copy_kernels import moves_only
from kernelopt.capture.kernel_source import second_passes
from kernelopt.capture.recorder import LAUNCH_LABEL_PREFIX, traffic_bytes
from kernelopt.config import default_of
from kernelopt.evaluate.forced_rereads import ForcedRereads, traced_rereads
from kernelopt.measure import Roofline, amdahl_bound, compare
from kernelopt.measure.attribution import attribute
from kernelopt.measure.roofline import ROOFLINE_DONE
from kernelopt.problem import outputs_as_list


@dataclass
class LaunchReport:
    """One launch's row of the analyze table."""

    index: int
    graph: int
    kind: str
    name: str
    time_us: float
    share: float  # of the attributed GPU time
    bytes_read: int | None = None
    bytes_written: int | None = None
    achieved_gbps: float | None = None
    pct_of_peak: float | None = None  # percent of the measured peak copy bandwidth
    headroom_us: float | None = None
    config: dict[str, Any] | None = None
    kernel_sha256: str | None = None
    moves_only: bool = False  # a Triton kernel that only moves data: a layout copy, transpose or concatenation
    second_passes: int = 0  # a Triton kernel's loops over its rows after the first (a looped softmax: 1)


@dataclass
class AnalysisReport:
    problem: str
    device: str
    peak_gbps: float
    eager_ms: float
    eager_spread: float
    compiled_ms: float
    compiled_spread: float
    speedup_vs_eager: float
    attributed_ms: float
    unattributed_ms: float
    triton_ms: float
    triton_headroom_ms: float
    amdahl_bound: float
    gpu_busy: float = 1.0  # kernel time over the compiled forward's measured time
    launch_overhead_bound: float = 1.0  # the speedup if the GPU never waited between launches (CUDA graphs' ceiling)
    floor_bytes: int | None = None  # inputs, weights and outputs, each read or written once, plus reread_bytes
    reread_bytes: int = 0  # inputs read a second time by any fusion: a statistic wider than the chip (forced_rereads)
    rereads: list[str] = field(default_factory=list)  # each, in words; or why none could be counted
    floor_ms: float | None = None  # floor_bytes at the peak copy bandwidth
    fusion_bound: float | None = None  # compiled over floor_ms; None where vendor calls run (their work is not traffic)
    moves_ms: float = 0.0  # GPU time of the Triton kernels that only move data (capture.copy_kernels)
    moves_launches: int = 0
    rereads_ms: float = 0.0  # GPU time of the Triton kernels that pass over their rows more than once, below
    # ROOFLINE_DONE by their arguments' traffic (where a second read from memory can still be removed)
    rereads_cached_ms: float = 0.0  # those past it: their second read comes from cache, nothing to remove
    own_ops: dict[str, int] = field(default_factory=dict)  # ops kernelopt's own kernels would take, by option
    stock: dict[str, Any] = field(default_factory=dict)  # analyze --stock-modes: mode -> its process's record
    launches: list[LaunchReport] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None

    @property
    def moves_share(self) -> float:
        """The kernels that only move data, as a share of the compiled forward's time."""
        return self.moves_ms / self.compiled_ms if self.compiled_ms > 0 else 0.0

    @property
    def rereads_share(self) -> float:
        """The kernels that pass over their rows more than once, as a share of the compiled forward's time."""
        return self.rereads_ms / self.compiled_ms if self.compiled_ms > 0 else 0.0

    @property
    def rereads_cached_share(self) -> float:
        """Those at the copy roofline (their second read from cache), as a share of the compiled forward's time."""
        return self.rereads_cached_ms / self.compiled_ms if self.compiled_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch_traffic(launch: Launch) -> tuple[int, int]:
    """Ideal bytes (read, written) of a launch from its tensor arguments."""
    return traffic_bytes(launch.args)


def build_launch_reports(
    launches: list[Launch], times_us: dict[int, float], peak_gbps: float, sources: dict[str, str] | None = None
) -> list[LaunchReport]:
    """Join captured launches with their measured times; roofline for generated Triton kernels only, and
    with ``sources`` (kernel name -> Inductor's module) which of them only move data."""
    total = sum(times_us.values()) or 1.0
    rows = []
    for launch in launches:
        t = times_us.get(launch.index, 0.0)
        row = LaunchReport(
            index=launch.index,
            graph=launch.graph,
            kind=launch.kind,
            name=launch.name,
            time_us=t,
            share=t / total,
            config=launch.config,
            kernel_sha256=launch.kernel_sha256,
        )
        if launch.kind == "triton" and sources and launch.name in sources:
            row.moves_only = moves_only(sources[launch.name], launch.name)
            row.second_passes = second_passes(sources[launch.name])
        if launch.kind == "triton" and t > 0:
            read, written = launch_traffic(launch)
            roof = Roofline(bytes_read=read, bytes_written=written, time_us=t, peak_gbps=peak_gbps)
            row.bytes_read, row.bytes_written = read, written
            row.achieved_gbps, row.pct_of_peak, row.headroom_us = roof.achieved_gbps, roof.pct_of_peak, roof.headroom_us
        rows.append(row)
    return rows


def only_generated(rows: Sequence[LaunchReport]) -> bool:
    """Whether every launch is a generated (Triton) kernel: only then is the forward's time all traffic, and
    the traffic floor a bound on it."""
    return bool(rows) and all(r.kind == "triton" for r in rows)


def graph_floor_bytes(model: torch.nn.Module, inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    """Bytes the forward must move at least: every tensor input, parameter and buffer read once and
    every output written once, each distinct piece of memory counted once (a weight tied to two
    names, an output that is a view of an input)."""
    seen: set[tuple[int, int, int]] = set()
    total = 0
    tensors = [*inputs, *model.parameters(), *model.buffers(), *outputs]
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        key = (t.data_ptr(), t.numel(), t.element_size())
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def _at_roofline(row: LaunchReport) -> bool:
    """A kernel at ``ROOFLINE_DONE`` of the copy roofline counting each argument once. One that passes over
    its rows twice gets there only with its second read served from cache (from memory, its traffic would
    be half again what is counted): no rewrite that drops that read buys anything. On the H200, bf16
    ``F.normalize`` over 16384-wide rows ran at 4.24 TB/s counted once (the measured peak: 4.25), and
    every one-read variant screened at 0.42-0.74x."""
    return row.pct_of_peak is not None and row.pct_of_peak >= ROOFLINE_DONE


def summarize_analysis(
    problem: str,
    device: str,
    peak_gbps: float,
    eager: Any,
    compiled: Any,
    rows: list[LaunchReport],
    device_total_us: float,
    floor_bytes: int | None = None,
    rereads: ForcedRereads | None = None,
) -> AnalysisReport:
    """The model-level numbers: speedup over eager, the Amdahl bound of Triton-only work, and how busy
    the GPU is. The compiled forward's time (device events around the whole call) includes the gaps in
    which the GPU waits for the host to launch the next kernel; the profiler's kernel time does not.
    Their ratio is the launch-overhead bound: what removing every gap (CUDA graphs at best) could buy,
    a ceiling beside the Amdahl bound on kernels."""
    attributed_us = sum(r.time_us for r in rows)
    triton_us = sum(r.time_us for r in rows if r.kind == "triton")
    headroom_us = sum(r.headroom_us or 0.0 for r in rows)
    # The bound applies to the compiled model's measured time: removing the
    # Triton headroom from it is the best that Triton-only work can do.
    compiled_us = compiled.median_ms * 1000.0
    bound = amdahl_bound(max(compiled_us, attributed_us), min(headroom_us, max(compiled_us, attributed_us)))
    reread_bytes = rereads.bytes if rereads is not None and floor_bytes else 0
    floor_bytes = floor_bytes + reread_bytes if floor_bytes else floor_bytes
    floor_us = floor_bytes / (peak_gbps * 1e3) if floor_bytes and peak_gbps > 0 else None
    fusion = max(1.0, compiled_us / floor_us) if floor_us and only_generated(rows) else None
    movers = [r for r in rows if r.moves_only]
    return AnalysisReport(
        moves_ms=sum(r.time_us for r in movers) / 1000.0,
        moves_launches=len(movers),
        rereads_ms=sum(r.time_us for r in rows if r.second_passes and not _at_roofline(r)) / 1000.0,
        rereads_cached_ms=sum(r.time_us for r in rows if r.second_passes and _at_roofline(r)) / 1000.0,
        problem=problem,
        device=device,
        peak_gbps=peak_gbps,
        eager_ms=eager.median_ms,
        eager_spread=eager.rel_spread,
        compiled_ms=compiled.median_ms,
        compiled_spread=compiled.rel_spread,
        speedup_vs_eager=eager.median_ms / compiled.median_ms,
        attributed_ms=attributed_us / 1000.0,
        unattributed_ms=max(0.0, device_total_us - attributed_us) / 1000.0,
        triton_ms=triton_us / 1000.0,
        triton_headroom_ms=headroom_us / 1000.0,
        amdahl_bound=bound,
        gpu_busy=min(1.0, device_total_us / compiled_us) if compiled_us > 0 else 1.0,
        launch_overhead_bound=max(1.0, compiled_us / device_total_us) if device_total_us > 0 else 1.0,
        floor_bytes=floor_bytes,
        reread_bytes=reread_bytes,
        rereads=rereads.lines if rereads is not None else [],
        floor_ms=floor_us / 1000.0 if floor_us is not None else None,
        fusion_bound=fusion,
        launches=rows,
    )


def analyze_artifact(
    name: str,
    label: str,
    peak: float,
    model: torch.nn.Module,
    inputs: list[Any],
    artifact: Artifact,
    trials: int = default_of("analyze_trials"),
    profile_iterations: int = 10,
) -> AnalysisReport:
    """Time eager against compiled (interleaved) and attribute every launch of an existing capture."""

    def run_eager() -> Any:
        with torch.no_grad():
            return model(*inputs)

    def run_compiled() -> Any:
        return artifact(*inputs)

    comparison = compare(run_eager, run_compiled, trials=trials, include_host=True)
    with torch.no_grad():
        floor = graph_floor_bytes(model, inputs, outputs_as_list(run_compiled(), name))
    sink = LaunchSink(record_args=False, label=True)
    with artifact.instrumented(sink):

        def instrumented_call() -> Any:
            sink.begin_call()
            return artifact(*inputs)

        attribution = attribute(instrumented_call, LAUNCH_LABEL_PREFIX, iterations=profile_iterations)
    times = {int(lbl.removeprefix(LAUNCH_LABEL_PREFIX)): us for lbl, us in attribution.per_label_us.items()}
    rows = build_launch_reports(artifact.launches, times, peak, {k.name: k.source for _, k in artifact.kernels()})
    rereads = traced_rereads(model, inputs) if only_generated(rows) else None  # the floor bounds only those
    return summarize_analysis(
        name, label, peak, comparison.baseline, comparison.candidate, rows, attribution.device_total_us, floor, rereads
    )
