"""Rendering reports for people (rich tables). No computation happens here."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from kernelopt.api.doctor import Diagnosis
from kernelopt.api.verify import VerifyReport
from kernelopt.evaluate.analysis import AnalysisReport
from kernelopt.measure.roofline import ROOFLINE_DONE
from kernelopt.pipeline.optimize import OptimizeReport
from kernelopt.pipeline.stock_modes import untimed_modes
from kernelopt.report.scoreboard import fmt_ratio, op_hosts_line, replays_line
from kernelopt.search.nodes import Node
from kernelopt.search.targets import COPY_SHARE, structure_pays
from kernelopt.store import Run
from kernelopt.store.llm_records import Transcript

KIND_LABEL = {"triton": "triton", "cpp": "c++", "vendor": "vendor", "aten": "aten"}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def analysis_table(report: AnalysisReport) -> Table:
    table = Table(title=f"{report.problem} on {report.device}", title_justify="left")
    for col, justify in [
        ("#", "right"),
        ("kind", "left"),
        ("name", "left"),
        ("time µs", "right"),
        ("%", "right"),
        ("GB/s", "right"),
        ("% peak", "right"),
        ("headroom µs", "right"),
        ("passes", "right"),
    ]:
        table.add_column(col, justify=justify, no_wrap=col != "name")  # type: ignore[arg-type]
    for row in report.launches:
        table.add_row(
            str(row.index),
            "copy" if row.moves_only else KIND_LABEL.get(row.kind, row.kind),
            row.name,
            _num(row.time_us, ".1f"),
            _num(100 * row.share, ".1f"),
            _num(row.achieved_gbps, ".0f"),
            _num(row.pct_of_peak, ".0f"),
            _num(row.headroom_us, ".1f"),
            # loops over its rows: each after the first reads them again, which % peak (bytes moved once)
            # does not count; a looped softmax that computes its max and sum apart makes three
            str(1 + row.second_passes) if row.second_passes else "",
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
        f"GPU busy {100 * report.gpu_busy:.0f}% of the compiled forward; launch-overhead bound "
        f"(no gaps between launches) {report.launch_overhead_bound:.2f}x",
        *floor_lines(report),
        *moves_lines(report),
        *graph_stage_lines(report),
        *stock_lines(report),
        f"peak copy bandwidth {report.peak_gbps:.0f} GB/s; "
        f"torch {report.versions.get('torch')}, triton {report.versions.get('triton')}"
        + (f"; run {report.run_id}" if report.run_id is not None else ""),
    ]


def floor_lines(report: AnalysisReport) -> list[str]:
    """The traffic floor, and the fusion bound where only generated kernels run (one line; none
    for a report made before the floor was measured)."""
    if report.floor_ms is None or report.floor_bytes is None:
        return []
    floor = f"{report.floor_ms:.3f} ms" if report.floor_ms >= 1 else f"{report.floor_ms * 1e3:.3g} us"
    moved = "inputs, weights and outputs moved once at peak"
    if report.reread_bytes:
        moved += f", and {report.reread_bytes / 1e6:.3g} MB of inputs a second time"
    line = f"traffic floor ({moved}): {floor} for {report.floor_bytes / 1e6:.3g} MB; "
    notes = [f"  {reread}" for reread in report.rereads]
    if report.fusion_bound is not None:
        return [line + f"fusion bound {report.fusion_bound:.2f}x over compiled", *notes]
    return [line + "no fusion bound: vendor calls run, and their time is not only traffic"]


def moves_lines(report: AnalysisReport) -> list[str]:
    """The Triton kernels that only move data (kind ``copy`` in the table), where there are any."""
    if not report.moves_launches:
        return []
    share = report.moves_ms / report.attributed_ms if report.attributed_ms else 0.0
    return [
        f"data movement only (layout copies, transposes, concatenations): {report.moves_launches} launches, "
        f"{report.moves_ms:.3f} ms ({100 * share:.0f}% of GPU time); no launch config removes it, only a "
        "changed call sequence"
    ]


def graph_stage_lines(report: AnalysisReport) -> list[str]:
    """Whether ``optimize`` will regenerate whole graphs under other options for this model without
    being asked (the graph_stage setting at auto), and why."""
    why = structure_pays(
        report.amdahl_bound, report.fusion_bound, report.moves_share, report.rereads_share, report.own_ops
    )
    if why:
        return [f"optimize also searches graph variants here (graph_stage auto): {why}"]
    if report.rereads_cached_share >= COPY_SHARE:
        return [
            f"kernels that read their rows twice ({report.rereads_cached_ms:.3f} ms) run at {ROOFLINE_DONE:.0f}% "
            "or more of the copy roofline counting one read: their second read comes from cache, so no "
            "graph variant that drops it can pay"
        ]
    return []


def input_copy_note(record: dict, speedup: float, peak_gbps: float) -> str:
    """Why a CUDA-graph mode ran slower than the default, where the likely cause is known: its
    CUDA-graph trees copy every input that is not a parameter into the graph's own memory before each
    replay (read and written once: at the peak copy bandwidth, the time it costs)."""
    nbytes = record.get("input_bytes")
    if not nbytes or speedup >= 1.0:
        return ""
    cost = f", about {2 * nbytes / (peak_gbps * 1e6):.3f} ms at the peak copy bandwidth" if peak_gbps > 0 else ""
    return (
        f"; slower: its CUDA graphs copy the {nbytes / 1e6:.0f} MB of inputs into their own memory before "
        f"every replay{cost}"
    )


def stock_lines(report: AnalysisReport) -> list[str]:
    """Each stock mode's speedup over the default (timed interleaved in the mode's own process), and
    the best; nothing when they were not timed."""
    from kernelopt.report.metrics import speedup_over_default

    if not report.stock:
        return []
    lines, best = [], ("the default", 1.0)
    for mode, record in report.stock.items():
        speedup = speedup_over_default(record)
        if speedup is None:
            reason = record if isinstance(record, str) else record.get("vs_optimized_error", "no comparison")
            lines.append(f"  {mode}: not timed against the default ({reason})")
            continue
        line = f"  {mode}: {speedup:.3f}x over the default ({record['compiled_ms']:.3f} ms in its own process)"
        lines.append(line + input_copy_note(record, speedup, report.peak_gbps))
        best = max(best, (mode, speedup), key=lambda pair: pair[1])
    return [
        "stock torch.compile modes, each interleaved with the default in a process of its own:",
        *lines,
        f"best stock mode: {best[0]}" + (f" ({best[1]:.3f}x over the default)" if best[0] != "the default" else ""),
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
        f"copy b/w      {f'{diag.peak_copy_gbps:.0f} GB/s (read + write, measured)' if diag.peak_copy_gbps else 'n/a'}",
        f"nsight        {diag.ncu_path or 'not found'}: counters {'readable' if diag.ncu_counters else 'NOT readable'} ({diag.ncu_reason})",
        f"workers       {diag.workers}",
        f"CUDA C++      {'buildable (nvcc, ninja)' if diag.cuda_builds is None else 'NOT buildable: ' + diag.cuda_builds}",
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
    at = ", ".join(f"{name}={value!r}" for name, value in report.sizes.items())
    head = f"verify {report.kernel} in {report.problem}" + (f" at {at}" if at else "")
    console.print(head, markup=False, highlight=False)
    for v in report.verdicts:
        console.print(f"  {v.gate:<12} {'pass' if v.passed else 'FAIL'}  {v.reason}", markup=False, highlight=False)
    lines = [
        _speedup_line("kernel speedup     ", report.kernel_speedup),
        _speedup_line("end-to-end speedup ", (report.end_to_end or {}).get("comparison")),
    ]
    if report.raw.get("build_s") is not None:
        lines.append(
            f"CUDA C++ build      {report.raw['build_s']:.1f} s (nvcc; 0 when cached), "
            f"apart from the gates' {report.raw.get('gates_s', 0.0):.1f} s"
        )
    for line in filter(None, lines):
        console.print(line, markup=False, highlight=False)
    kept = "the compiled baseline stays" if report.kind == "model" else "your original file stays"
    verdict = "PASSED: exported " + str(report.exported) if report.passed else f"REJECTED: {kept}"
    console.print(verdict, markup=False, highlight=False)


class OptimizeProgress:
    """A live line per kernel: round, evaluations, best verified speedup, failures by gate."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console, self.enabled = console, enabled
        self.rows: dict[str, dict] = {}
        self.stage = "starting"
        self._live: Live | None = None

    def __enter__(self) -> OptimizeProgress:
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            if not self.console.is_terminal:  # Live leaves its last table without a newline there
                self.console.line()

    def update(self, kind: str, data: dict) -> None:
        kernel = data.get("kernel")
        if kind == "warning":
            self.console.print(f"warning: {data['message']}", markup=False, highlight=False)
        elif kind == "stage":
            self.stage = data["stage"]
        elif kernel:
            row = self.rows.setdefault(
                kernel, {"round": 0, "evaluations": 0, "best": 1.0, "failures": {}, "state": "searching"}
            )
            self.stage = f"searching {kernel}"
            if kind == "round":
                row["round"] = data.get("round", row["round"])
            elif kind == "evaluated":
                row["evaluations"] += 1
                if data.get("passed"):
                    row["best"] = max(row["best"], data.get("fitness") or 1.0)
                gate = data.get("failed_gate")
                if gate:
                    row["failures"][gate] = row["failures"].get(gate, 0) + 1
            elif kind == "stopped":
                row["state"] = data.get("reason", "stopped")
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Table:
        table = Table(title=f"kernelopt optimize: {self.stage}", title_justify="left")
        for col in ("kernel", "round", "evals", "best speedup", "failures by gate", "state"):
            table.add_column(col)
        for name, r in self.rows.items():
            fails = ", ".join(f"{g} {n}" for g, n in sorted(r["failures"].items())) or "-"
            table.add_row(name, str(r["round"]), str(r["evaluations"]), f"{r['best']:.3f}x", fails, r["state"])
        return table


