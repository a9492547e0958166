"""Rendering reports for people (rich tables). No computation happens here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kernelopt.api.analyze import AnalysisReport
from kernelopt.api.doctor import Diagnosis
from kernelopt.api.verify import VerifyReport

KIND_LABEL = {"triton": "triton", "cpp": "c++", "vendor": "vendor", "aten": "aten"}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def analysis_table(report: AnalysisReport) -> Table:
    table = Table(title=f"{report.problem} on {report.device}", title_justify="left")
    for col, justify in [
        ("#", "right"), ("kind", "left"), ("name", "left"), ("time µs", "right"), ("%", "right"),
        ("GB/s", "right"), ("% peak", "right"), ("headroom µs", "right"),
    ]:
        table.add_column(col, justify=justify, no_wrap=col != "name")
    for row in report.launches:
        table.add_row(
            str(row.index),
            KIND_LABEL.get(row.kind, row.kind),
            row.name,
            _num(row.time_us, ".1f"),
            _num(100 * row.share, ".1f"),
            _num(row.achieved_gbps, ".0f"),
            _num(row.pct_of_peak, ".0f"),
            _num(row.headroom_us, ".1f"),
        )
    return table


def summary_lines(report: AnalysisReport) -> list[str]:
    return [
        f"eager     {report.eager_ms:9.3f} ms  ±{100 * report.eager_spread:.1f}% (IQR/median)",
        f"compiled  {report.compiled_ms:9.3f} ms  ±{100 * report.compiled_spread:.1f}%   "
        f"speedup over eager {report.speedup_vs_eager:.2f}x",
        f"attributed GPU time {report.attributed_ms:.3f} ms (unattributed {report.unattributed_ms:.3f} ms); "
        f"Triton {report.triton_ms:.3f} ms with {report.triton_headroom_ms:.3f} ms headroom",
        f"Amdahl bound (Triton kernels at roofline, vendor calls unchanged): {report.amdahl_bound:.2f}x over compiled",
        f"peak copy bandwidth {report.peak_gbps:.0f} GB/s; "
        f"torch {report.versions.get('torch')}, triton {report.versions.get('triton')}"
        + (f"; run {report.run_id}" if report.run_id is not None else ""),
    ]


def print_analysis(report: AnalysisReport, console: Console) -> None:
    console.print(analysis_table(report))
    for line in summary_lines(report):
        console.print(line, markup=False, highlight=False)


def print_doctor(diag: Diagnosis, console: Console) -> None:
    v = diag.versions
    lines = [
        f"device        {diag.device}",
        f"driver        {v.get('driver') or 'n/a'}   CUDA (torch build) {v.get('cuda') or 'n/a'}",
        f"torch         {v.get('torch')} ({'supported' if diag.torch_supported else 'UNSUPPORTED'})   triton {v.get('triton') or 'not installed'}",
        f"copy b/w      {'%.0f GB/s (read + write, measured)' % diag.peak_copy_gbps if diag.peak_copy_gbps else 'n/a'}",
        f"nsight        {diag.ncu_path or 'not found'}: counters {'readable' if diag.ncu_counters else 'NOT readable'} ({diag.ncu_reason})",
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False)
    for problem in diag.problems:
        console.print(f"problem: {problem}", markup=False, highlight=False)
    if not diag.problems:
        console.print("ok: everything kernelopt needs is here", markup=False, highlight=False)


def _speedup_line(label: str, cmp: dict | None) -> str | None:
    if not cmp:
        return None
    return (
        f"{label} {cmp['speedup']:.3f}x (IQR {cmp['speedup_q1']:.3f}-{cmp['speedup_q3']:.3f}x): "
        f"{cmp['baseline']['median_ms'] * 1000:.1f} us -> {cmp['candidate']['median_ms'] * 1000:.1f} us"
    )


def print_verify(report: VerifyReport, console: Console) -> None:
    console.print(f"verify {report.kernel} in {report.problem}", markup=False, highlight=False)
    for v in report.verdicts:
        console.print(f"  {v.gate:<12} {'pass' if v.passed else 'FAIL'}  {v.reason}", markup=False, highlight=False)
    lines = [
        _speedup_line("kernel speedup     ", report.kernel_speedup),
        _speedup_line("end-to-end speedup ", (report.end_to_end or {}).get("comparison")),
    ]
    for line in filter(None, lines):
        console.print(line, markup=False, highlight=False)
    verdict = "PASSED: exported " + str(report.exported) if report.passed else "REJECTED: the compiled baseline stays"
    console.print(verdict, markup=False, highlight=False)
