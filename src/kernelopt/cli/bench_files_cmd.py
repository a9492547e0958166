"""``kernelopt bench DIR`` where DIR holds kernel files: the flags that apply, the run, its scoreboard.

``bench`` reads what the folder holds (:func:`kernelopt.problem.suite_kinds.suite_kinds`) and hands a
folder of Triton / Helion kernel files here. The model bench's flags that have no meaning for a kernel
file (stock ``torch.compile`` modes, kernels searched per model, GPU lanes and shards) are refused in one
line each, never silently dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelopt.errors import KerneloptError
from kernelopt.pipeline.bench_files import FileBenchEvent, FileBenchReport
from kernelopt.problem.suite_kinds import SuiteKinds
from kernelopt.report.file_scoreboard import FileOutcome, speedup_text
from kernelopt.search.operators import DEFAULT_OPERATORS

_STATUS_STYLE = {"ok": "green", "timeout": "yellow"}


def refuse_model_bench_flags(suite: Path, flags: dict[str, bool]) -> None:
    """One line for the first flag given that only means something for a bench of model problems."""
    for flag, given in flags.items():
        if given:
            raise KerneloptError(
                f"{flag} applies to a bench of model problems; {suite} holds kernel files: leave {flag} out"
            )


def file_operators_of(operators: str) -> list[str] | None:
    """The operators asked for, or None where the flag kept its (model) default: each kind's own then."""
    chosen = [name.strip() for name in operators.split(",") if name.strip()]
    return None if tuple(chosen) == DEFAULT_OPERATORS else chosen


def bench_kernel_files(root: Path, kinds: SuiteKinds, err: Console, **kwargs: Any) -> FileBenchReport:
    """Run the kernel-file bench with the progress on ``err``; ``kwargs`` are :func:`run_file_bench`'s."""
    from kernelopt.pipeline.bench_files import run_file_bench

    return run_file_bench(root, kinds, on_event=lambda event: _print_event(event, err), **kwargs)


def _print_event(event: FileBenchEvent, console: Console) -> None:
    position = f"[{event.index}/{event.total}]"
    if event.kind == "start":
        console.print(f"{position} {event.name} ...", markup=False, highlight=False)
        return
    o = event.outcome
    if o is None:
        return
    verb = "already done:" if event.kind == "skip" else "->"
    line = f"{position} {event.name} {verb} {o.status}"
    line += f", {speedup_text(o)}" if o.status == "ok" else f": {o.reason}"
    console.print(line, markup=False, highlight=False)


def _us(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _row(o: FileOutcome) -> list[Text | str]:
    return [
        Text(o.name),
        Text(o.kind),
        Text(o.status, style=_STATUS_STYLE.get(o.status, "red")),
        speedup_text(o, 3) or "—",
        _us(o.original_us),
        _us(o.optimized_us),
        ", ".join(o.operators) or "—",
        str(o.evaluations),
        str(o.run_id) if o.run_id is not None else "—",
    ]


def print_file_bench(report: FileBenchReport, console: Console) -> None:
    """The per-file table, what was not benched and why, the failures, then the summary lines."""
    from kernelopt.report.scoreboard import fmt_ratio

    table = Table(title=f"kernelopt bench (kernel files): {report.suite}", title_justify="left")
    longest = max((len(o.name) for o in report.outcomes), default=4)
    table.add_column("file", no_wrap=True, min_width=longest)
    for header in ("kind", "status", "speedup over the original", "original µs", "optimized µs", "operators"):
        table.add_column(header, justify="left" if header in ("kind", "status", "operators") else "right")
    table.add_column("evals", justify="right")
    table.add_column("run", justify="right")
    for outcome in report.outcomes:
        table.add_row(*_row(outcome))
    table.caption = (
        "speedup: the final check's, timed interleaved against the original file in one process (IQR in "
        "brackets); the run of each file: kernelopt nodes RUN"
    )
    table.caption_justify = "left"
    console.print(table)
    s = report.summary
    lines = [f"  not benched: {x['name']} ({x['kind']}): {x['reason']}" for x in s.get("skipped") or []]
    lines += [f"  {o.name}: {o.status}: {o.reason}" for o in report.outcomes if o.status != "ok"]
    counts = ", ".join(f"{status} {n}" for status, n in s["status_counts"].items() if n) or "none"
    lines.append(
        f"files: {s['files']} ({counts}); delivered: {s['delivered']}; geomean speedup over the originals "
        f"{fmt_ratio(s['geomean_speedup'], digits=3) or '—'} (1.0 where the original stays)"
    )
    lines.append(f"evaluations: {s['evaluations']}, GPU time {s['gpu_s']:.0f} s")
    if report.resumed:
        lines.append(f"taken from the earlier run: {len(report.resumed)} file(s)")
    delivered = [o for o in report.outcomes if o.exported]
    for o in delivered:
        lines.append(f"wrote {o.exported} and its record {o.record}")
    files = report.files
    lines.append(f"results: {files['json']}, {files['csv']}, {files['markdown']}")
    if report.report_path:
        lines.append(f"report: {report.report_path}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
