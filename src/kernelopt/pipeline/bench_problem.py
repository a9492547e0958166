"""One bench problem, run in a worker of ``kernelopt bench``: optimize it, then time every stock
``torch.compile`` mode of the ``stock_modes`` setting against kernelopt's result, each in a fresh
process of its own, pick the best stock mode (:func:`~kernelopt.pipeline.stock_modes.best_stock_for`),
and say where the time went.

A worker the bench's time-out kills loses nothing it finished: its optimize run goes on where it
stopped (:func:`unfinished_run`), and a run that had finished, with the stock modes timed so far, is
taken as it is (:func:`finished_run`)."""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelopt.agents.relay import RelayAccess
from kernelopt.config import Settings, load_settings
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import versions
from kernelopt.measure.timer import HOST_READING
from kernelopt.pipeline.optimize import llm_name, optimize
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.pipeline.stock_modes import (
    best_stock_for,
    reused_stock,
    settle_run_mode,
    time_stock_modes,
)
from kernelopt.problem import load_problem
from kernelopt.problem.loader import recorded_sizes
from kernelopt.report.metrics import (
    against_result,
    as_delivered,
    same_ratio,
    speedup_over_default,
    speedup_over_mode,
)
from kernelopt.search.operators import DEFAULT_OPERATORS
from kernelopt.search.termination import Budget
from kernelopt.store import Run, Store
from kernelopt.workers import run_isolated


def _log_event(kind: str, data: dict[str, Any]) -> None:
    """A bench problem's progress on its worker's stderr: a problem that times out shows where it was."""

    if kind in ("stage", "targets", "stopped"):
        print(f"[{time.strftime('%H:%M:%S')}] {kind}: {data}", file=sys.stderr, flush=True)


