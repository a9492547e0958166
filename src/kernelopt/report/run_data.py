"""What a report shows of one run, read from the store: no HTML, no figures.

A run leaves its story in several places: the ``runs`` row (problem, device,
versions, status), the ``analysis`` measurement (the compiled model launch by
launch), the ``report`` measurement (the optimize run's outcome, absent when the
run was killed or is still running), the ``nodes`` table (every candidate and its
gate record), the ``llm_plan:`` measurements and the ``transcripts`` table. This
module joins them into plain, typed records so the figures and the page never
touch SQL, and a run that stopped half way still gives what it has.

The "after" side of the time breakdown and the roofline is derived, not profiled:
a replaced kernel's time is its analysed time divided by the speedup its gates
measured (one timing method on both sides of the ratio), everything else stays.
The end-to-end times beside it are the measured ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.search.candidate import MODEL_TARGET
from kernelopt.search.nodes import PENDING, WORKER_FAILURE, Node, NodeStore
from kernelopt.search.targets import structure_pays
from kernelopt.store import Run, Store
from kernelopt.store.llm_records import Transcript, transcripts

REPORTED_KINDS = ("optimize", "analyze")
# kernelopt.search.llm_operator.PLAN_KEY, spelled here because importing that module needs the llm extra;
# tests/test_report.py checks the two agree.
PLAN_KEY = "llm_plan:"


@dataclass(frozen=True)
class Launch:
    """One launch of the compiled forward, as the analysis timed it."""

    index: int
    kind: str  # triton | vendor | aten | cpp
    name: str
    time_us: float
    bytes_moved: int | None
    achieved_gbps: float | None
    pct_of_peak: float | None
    headroom_us: float | None
    moves_only: bool = False  # a generated kernel that only moves data (capture.copy_kernels); False in older records

    @property
    def shown_kind(self) -> str:
        """The kind the report shows: ``copy`` for a kernel that only moves data, as ``kernelopt analyze`` does."""
        return "copy" if self.moves_only else self.kind


@dataclass(frozen=True)
class KernelOutcome:
    """A searched kernel: its time before, after (None when the baseline stayed) and the winner."""

    name: str
    before_us: float
    after_us: float | None  # analysed time / the gates' speedup, where the kernel was replaced
    speedup: float
    replaced: bool
    evaluations: int
    failures_by_gate: dict[str, int]
    stop_reason: str
    final_check: str
    winner_node: int | None  # the delivered candidate's node
    operator: str | None
    note: str | None
    inductor_source: str | None
    replacement_source: str | None


@dataclass(frozen=True)
class TreeNode:
    """One node of a search graph, with what the page shows on a click."""

    id: int
    parent_id: int | None
    operator: str
    note: str
    verdict: str  # root | pending | passed | a failed gate's name | worker
    fitness: float | None
    reason: str
    round: int
    config: dict[str, Any] | None
    options: dict[str, Any] | None
    gates: list[dict[str, Any]]  # gate, passed, reason
    kernel_time_us: float | None
    worker_status: str
    plan: dict[str, Any] | None


@dataclass(frozen=True)
class SearchTree:
    target: str
    nodes: list[TreeNode]
    winner: int | None  # the delivered node, else the best passed one (None: nothing passed)
    delivered: bool  # whether ``winner`` is in the delivered model

    def path_to_winner(self) -> list[int]:
        """Node ids from the root to the winner (empty when nothing passed)."""
        parents = {n.id: n.parent_id for n in self.nodes}
        path: list[int] = []
        current = self.winner
        while current is not None and current not in path:
            path.append(current)
            current = parents.get(current)
        return path[::-1]


@dataclass(frozen=True)
class Summary:
    """The headline numbers: times in ms, speedups with their interquartile range where one was measured."""

    problem: str
    device: str
    finished: bool
    eager_ms: float | None
    eager_spread: float | None  # IQR / median of the analysis' eager timing
    compiled_ms: float | None
    compiled_spread: float | None
    optimized_ms: float | None
    final_compiled_ms: float | None
    vs_eager: float | None
    vs_eager_iqr: tuple[float, float] | None
    vs_compile: float | None
    vs_compile_iqr: tuple[float, float] | None
    compile_vs_eager: float | None
    amdahl_bound: float | None
    launch_overhead_bound: float | None
    fusion_bound: float | None
    reread_bytes: int  # of the traffic floor: inputs read a second time (a statistic wider than the chip)
    best_stock_mode: str | None
    best_stock_speedup: float | None
    base_mode: str  # the stock mode the search built on: vs_compile is over it
    base_mode_reason: str | None  # why that mode, one line (optimize's base-mode stage)
    stock_untimed: list[str]  # "mode: why" for each stock mode that has no number
    gpu_busy: float | None
    peak_gbps: float | None
    final_reason: str
    evaluations: int | None
    gpu_s: float | None
    wall_s: float | None
    exported: str | None
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    knobs: dict[str, Any] | None = None
    run_mode: str | None = None  # the CUDA-graph mode the export runs under (stock_modes.settle_run_mode)
    run_mode_gain: float | None = None  # the export under run_mode over the plain export, in the mode's process
    as_replays: dict[str, Any] | None = None  # the final verification as CUDA-graph replays (launch-bound models)
    op_hosts: dict[str, str] = field(default_factory=dict)  # the delivered model's own ops' host paths, by op
    kind: str = "model"  # what was optimized: a model, or a kernel file ("triton", "helion")
    file_report: dict[str, Any] | None = None  # a kernel-file run's own report (FileReport.to_dict())
    moves_ms: float | None = (
        None  # GPU time of the kernels that only move data; None: recorded before they were told apart
    )
    moves_launches: int = 0


@dataclass(frozen=True)
class GraphOutcome:
    """One graph's call-sequence search (graph candidates) as the report shows it."""

    graph: int
    speedup: float  # end to end, 1.0 where the graph stayed as compiled
    replaced: bool
    evaluations: int
    failures_by_gate: dict[str, int]
    stop_reason: str
    final_check: str
    note: str
    kernels: int  # the delivered candidate's own kernels


