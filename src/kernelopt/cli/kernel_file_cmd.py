"""``kernelopt optimize`` on a standalone kernel file: the run and its summary.

``optimize`` reads the file's kind from its syntax tree and hands a Triton kernel file
here; the flags that only mean something for a model are refused in one line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelopt.config import Settings
from kernelopt.errors import KerneloptError
from kernelopt.pipeline.optimize_file import FileReport, optimize_file
from kernelopt.search.helion_configs import config_text
from kernelopt.search.operators import DEFAULT_OPERATORS
from kernelopt.search.termination import Budget


def refuse_model_flags(path: Path, kind: str, flags: dict[str, bool]) -> None:
    """One line for the first flag given that only means something for a model."""
    for flag, given in flags.items():
        if given:
            raise KerneloptError(f"{flag} applies to a model; {path} is a {kind} kernel file: leave {flag} out")


def optimize_kernel_file(
    path: Path,
    kind: str,
    operators: list[str],
    policy: str,
    budget: Budget,
    config: Settings,
    export: Path | None,
    resume: int | None,
    llm: str | None,
    llm_config: Path | None,
    as_json: bool,
    refused: dict[str, bool],
    err: Console,
    sizes: dict[str, Any] | None = None,
    kernel: str | None = None,
) -> FileReport:
    """The run for a kernel file (its kind read by ``optimize``), with the model-only flags refused."""
    from kernelopt.cli.format import OptimizeProgress
    from kernelopt.store import Store

    refuse_model_flags(path, kind, refused)
    with Store(config.store) as db, OptimizeProgress(err, enabled=not as_json) as progress:
        report = optimize_file(
            path,
            db,
            operators=None if tuple(operators) == DEFAULT_OPERATORS else operators,  # the kind's own defaults
            policy=policy,
            budget=budget,
            export_path=export,
            resume_run=resume,
            on_event=progress.update,
            config=config,
            llm=llm,
            llm_config=llm_config,
            sizes=sizes,
            kernel=kernel,
        )
    return report


def _us(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "-"


def print_file_report(report: FileReport, console: Console) -> None:
    """The run in a table and a few lines: times, the winner, where the file and its record went."""
    table = Table(
        title=f"{report.name} ({report.kind} kernel file) on {report.device} (run {report.run_id})",
        title_justify="left",
    )
    for col in ("original µs", "optimized µs", "speedup", "evals", "failures by gate", "winner", "stopped because"):
        table.add_column(col)
    fails = ", ".join(f"{g} {n}" for g, n in sorted(report.failures_by_gate.items())) or "-"
    winner = f"{report.best.operator}: {report.best.note}" if report.best else "original kept"
    table.add_row(
        _us(report.original_us),
        _us(report.optimized_us),
        f"{report.speedup:.3f}x (IQR {report.speedup_iqr[0]:.3f}-{report.speedup_iqr[1]:.3f}x)"
        if report.best
        else "1.000x",
        str(report.evaluations),
        fails,
        winner,
        report.stop_reason,
    )
    console.print(table)
    lines = [report.final_reason]
    if report.llm_usage is not None and report.kernel:
        lines.append(f"the LLM agents worked on {report.kernel} (--kernel NAME picks another)")
    if report.ncu:
        lines.append(report.ncu)
    if report.helion:
        lines += helion_lines(report.helion, report.best.config if report.best else None)
        if report.over_helion_tuned is not None:
            lines.append(f"{report.over_helion_tuned:.3f}x over Helion's own autotuned config (search timings)")
    if report.min_time_us:
        lines.append(
            f"roofline floor {report.min_time_us:.1f} µs (inputs read and outputs written once at the measured peak)"
        )
    lines.append(
        f"{report.evaluations} evaluations, {report.gpu_s:.1f} s in the evaluation worker, {report.wall_s:.0f} s wall"
    )
    lines.extend(f"warning: {w}" for w in report.warnings)
    lines.append(f"every candidate and its gate record: kernelopt nodes {report.run_id}")
    if report.exported:
        lines.append(f"wrote {report.exported} (the verified file) and {report.record} (its verification record)")
    for line in lines:
        console.print(line, markup=False, highlight=False)


def helion_lines(helion: dict[str, Any], delivered: dict[str, Any] | None) -> list[str]:
    """What the Helion stage did, kernel by kernel (one kernel: one line), and the config each delivered
    kernel has baked in where the file has several."""
    how = f"{helion['search'] + ', ' if helion.get('search') else ''}{helion.get('effort')} effort"
    kernels = helion.get("kernels") or []
    if helion.get("skipped"):
        return [f"Helion's autotuner not run: {helion['skipped']}"]
    if len(kernels) == 1:
        (k,) = kernels
        if k.get("tuned"):
            return [f"Helion's autotuner ({how}) chose its config in {helion.get('seconds', 0):.0f} s (tried first)"]
        return [f"Helion's autotuner failed: {k['error']}"] if k.get("error") else []
    lines = []
    for k in kernels:
        if k.get("tuned"):
            lines.append(
                f"{k['kernel']}: Helion's autotuner ({how}) chose its config in {k.get('seconds', 0):.0f} s of "
                f"its {k.get('budget_s')} s"
            )
        elif k.get("error"):
            lines.append(f"{k['kernel']}: Helion's autotuner failed: {k['error']}")
        elif k.get("skipped"):
            lines.append(f"{k['kernel']}: {k['skipped']}")
        if delivered and k["kernel"] in delivered:
            lines.append(f"{k['kernel']}: delivered with {config_text(delivered[k['kernel']])} baked in")
    if any(k.get("tuned") for k in kernels):
        lines.append("the autotuner's configs, baked together (the default where it failed), were tried first")
    return lines


def print_file_analysis(found: dict[str, Any], console: Console) -> None:
    """A kernel file's time against its floor, in a few lines."""
    lines = [
        f"{found['name']} ({found['kind']} kernel file) on {found['device']} (run {found['run_id']})",
        f"inputs {found.get('inputs')} -> outputs {found.get('outputs')}"
        + (f", writes inputs {found['written_inputs']} in place" if found.get("written_inputs") else ""),
        f"time {_us(found.get('time_us'))} µs (median, in a process that never loads a candidate)",
    ]
    if found.get("min_time_us"):
        lines.append(
            f"roofline floor {_us(found['min_time_us'])} µs at {found.get('peak_gbps') or 0:.0f} GB/s: "
            f"{found.get('pct_of_roofline') or 0:.0f} % of it reached"
        )
    lines.append(
        "reference(): "
        + ("yes, judged in float64" if found.get("reference") else "none: the original is the reference")
    )
    for line in lines:
        console.print(line, markup=False, highlight=False)