class StageClock:
    """Seconds spent in each stage an optimize run announces: where a bench problem's time went."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._current: str | None = None
        self._since = time.monotonic()

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        _log_event(kind, data)
        if kind == "stage":
            self.enter(str(data.get("stage")))

    def enter(self, stage_name: str | None) -> None:
        """Close the running stage (its time adds up over repeats) and open ``stage_name`` (None: stop)."""
        now = time.monotonic()
        if self._current is not None:
            self.seconds[self._current] = round(self.seconds.get(self._current, 0.0) + now - self._since, 3)
        self._current, self._since = stage_name, now


def default_baseline(
    report: OptimizeReport, stock: dict[str, Any]
) -> tuple[float | None, float | None, tuple[float, float] | None]:
    """(torch.compile default's ms, kernelopt's speedup over it, that speedup's IQR), each timed
    interleaved in one process: the run's final verification where the search built on the default,
    else the default's own process against the exported result, or where kernelopt's result is the
    base mode's own compile (nothing exported, or that stock mode delivered as it is) the base mode's
    process, which timed it against the default (None where that failed). An export delivered under a
    run mode is scored as it runs there: each of those plain ratios times the graphs' gain over the
    plain export (:func:`~kernelopt.report.metrics.as_delivered`)."""
    gain = report.run_mode_gain if report.run_mode else None
    if report.on_default:
        speedup, spread = report.delivered_vs_compile
        return report.final_compiled_ms or report.compiled_ms, speedup if gain else None, spread
    record = stock.get("default")
    record = record if isinstance(record, dict) else {}
    timed = record.get("vs_optimized")
    if timed and timed.get("optimized") == "kernelopt":
        delivered = as_delivered(timed, record, report.run_mode, gain) or timed
        return timed["mode_ms"], delivered["speedup"], _quartiles(delivered)
    base = stock.get(report.base_mode)
    base_timed = base.get("vs_optimized") if isinstance(base, dict) else None
    if not base_timed or base_timed.get("optimized") != "torch.compile":
        return (timed or {}).get("mode_ms"), None, None
    spread = _quartiles(base_timed)  # the base's time over the default's: inverted, the default's over it
    default_ms = (timed or {}).get("mode_ms") or base_timed.get("optimized_ms")
    return default_ms, speedup_over_default(base), (1 / spread[1], 1 / spread[0]) if spread else None


def best_stock_iqr(
    report: OptimizeReport, stock: dict[str, Any], best: tuple[str, float, float] | None
) -> tuple[float, float] | None:
    """The interquartile range of the best stock mode's ratio, from the timing that ratio came from: the
    final verification where the mode is the one the search built on and its ratio is that
    verification's (the least of the measured speedups may be it), else the mode's own process. On the
    H200 the vocabulary row read 1.444x from its final verification beside 1.708-1.730 from the mode's
    process: a spread that did not hold its own median."""
    if best is None:
        return None
    mode, _ms, speedup = best
    final, spread = report.delivered_vs_compile
    if mode == report.base_mode and same_ratio(final, speedup):
        return spread
    gain = report.run_mode_gain if report.run_mode else None
    timed = against_result(stock.get(mode), report.base_mode, report.run_mode, gain)
    return _quartiles(timed) if timed and same_ratio(timed.get("speedup"), speedup) else None


def _quartiles(timed: dict[str, Any]) -> tuple[float, float] | None:
    """The first and third quartiles of an interleaved comparison's speedup, where it has both."""
    cmp = timed.get("comparison") or {}
    q1, q3 = cmp.get("speedup_q1"), cmp.get("speedup_q3")
    return (q1, q3) if q1 and q3 else None


def _export_path(options: dict[str, Any], name: str, problem_path: str) -> Path | None:
    """Where a winner is exported: ``<export_dir>/<problem name>.kopt.json`` (the name keeps its level
    folder, so two levels' problems of one file name do not overwrite each other); None without
    ``export_dir`` (the run's own folder, gone with its worker)."""
    if not options.get("export_dir"):
        return None
    path = Path(options["export_dir"]) / f"{name or Path(problem_path).stem}.kopt.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


RESUMABLE_ACROSS = ("kernelopt", "kernelopt_source")
"""What may differ between a killed run and the bench that goes on with it: kernelopt's own code (a fix
between two device calls); the stack its timings were taken on may not."""
BENCH_RESUMES = 2
"""How often a bench goes on with one problem's unfinished run before it starts that problem afresh: a run
whose worker keeps being killed at the same point is not resumed forever. A run the bench itself stopped at
the end of its ``--slot`` is gone on with uncounted (``after_cut``): that stop says nothing about the run."""


def unfinished_run(
    store: Store, problem_path: str, sizes: dict[str, Any] | None, kernel_file: bool = False, counted: bool = True
) -> int | None:
    """The optimize run of this problem at these sizes that a killed worker left unfinished, to go on
    with; None where the problem's latest run finished, or was resumed ``BENCH_RESUMES`` times already
    (``counted``; a run stopped at a slot's end is gone on with whatever its count).

    A bench's time-out kills the problem's worker, which cannot mark its run, so the run stays
    "running" with its base mode, analysis, graph variants and judged candidates in the store. A
    resumed or retried bench goes on with it instead of paying them again (H200, 2026-12-03: the
    Frobenius norm over 1 GiB spent 150 of its 215 s before those were all recorded). Runs started
    before the path was recorded match by the problem's name. A run recorded under another torch,
    Triton, CUDA, driver or Python (``RESUMABLE_ACROSS`` aside) is not this problem's to go on with:
    its timings mean something else (a store shared between machines or upgrades). ``kernel_file``: the
    run of a kernel file (``optimize_file``, its run args name the file's kind as ``input``), never a
    problem's run of the same name, nor the other way round."""
    run = _latest_run(store, problem_path, sizes, kernel_file)
    if run is None or run.status != "running" or (counted and _resumes(store, run.id) >= BENCH_RESUMES):
        return None
    return run.id


def _latest_run(store: Store, problem_path: str, sizes: dict[str, Any] | None, kernel_file: bool = False) -> Run | None:
    """The problem's latest optimize run at these sizes where it was recorded under this stack
    (``RESUMABLE_ACROSS`` aside), else None: a run from another stack means start afresh. A kernel
    file's runs match by their recorded path only (they recorded none before 2026-12-04)."""
    path, name, now = str(Path(problem_path).resolve()), Path(problem_path).stem, versions()
    for run in reversed(store.runs("optimize")):
        if ("input" in run.args) != kernel_file:
            continue
        recorded = run.args.get("path")
        if kernel_file and not recorded:
            continue
        if (recorded != path if recorded else run.problem != name) or recorded_sizes(run.args.get("sizes")) != dict(
            sizes or {}
        ):
            continue
        if any(run.versions.get(key) != value for key, value in now.items() if key not in RESUMABLE_ACROSS):
            return None
        return run
    return None


RESUMED = "bench_resume:"  # a resume of a run a killed worker left: counted against BENCH_RESUMES
AFTER_CUT = "bench_resume_after_cut:"  # a resume of a run the bench stopped at its slot's end: not counted


def _resumes(store: Store, run_id: int, kind: str = RESUMED) -> int:
    """How often a bench has gone on with run ``run_id`` (one ``<kind>N`` measurement each)."""
    return len(store.measurements(run_id, kind))


def resume_unfinished(
    store: Store, problem_path: str, sizes: dict[str, Any] | None, kernel_file: bool = False, after_cut: bool = False
) -> int | None:
    """:func:`unfinished_run`, counted in the store as resumed once more (``after_cut``: recorded apart,
    uncounted, as the bench stopped it at its slot's end), and said on the worker's log."""
    run_id = unfinished_run(store, problem_path, sizes, kernel_file, counted=not after_cut)
    if run_id is not None:
        kind = AFTER_CUT if after_cut else RESUMED
        store.add_measurement(run_id, f"{kind}{_resumes(store, run_id, kind) + 1}", {"at": time.time()})
        why = "stopped at the end of the bench's slot" if after_cut else "left unfinished by a killed worker"
        _log_event("stage", {"stage": f"resuming run {run_id}, {why}"})
    return run_id


FINISHED = "bench_finished"
"""The measurement a bench puts on an optimize run once it returns: the bench's export folder and the
export's sha256, so a retry knows the run is this bench's and its export untouched since."""
STOCK = "bench_stock/"
"""Prefix of the measurements holding each stock mode's record (``bench_stock/<mode>``) as it is timed."""


def _sha256(path: str | None) -> str | None:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path and Path(path).is_file() else None


def finished_run(
    store: Store, problem_path: str, sizes: dict[str, Any] | None, export_dir: str | None, search: dict[str, Any]
) -> tuple[OptimizeReport, dict[str, Any]] | None:
    """(the report, the stock modes' records so far) of the optimize run this bench's worker finished
    before a time-out killed it while timing the stock modes; None where there is none to take.

    Taken only from the problem's latest run at these sizes and stack (as :func:`unfinished_run`), run
    by a bench with the same export folder (``export_dir``: this bench's, not an earlier one sharing the
    store, whose result a fresh bench must not report as its own) and the same ``search`` (operators,
    budget), whose export, where it made one, is the very file it finished with: a worker killed while
    delivering the result under CUDA graphs (``settle_run_mode`` records the mode in it) starts afresh."""
    run = _latest_run(store, problem_path, sizes) if export_dir else None
    if run is None or run.status != "done" or any(run.args.get(key) != value for key, value in search.items()):
        return None
    found = store.measurements(run.id)
    mark, report = found.get(FINISHED), found.get("report")
    if not isinstance(mark, dict) or not isinstance(report, dict) or mark.get("export_dir") != export_dir:
        return None
    if mark.get("sha256") != _sha256(report.get("exported")):
        return None
    stock = {key.removeprefix(STOCK): value for key, value in found.items() if key.startswith(STOCK)}
    return OptimizeReport.from_dict(report), stock


def bench_problem(problem_path: str, options: dict[str, Any]) -> dict[str, Any]:
    """One problem of ``kernelopt bench`` (runs in its own worker process): optimize it, plus the second baseline."""

    clock = StageClock()
    # The bench's settings, resolved in its process; the explicit options on top.
    config = Settings.from_values(options["settings"]) if "settings" in options else load_settings()
    store = Store(options.get("store") or config.store)
    time_limit = options.get("time_limit_s")
    budget = Budget(
        max_evaluations=int(options.get("budget", config.budget)),
        max_wall_s=time_limit,
        patience=int(options.get("patience", config.patience)),
    )
    name = options.get("name", Path(problem_path).stem)
    export_to = _export_path(options, name, problem_path)  # a winner, or the stock mode delivered as it is
    sizes = options.get("sizes") or None  # the bench's --size overrides this problem defines
    operators = tuple(options.get("operators") or DEFAULT_OPERATORS)
    export_dir = options.get("export_dir")  # this bench's: a run finished for another bench is not taken
    relay = RelayAccess.from_dict(options["llm"]) if options.get("llm") else None
    # what a finished run must have searched with to be taken (the LLM too: a bench resumed with --llm)
    search = {"operators": list(operators), "budget": asdict(budget), "llm": llm_name(relay.spec() if relay else None)}
    # a rerun (bench --rerun) is asked for a new measurement: the run that made its earlier row is not taken
    finished = None if options.get("rerun") else finished_run(store, problem_path, sizes, export_dir, search)
    after_cut = bool(options.get("after_cut"))  # the bench stopped this problem at its last slot's end
    resumed = None if finished else resume_unfinished(store, problem_path, sizes, after_cut=after_cut)
    if finished:
        report, timed = finished
        _log_event("stage", {"stage": f"taking run {report.run_id}, finished before its worker was killed"})
    else:
        try:  # the LLM through the bench's relay (agents.relay): its address and token, never the key
            report = optimize(
                problem_path,
                store,
                resume_run=resumed,
                llm=relay.spec() if relay else None,
                llm_config=relay.config() if relay else None,
                llm_key=relay.key() if relay else None,
                budget=budget,
                max_targets=int(options.get("max_targets", config.max_targets)),
                operators=operators,
                export_path=export_to,
                on_event=clock,
                config=config,
                write_report=False,  # the bench writes one report for the suite; each run's stays a command away
                sizes=sizes,
            )
        except KerneloptError as exc:
            return {
                "name": name,
                "path": problem_path,
                "status": "run_error",
                "reason": str(exc),
                "correct": False,
                "eager_ms": None,
                "compiled_ms": None,
                "max_autotune_ms": None,
                "optimized_ms": None,
            }
        timed = {}
        store.add_measurement(report.run_id, FINISHED, {"export_dir": export_dir, "sha256": _sha256(report.exported)})
    exported = str(Path(report.exported).resolve()) if report.exported else None
    modes = config.stock_modes.split(",")
    if not report.on_default:  # the run's own timing is against its base: time the default too
        modes = ["default", *modes]

    def keep(mode: str, record: Any) -> None:  # a mode timed survives a worker killed on the next one
        if isinstance(record, dict):
            store.add_measurement(report.run_id, f"{STOCK}{mode}", record)

    stock = time_stock_modes(
        problem_path,
        modes,
        exported,
        clock,
        run=run_isolated,
        known={**(reused_stock(report) or {}), **timed},
        overrides=sizes,
        on_timed=keep,
    )
    clock.enter(None)
    settle_run_mode(
        report,
        stock,
        lambda: load_problem(problem_path, overrides=sizes),
        export_to,
        config.margin,
        cuda_graphs=config.cuda_graphs,
    )
    compiled_ms, compile_speedup, compile_iqr = default_baseline(report, stock)
    ma = stock.get("max-autotune-no-cudagraphs")
    ma = ma if isinstance(ma, dict) else None
    optimized_ms = report.optimized_ms or report.compiled_ms
    vs_ma = (
        speedup_over_mode(
            ma,
            "max-autotune-no-cudagraphs",
            report.base_mode,
            optimized_ms,
            stock.get(report.base_mode),
            report.run_mode,
            report.run_mode_gain,
        )
        if ma
        else None
    )
    best = best_stock_for(report, stock)
    return {
        "name": name,
        "path": problem_path,
        "status": "ok",
        "reason": report.final_reason,
        "correct": True,  # every number below passed the gates, or is the compiler's own baseline
        "eager_ms": report.eager_ms,
        "compiled_ms": compiled_ms,
        "compile_speedup": compile_speedup,
        "base_mode": report.base_mode,
        "max_autotune_ms": ma["compiled_ms"] if ma else None,
        "optimized_ms": optimized_ms,
        "max_autotune_speedup": vs_ma if vs_ma and vs_ma > 0 else None,
        "best_stock_mode": best[0] if best else None,
        "best_stock_ms": best[1] if best else None,
        "best_stock_speedup": best[2] if best else None,
        "evaluations": report.evaluations,
        "gpu_s": report.gpu_s,
        "triton_share": report.triton_share,
        "floor_ms": report.compiled_ms / report.fusion_bound if report.fusion_bound else None,
        "details": {
            "device": report.device,
            "run_id": report.run_id,
            "resumed": resumed,  # the run a killed worker left unfinished, gone on with (unfinished_run)
            "resumed_after_cut": bool(resumed) and after_cut,  # that run stopped by the bench's --slot, not a time-out
            "taken": report.run_id if finished else None,  # the run a killed worker had finished (finished_run)
            "stock_taken": sorted(timed),  # stock modes timed before the worker was killed, not again
            "max_autotune": stock.get("max-autotune-no-cudagraphs", "not in the stock_modes setting"),
            "stock": stock,
            "kernels": [asdict(k) for k in report.kernels],
            "graphs": [asdict(g) for g in report.graphs],  # call sequences regenerated (graph candidates)
            "graph_stage": report.graph_stage,  # why the graph stage ran unnamed, or None
            "exported": report.exported,
            "warnings": report.warnings,
            "stage_s": clock.seconds,
            "speedup_vs_compile_iqr": compile_iqr,
            "best_stock_iqr": best_stock_iqr(report, stock, best),
            "base_mode_reason": report.base_mode_reason,
            "run_mode": report.run_mode,  # the CUDA-graph mode the export runs under, or None
            "run_mode_gain": report.run_mode_gain,  # the export under it over the plain export, interleaved
            "as_replays": report.as_replays,  # the final verification as CUDA-graph replays (launch-bound)
            "host_reading": HOST_READING,  # how each whole forward's host time was read (older rows: cold)
            "op_hosts": report.op_hosts,  # the delivered model's own ops' host paths (C++, or why Python's)
        },
    }