def print_optimize(report: OptimizeReport, console: Console) -> None:
    table = Table(title=f"{report.problem} on {report.device} (run {report.run_id})", title_justify="left")
    for col in ("kernel", "before µs", "after µs", "speedup", "evals", "failures by gate", "winner", "stopped because"):
        table.add_column(col)
    for k in report.kernels:
        fails = ", ".join(f"{g} {n}" for g, n in sorted(k.failures_by_gate.items())) or "-"
        winner = f"{k.best.operator}: {k.best.note}" if k.best else "baseline kept"
        table.add_row(
            k.name,
            f"{k.before_us:.1f}",
            _num(k.after_us, ".1f"),
            f"{k.speedup:.3f}x" if k.best else "1.000x",
            str(k.evaluations),
            fails,
            winner,
            k.stop_reason,
        )
    for g in report.graphs:  # a graph's whole call sequence, timed end to end
        fails = ", ".join(f"{gate} {n}" for gate, n in sorted(g.failures_by_gate.items())) or "-"
        table.add_row(
            f"graph {g.graph} (call sequence)",
            "-",
            "-",
            f"{g.speedup:.3f}x end to end" if g.best else "1.000x",
            str(g.evaluations),
            fails,
            f"graph-variants: {g.note}" if g.best else "baseline kept",
            g.stop_reason,
        )
    console.print(table)
    if report.graph_compile:
        console.print(f"graph variants: {report.graph_compile}", markup=False, highlight=False)
    if report.graph_stage:
        console.print(
            f"graphs searched without --operators naming them: {report.graph_stage}", markup=False, highlight=False
        )
    for g in report.graphs:
        if g.final_check:
            console.print(f"graph {g.graph} winner re-evaluated: {g.final_check}", markup=False, highlight=False)
    for k in report.kernels:
        if k.inductor_tuned:
            console.print(
                f"{k.name}: Inductor's coordinate descent picks {k.inductor_tuned} (tried first)",
                markup=False,
                highlight=False,
            )
        if k.final_check:
            console.print(f"{k.name} winner re-evaluated: {k.final_check}", markup=False, highlight=False)
    for name, reason in report.skipped:
        console.print(f"skipped {name}: {reason}", markup=False, highlight=False)
    iqr = (
        f" (IQR {report.speedup_vs_compile_iqr[0]:.3f}-{report.speedup_vs_compile_iqr[1]:.3f}x)"
        if report.speedup_vs_compile_iqr
        else ""
    )
    compiled = "torch.compile" if report.base_mode == "default" else f"torch.compile mode={report.base_mode}"
    lines = [
        f"base: {report.base_mode} ({report.base_mode_reason})" if report.base_mode_reason else "",
        f"compiled {report.compiled_ms:.3f} ms -> optimized {report.optimized_ms or report.compiled_ms:.3f} ms: "
        f"{report.speedup_vs_compile:.3f}x over {compiled}{iqr}, "
        f"{report.speedup_vs_eager or report.eager_ms / report.compiled_ms:.3f}x over eager ({report.eager_ms:.3f} ms)",
        f"Amdahl bound of Triton-only work: {report.amdahl_bound:.2f}x over {compiled}; launch-overhead bound "
        f"{report.launch_overhead_bound:.2f}x (GPU busy {100 * report.gpu_busy:.0f}%)",
        f"{report.final_reason}",
        f"{report.evaluations} evaluations, {report.gpu_s:.1f} s in the evaluation worker"
        + (f" ({report.evaluations_per_gpu_minute:.0f} per GPU-minute)" if report.evaluations_per_gpu_minute else "")
        + f", {report.wall_s:.0f} s wall",
    ]
    lines.append(replays_line(report.as_replays, compiled))
    if report.op_hosts:
        lines.append(f"kernelopt's own ops in the delivered model: {op_hosts_line(report.op_hosts)}")
    if report.best_stock_mode is not None and report.best_stock_speedup is not None:
        timed = [mode for mode, record in report.stock.items() if isinstance(record, dict)]
        lines.append(
            f"{report.best_stock_speedup:.3f}x over the best stock mode, {report.best_stock_mode} "
            f"(of the {report.base_mode} compile"
            + (f" and {', '.join(timed)}, each timed in its own process)" if timed else ": no other mode was timed)")
        )
    if report.exported and report.run_mode:  # the export compiles under that mode's CUDA graphs by itself
        lines.append(
            f"runs under mode={report.run_mode!r} (CUDA graphs), recorded in the export: "
            f"torch.compile(model, backend=kernelopt.backend({report.exported!r}))"
        )
        if report.run_mode_gain:  # kernels exported, then replayed under CUDA graphs
            lines.append(
                f"as delivered, under {report.run_mode}: {report.speedup_vs_compile * report.run_mode_gain:.3f}x over "
                f"{compiled} (the {report.speedup_vs_compile:.3f}x above times the graphs' "
                f"{report.run_mode_gain:.3f}x, each timed interleaved in its own process)"
            )
    lines.extend(f"stock mode not timed: {line}" for line in untimed_modes(report.stock))
    lines.extend(f"warning: {w}" for w in report.warnings)
    if report.kernels or report.knobs:
        lines.append(f"every candidate and its gate record: kernelopt nodes {report.run_id}")
    if report.exported:
        how = "kernelopt.backend: kernelopt.load runs it without CUDA graphs" if report.run_mode else "kernelopt.load"
        lines.append(f"exported {report.exported} (load with {how})")
    if report.report_path:
        lines.append(f"report: {report.report_path}")
    for line in filter(None, lines):
        console.print(line, markup=False, highlight=False)