@dataclass(frozen=True)
class RunData:
    """Everything one run's report shows."""

    run: Run
    summary: Summary
    launches: list[Launch]
    kernels: list[KernelOutcome]
    trees: list[SearchTree]
    transcripts: list[Transcript]
    llm_usage: dict[str, Any] | None
    graphs: list[GraphOutcome] = field(default_factory=list)  # none in records made before graph candidates
    graph_stage: str | None = None  # why the graph stage ran though --operators did not name it
    graph_stage_advice: str | None = None  # an analyze run: why optimize would run the graph stage unnamed

    @property
    def replaced(self) -> list[KernelOutcome]:
        return [k for k in self.kernels if k.replaced]

    def after_us(self, name: str, before_us: float) -> float:
        """A launch's time in the delivered model: scaled by its kernel's verified speedup, or as it was."""
        for k in self.replaced:
            if k.name == name and k.speedup > 0:
                return before_us / k.speedup
        return before_us


def load_run(store: Store, run_id: int) -> RunData:
    """The report's view of run ``run_id``; a run kind without a report is a one-line error."""
    run = store.run(run_id)
    if run.kind not in REPORTED_KINDS:
        raise KerneloptError(
            f"run {run_id} is a {run.kind} run; kernelopt report covers optimize and analyze runs "
            "(and bench results: pass the results folder)"
        )
    found = store.measurements(run_id)
    analysis = found.get("analysis")
    report = found.get("report")
    plans = {key[len(PLAN_KEY) :]: value for key, value in found.items() if key.startswith(PLAN_KEY)}
    graph = NodeStore(store, run_id)
    kind = str(run.args.get("input") or "model")
    file_report = found.get("file_report")
    if kind != "model":  # a kernel file: its report in the shape of a model run's, one kernel (the file)
        root = next((n for t in graph.targets() for n in graph.nodes(t) if n.is_root), None)
        report, analysis = _as_run_report(file_report, root.candidate.source if root else None)
    kernels = _kernels(report, analysis)
    root_note = "the user's file (the baseline)" if kind != "model" else "Inductor's own kernel (the baseline)"
    trees = [_tree(target, graph.nodes(target), report, plans, root_note) for target in graph.targets()]
    summary = _summary(run, None if kind != "model" else analysis, report)
    return RunData(
        run=run,
        summary=replace(
            summary, kind=kind, file_report=file_report or _from_analysis(found.get("kernel_file_analysis"))
        ),
        launches=_launches(analysis),
        kernels=kernels,
        trees=trees,
        transcripts=transcripts(store.connection, run_id),
        llm_usage=(report or {}).get("llm_usage"),
        graphs=_graphs(report),
        graph_stage=(report or {}).get("graph_stage"),
        graph_stage_advice=_graph_stage_advice(run, analysis) if report is None else None,
    )


