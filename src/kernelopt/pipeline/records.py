"""The records an optimize run builds and reports: a winner, a kernel's result, the run's report.

``OptimizeReport.to_dict`` is their one serialisation: it goes into the store
(``report`` measurement), into the exported file's verification record, and to
``--json``; the CLI's tables read the records themselves. ``OptimizeReport.from_dict``
reads the store's back (a bench goes on with a run its killed worker had finished).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Winner:
    """A passed search node, as the kernel's chosen replacement."""

    operator: str
    note: str
    source: str
    verdicts: list[dict[str, Any]]
    node: int | None = None  # the search node it came from (``kernelopt nodes RUN``)
    config: dict[str, Any] | None = None  # the launch config, for a config candidate
    kernel_time_us: float | None = None
    search_speedup: float | None = None  # the search's measurement (the re-check's replaces ``speedup``)
    address: dict[str, Any] | None = None  # graph, name and the original's sha256, set when re-stitched


@dataclass
class KernelResult:
    name: str
    before_us: float
    after_us: float | None
    speedup: float
    evaluations: int
    failures_by_gate: dict[str, int]
    stop_reason: str
    best: Winner | None = None
    final_check: str = ""  # the winner's re-evaluation with every seed and no screen
    inductor_tuned: dict[str, Any] | None = None  # Inductor's coordinate-descent config, the search's first proposal
    stage_medians_s: dict[str, float] = field(default_factory=dict)  # where an evaluation's time went (throughput)


@dataclass
class GraphResult:
    """The search over one graph's call sequence (graph candidates, :mod:`kernelopt.search.graph_variants`)."""

    graph: int
    speedup: float  # the best candidate's end-to-end speedup in the search, 1.0 when none passed
    evaluations: int
    failures_by_gate: dict[str, int]
    stop_reason: str
    best: dict[str, Any] | None = None  # the winner (GraphCandidate.to_dict), None when none passed
    note: str = ""
    node: int | None = None  # the search node it came from
    final_check: str = ""
    promoted: bool = False  # its options became the compile the kernel search ran on (graph_stage.graph_first)


@dataclass
class OptimizeReport:
    problem: str
    run_id: int
    device: str
    eager_ms: float
    compiled_ms: float
    amdahl_bound: float
    kernels: list[KernelResult] = field(default_factory=list)
    graphs: list[GraphResult] = field(default_factory=list)  # call sequences regenerated under other options
    graph_stage: str | None = None  # why the graph stage ran though --operators did not name it (graph_stage auto)
    graph_compile: str | None = None  # what compiling the graph variants cost (graph_stage.compile_line)
    gpu_busy: float = 1.0  # kernel time over the compiled forward's time (analysis)
    triton_share: float | None = None  # generated Triton kernels' time over the compiled forward's (analysis)
    launch_overhead_bound: float = 1.0  # the speedup removing every gap between launches could buy
    fusion_bound: float | None = None  # compiled over the traffic floor, for graphs of generated kernels only
    base_mode: str = "default"  # the stock mode the search built on: compiled_ms and speedup_vs_compile are its
    base_mode_reason: str | None = None  # why that mode (stock_modes.choose_base_mode), one line
    base_stock: dict[str, Any] = field(default_factory=dict)  # the base-mode stage's records (mode vs default)
    stock: dict[str, Any] = field(default_factory=dict)  # optimize --stock-modes: mode -> its process's record
    best_stock_mode: str | None = None  # the stock mode the result is least faster than (metrics.choose_best_stock)
    best_stock_speedup: float | None = None  # the result over that mode, interleaved in the mode's process
    run_mode: str | None = None  # the CUDA-graph mode the export runs under (stock_modes.settle_run_mode)
    run_mode_gain: float | None = None  # the export under run_mode over the plain export (stock_modes.graph_gain)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    speedup_vs_compile: float = 1.0
    speedup_vs_compile_iqr: tuple[float, float] | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_eager_iqr: tuple[float, float] | None = None  # from the final verification's eager timing
    optimized_ms: float | None = None
    final_compiled_ms: float | None = None  # the baseline timed interleaved with the optimized model
    final_reason: str = ""
    exported: str | None = None
    evaluations: int = 0
    gpu_s: float = 0.0
    wall_s: float = 0.0
    llm_usage: dict[str, Any] | None = None  # calls, tokens, cost, cache hits of the LLM agents
    options: dict[str, Any] | None = None  # Inductor options of the delivered model: the base mode's, plus knobs
    knobs: dict[str, Any] | None = None  # the compiler-knob search: best options, speedup, evaluations
    vs_base: dict[str, Any] | None = None  # with knobs: the final model against the base mode's compile, one process
    as_replays: dict[str, Any] | None = None  # the final verification as CUDA-graph replays (replays_summary)
    op_hosts: dict[str, str] | None = None  # the delivered model's own ops' host paths in its judged process
    warnings: list[str] = field(default_factory=list)  # what the run could not do as asked (no counters, no tuning)
    report_path: str | None = None  # the HTML report written beside the results (kernelopt.report)

    @property
    def evaluations_per_gpu_minute(self) -> float | None:
        return 60.0 * self.evaluations / self.gpu_s if self.gpu_s > 0 else None

    @property
    def on_default(self) -> bool:
        """Whether the run's own final timing is against torch.compile's default (no base mode, no
        Inductor options adopted): else the default is timed in a process of its own."""
        return self.base_mode == "default" and not (self.knobs or {}).get("used")

    @property
    def delivered_vs_compile(self) -> tuple[float | None, tuple[float, float] | None]:
        """The final verification's speedup and its IQR for the result as delivered: an export under a run
        mode takes the graphs' gain over the plain export (``run_mode_gain``) on its plain ratio."""
        gain = self.run_mode_gain if self.run_mode else None
        speedup, spread = self.speedup_vs_compile, self.speedup_vs_compile_iqr
        if not (gain and speedup):
            return speedup, spread
        return speedup * gain, (spread[0] * gain, spread[1] * gain) if spread else None

    @property
    def winners(self) -> list[KernelResult]:
        return [k for k in self.kernels if k.best is not None]

    @property
    def graph_winners(self) -> list[GraphResult]:
        """Graph winners to swap into the compiled model; a promoted one is in its options' compile already."""
        return [g for g in self.graphs if g.best is not None and not g.promoted]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evaluations_per_gpu_minute"] = self.evaluations_per_gpu_minute
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OptimizeReport:
        """The report :meth:`to_dict` wrote (JSON made its tuples lists; derived values are dropped)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["kernels"] = [_kernel_result(k) for k in d.get("kernels") or []]
        values["graphs"] = [GraphResult(**g) for g in d.get("graphs") or []]
        values["skipped"] = [(str(s[0]), str(s[1])) for s in d.get("skipped") or []]
        for pair in ("speedup_vs_compile_iqr", "speedup_vs_eager_iqr"):
            values[pair] = tuple(d[pair]) if d.get(pair) else None
        return cls(**values)


def _kernel_result(d: dict[str, Any]) -> KernelResult:
    best = d.get("best")
    return KernelResult(**{**d, "best": Winner(**best) if best else None})