def print_runs(runs: list[Run], console: Console) -> None:
    import datetime

    table = Table(title_justify="left")
    for col in ("id", "kind", "problem", "device", "status", "started", "error"):
        table.add_column(col)
    for r in runs:
        started = datetime.datetime.fromtimestamp(r.started_at).strftime("%Y-%m-%d %H:%M")
        table.add_row(str(r.id), r.kind, r.problem, r.device, r.status, started, r.error or "")
    console.print(table)


def print_nodes(target: str, nodes: list[Node], console: Console, baseline: str | None = None) -> None:
    """One target's search graph in creation order: best first is for the report, history is for this.
    ``baseline``: what the root is (Inductor's own kernel unless the run says otherwise: a kernel file)."""
    table = Table(title=target, title_justify="left")
    for col, justify in (
        ("id", "right"),
        ("parent", "right"),
        ("round", "right"),
        ("operator", "left"),
        ("change", "left"),
        ("status", "left"),
        ("speedup", "right"),
        ("gate record", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    best = max((n for n in nodes if n.passed), key=lambda n: n.fitness or 0.0, default=None)
    for n in nodes:
        if n.status == "pending":
            status, speedup, record = "pending", "", ""
        elif n.passed:
            status = "best" if best is not None and n.id == best.id and not n.is_root else "passed"
            speedup, record = fmt_ratio(n.fitness), n.reason or ""
        else:
            status, speedup, record = f"failed: {n.failed_gate}", "", n.reason or ""
        change = n.candidate.note or ((baseline or "Inductor's own kernel (the baseline)") if n.is_root else "")
        table.add_row(
            str(n.id),
            "" if n.parent_id is None else str(n.parent_id),
            str(n.round),
            n.operator,
            change,
            status,
            speedup,
            record,
        )
    console.print(table)


def transcript_text(t: Transcript, max_chars: int | None = 2000) -> str:
    """One LLM exchange as plain text: header, each message, the response (trimmed to ``max_chars`` each)."""

    def trim(text: str) -> str:
        if max_chars is None or len(text) <= max_chars:
            return text
        return f"{text[:max_chars]}\n... [{len(text) - max_chars} more characters; --full shows all]"

    tokens = f"{t.input_tokens or 0} in / {t.output_tokens or 0} out tokens"
    cost = f", ${t.cost_usd:.4f}" if t.cost_usd else ""
    node = f"node {t.node_id}, " if t.node_id is not None else ""
    lines = [
        f"=== #{t.id} {t.role} ({node}{t.provider}:{t.model}, {tokens}{cost})"
        + (f" ERROR: {t.error}" if t.error else "")
    ]
    for message in t.messages:
        lines.append(f"--- {message.get('role', '?')}")
        lines.append(trim(str(message.get("content", ""))))
    lines.append("--- response")
    lines.append(trim(t.response or ""))
    return "\n".join(lines)