def _graph_stage_advice(run: Run, analysis: dict[str, Any] | None) -> str | None:
    """For an analyze run, what ``kernelopt analyze`` prints: why optimize would also search graph
    variants here unasked (the graph_stage setting at auto), or None."""
    a = analysis or {}
    amdahl, compiled = _number(a.get("amdahl_bound")), _number(a.get("compiled_ms"))
    if run.kind != "analyze" or amdahl is None or not compiled:
        return None
    return structure_pays(
        amdahl,
        _number(a.get("fusion_bound")),
        (_number(a.get("moves_ms")) or 0.0) / compiled,
        (_number(a.get("rereads_ms")) or 0.0) / compiled,
        {str(option): int(count) for option, count in (a.get("own_ops") or {}).items()},
    )


def _graphs(report: dict[str, Any] | None) -> list[GraphOutcome]:
    delivered = str((report or {}).get("final_reason") or "").startswith("verified")
    out = []
    for g in (report or {}).get("graphs") or []:
        best = g.get("best") if delivered else None
        out.append(
            GraphOutcome(
                graph=int(g["graph"]),
                speedup=float(g.get("speedup") or 1.0) if best else 1.0,
                replaced=bool(best),
                evaluations=int(g.get("evaluations") or 0),
                failures_by_gate=dict(g.get("failures_by_gate") or {}),
                stop_reason=str(g.get("stop_reason") or ""),
                final_check=str(g.get("final_check") or ""),
                note=str(g.get("note") or ""),
                kernels=len((best or {}).get("kernels") or []),
            )
        )
    return out


def _from_analysis(analysis: dict[str, Any] | None) -> dict[str, Any] | None:
    """What an analyze run of a kernel file measured, in the fields the page's summary reads."""
    if not analysis:
        return None
    return {
        "name": analysis.get("name"),
        "original_us": analysis.get("time_us"),
        "min_time_us": analysis.get("min_time_us"),
    }


