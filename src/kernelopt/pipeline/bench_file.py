"""One kernel file of ``kernelopt bench``, run in a worker of its own: the very run ``kernelopt optimize
FILE`` makes (:func:`~kernelopt.pipeline.optimize_file.optimize_file`), turned into a scoreboard row.

No stock ``torch.compile`` mode is timed: a kernel file has no model to compile, and its baseline is
the original file, which the run's final check already times interleaved with the delivery. A file its
time-out cut short goes on with the run its killed worker left unfinished, as a problem does
(:func:`~kernelopt.pipeline.bench_problem.unfinished_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelopt.config import Settings, load_settings
from kernelopt.errors import KerneloptError, ProblemError
from kernelopt.pipeline.bench_problem import StageClock, resume_unfinished
from kernelopt.pipeline.optimize_file import default_operators, optimize_file
from kernelopt.problem.file_kind import file_kind
from kernelopt.report.file_scoreboard import FileOutcome
from kernelopt.search.termination import Budget
from kernelopt.store import Store


def export_path(export_dir: str | Path, name: str) -> Path:
    """Where a file's delivery goes in the results folder: ``kernels/<name>_kopt.py`` (importable by its stem)."""
    return Path(export_dir) / f"{name}_kopt.py"


def bench_kernel_file(file_path: str, options: dict[str, Any]) -> dict[str, Any]:
    """Optimize one kernel file as ``kernelopt optimize`` would and return its row (a :class:`FileOutcome` dict).

    A file that does not load is a ``load_error`` row and any other one-line error a ``run_error`` row; a
    crash or a hang is the parent's to record (it sees this worker end)."""
    clock = StageClock()
    config = Settings.from_values(options["settings"]) if "settings" in options else load_settings()
    name = str(options.get("name") or Path(file_path).stem)
    kind = "unknown"
    operators = options.get("operators")
    try:
        kind = file_kind(file_path)
        chosen = list(operators) if operators else list(default_operators(kind))
        budget = Budget(
            max_evaluations=int(options.get("budget", config.budget)),
            max_wall_s=options.get("time_limit_s"),
            patience=int(options.get("patience", config.patience)),
        )
        with Store(options.get("store") or config.store) as store:
            resumed = resume_unfinished(store, file_path, options.get("sizes") or None, kernel_file=True)
            report = optimize_file(
                file_path,
                store,
                resume_run=resumed,
                operators=chosen,
                budget=budget,
                export_path=export_path(options["export_dir"], name) if options.get("export_dir") else None,
                sizes=options.get("sizes") or None,
                on_event=clock,
                config=config,
                device=str(options.get("device", "cuda")),
            )
    except KerneloptError as exc:
        status = "load_error" if isinstance(exc, ProblemError) else "run_error"
        return FileOutcome(name, file_path, kind, status, str(exc), operators=list(operators or [])).to_dict()
    clock.enter(None)
    delivered = report.exported is not None and report.best is not None
    return FileOutcome(
        name=name,
        path=file_path,
        kind=report.kind,
        status="ok",
        reason=report.final_reason,
        delivered=delivered,
        speedup=report.speedup if delivered else None,
        speedup_iqr=report.speedup_iqr if delivered else None,
        original_us=report.original_us,
        optimized_us=report.optimized_us if delivered else None,
        operators=chosen,
        evaluations=report.evaluations,
        gpu_s=report.gpu_s,
        run_id=report.run_id,
        exported=report.exported,
        record=report.record,
        details={
            "device": report.device,
            "stop_reason": report.stop_reason,
            "failures_by_gate": report.failures_by_gate,
            "min_time_us": report.min_time_us,
            "helion": report.helion,
            "stage_s": clock.seconds,
            "wall_s": round(report.wall_s, 3),
            "resumed": resumed,  # the run a killed worker left unfinished, gone on with (unfinished_run)
        },
    ).to_dict()