def _as_run_report(
    file_report: dict[str, Any] | None, original: str | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A kernel-file run's report as (report, analysis) in a model run's shape: the file is the one kernel."""
    if file_report is None:
        return None, None
    name = str(file_report.get("name"))
    kernel = {
        "name": name,
        "before_us": file_report.get("original_us") or 0.0,
        "speedup": file_report.get("speedup") or 1.0,
        "evaluations": file_report.get("evaluations") or 0,
        "failures_by_gate": file_report.get("failures_by_gate") or {},
        "stop_reason": file_report.get("stop_reason") or "",
        "best": file_report.get("best"),
    }
    optimized = _number(file_report.get("optimized_us"))
    report = {
        **{
            k: file_report.get(k)
            for k in ("final_reason", "evaluations", "gpu_s", "wall_s", "exported", "llm_usage", "warnings")
        },
        "kernels": [kernel],
        "optimized_ms": optimized / 1000.0 if optimized else None,
        "speedup_vs_compile": file_report.get("speedup"),
        "speedup_vs_compile_iqr": file_report.get("speedup_iqr") if file_report.get("best") else None,
    }
    return report, {"kernels": {name: {"source": original}}}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) is not None for v in value):
        return float(value[0]), float(value[1])
    return None


def _summary(run: Run, analysis: dict[str, Any] | None, report: dict[str, Any] | None) -> Summary:
    a = analysis or {}
    r = report or {}
    eager, compiled = _number(a.get("eager_ms")), _number(a.get("compiled_ms"))
    if report is None:
        reason = (
            "an analyze run: no search"
            if run.kind == "analyze"
            else f"the run did not finish ({run.status}{': ' + run.error if run.error else ''}); "
            "what it recorded before it stopped is shown"
        )
    else:
        reason = str(r.get("final_reason") or "")
    return Summary(
        problem=run.problem,
        device=str(a.get("device") or run.device),
        finished=report is not None or (run.kind == "analyze" and run.status == "done"),
        eager_ms=eager,
        eager_spread=_number(a.get("eager_spread")),
        compiled_ms=compiled,
        compiled_spread=_number(a.get("compiled_spread")),
        optimized_ms=_number(r.get("optimized_ms")),
        final_compiled_ms=_number(r.get("final_compiled_ms")),
        vs_eager=_number(r.get("speedup_vs_eager")),
        vs_eager_iqr=_pair(r.get("speedup_vs_eager_iqr")),
        vs_compile=_number(r.get("speedup_vs_compile")) if report is not None else None,
        vs_compile_iqr=_pair(r.get("speedup_vs_compile_iqr")),
        compile_vs_eager=eager / compiled if eager and compiled else None,
        amdahl_bound=_number(a.get("amdahl_bound", r.get("amdahl_bound"))),
        launch_overhead_bound=_number(a.get("launch_overhead_bound", r.get("launch_overhead_bound"))),
        fusion_bound=_number(a.get("fusion_bound", r.get("fusion_bound"))),
        reread_bytes=int(_number(a.get("reread_bytes")) or 0),
        best_stock_mode=r.get("best_stock_mode") if isinstance(r.get("best_stock_mode"), str) else None,
        best_stock_speedup=_number(r.get("best_stock_speedup")),
        base_mode=str(r.get("base_mode") or "default"),
        base_mode_reason=r.get("base_mode_reason") if isinstance(r.get("base_mode_reason"), str) else None,
        stock_untimed=[f"{m}: {v}" for m, v in (r.get("stock") or {}).items() if not isinstance(v, dict)],
        gpu_busy=_number(a.get("gpu_busy", r.get("gpu_busy"))),
        peak_gbps=_number(a.get("peak_gbps")),
        final_reason=reason,
        evaluations=r.get("evaluations"),
        gpu_s=_number(r.get("gpu_s")),
        wall_s=_number(r.get("wall_s")),
        exported=r.get("exported"),
        warnings=[str(w) for w in r.get("warnings") or []],
        skipped=[(str(s[0]), str(s[1])) for s in r.get("skipped") or [] if len(s) == 2],
        knobs=r.get("knobs"),
        run_mode=r.get("run_mode"),
        run_mode_gain=_number(r.get("run_mode_gain")),
        as_replays=r.get("as_replays") if isinstance(r.get("as_replays"), dict) else None,
        op_hosts={str(op): str(state) for op, state in (r.get("op_hosts") or {}).items()},
        moves_ms=_number(a.get("moves_ms")),
        moves_launches=int(a.get("moves_launches") or 0),
    )


def _launches(analysis: dict[str, Any] | None) -> list[Launch]:
    out: list[Launch] = []
    for row in (analysis or {}).get("launches") or []:
        read, written = row.get("bytes_read"), row.get("bytes_written")
        out.append(
            Launch(
                index=int(row.get("index", len(out))),
                kind=str(row.get("kind", "?")),
                name=str(row.get("name", "?")),
                time_us=float(row.get("time_us") or 0.0),
                bytes_moved=int(read) + int(written) if read is not None and written is not None else None,
                achieved_gbps=_number(row.get("achieved_gbps")),
                pct_of_peak=_number(row.get("pct_of_peak")),
                headroom_us=_number(row.get("headroom_us")),
                moves_only=bool(row.get("moves_only")),
            )
        )
    return out


def _kernels(report: dict[str, Any] | None, analysis: dict[str, Any] | None) -> list[KernelOutcome]:
    delivered = str((report or {}).get("final_reason") or "").startswith("verified")
    sources = (analysis or {}).get("kernels") or {}
    out: list[KernelOutcome] = []
    for k in (report or {}).get("kernels") or []:
        best = k.get("best") if delivered else None
        speedup = float(k.get("speedup") or 1.0)
        before = float(k.get("before_us") or 0.0)
        out.append(
            KernelOutcome(
                name=str(k["name"]),
                before_us=before,
                after_us=before / speedup if best and speedup > 0 else None,
                speedup=speedup if best else 1.0,
                replaced=bool(best),
                evaluations=int(k.get("evaluations") or 0),
                failures_by_gate=dict(k.get("failures_by_gate") or {}),
                stop_reason=str(k.get("stop_reason") or ""),
                final_check=str(k.get("final_check") or ""),
                winner_node=best.get("node") if best else None,
                operator=best.get("operator") if best else None,
                note=best.get("note") if best else None,
                inductor_source=(sources.get(k["name"]) or {}).get("source"),
                replacement_source=best.get("source") if best else None,
            )
        )
    return out


def verdict_of(node: Node) -> str:
    """The colour class of a node: root, pending, passed, or the gate that failed it (worker: none answered)."""
    if node.is_root:
        return "root"
    if node.status == PENDING:
        return "pending"
    if node.passed:
        return "passed"
    return node.failed_gate or WORKER_FAILURE


def _tree(
    target: str,
    nodes: list[Node],
    report: dict[str, Any] | None,
    plans: dict[str, dict[str, Any]],
    root_note: str = "Inductor's own kernel (the baseline)",
) -> SearchTree:
    r = report or {}
    delivered_ids = {
        (k.get("best") or {}).get("node")
        for k in r.get("kernels") or []
        if k.get("best") and str(r.get("final_reason") or "").startswith("verified")
    }
    passed = [n for n in nodes if n.passed and not n.is_root]
    if target == MODEL_TARGET:
        knobs = r.get("knobs") or {}
        used = [n for n in passed if knobs.get("used") and n.candidate.options == knobs.get("best_options")]
        delivered_ids |= {n.id for n in used}
    delivered = [n for n in passed if n.id in delivered_ids]
    best = max(passed, key=lambda n: (n.fitness or 0.0, -n.id), default=None)
    winner = delivered[0] if delivered else best
    return SearchTree(
        target=target,
        nodes=[_tree_node(n, plans, root_note) for n in nodes],
        winner=winner.id if winner else None,
        delivered=bool(delivered),
    )


def _tree_node(node: Node, plans: dict[str, dict[str, Any]], root_note: str) -> TreeNode:
    result = node.result
    gates = [
        {"gate": str(v.get("gate")), "passed": bool(v.get("passed")), "reason": str(v.get("reason") or "")}
        for v in (result.verdicts if result else [])
    ]
    measured = result.measurements if result else {}
    return TreeNode(
        id=node.id,
        parent_id=node.parent_id,
        operator=node.operator,
        note=node.candidate.note or (root_note if node.is_root else ""),
        verdict=verdict_of(node),
        fitness=node.fitness,
        reason=node.reason or "",
        round=node.round,
        config=node.candidate.config,
        options=node.candidate.options,
        gates=gates,
        kernel_time_us=_number(measured.get("kernel_time_us")),
        worker_status=result.worker_status if result else "",
        plan=plans.get(node.key),
    )


def record_of(node: TreeNode) -> dict[str, Any]:
    """A node's gate record as plain JSON for the page's click panel."""
    record = {
        "node": node.id,
        "parent": node.parent_id,
        "operator": node.operator,
        "round": node.round,
        "change": node.note,
        "verdict": node.verdict,
        "speedup": node.fitness if node.verdict == "passed" else None,
        "reason": node.reason,
        "gates": node.gates,
        "config": node.config,
        "options": node.options,
        "kernel_time_us": node.kernel_time_us,
        "worker_status": node.worker_status,
        "plan": node.plan,
    }
    return record
