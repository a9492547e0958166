"""What people read: the optimize and verify reports and the live progress, rendered to text."""

from __future__ import annotations

import pytest
from rich.console import Console

from kernelopt.api.verify import VerifyReport
from kernelopt.cli.format import OptimizeProgress, print_optimize, print_verify
from kernelopt.pipeline.records import KernelResult, OptimizeReport, Winner
from kernelopt.verify.verdict import Verdict


def render(fn, *args) -> str:
    console = Console(record=True, width=200)
    fn(*args, console)
    return console.export_text()


def test_optimize_report_shows_kernels_skips_and_the_final_numbers() -> None:
    report = OptimizeReport(problem="softmax", run_id=7, device="NVIDIA H200", eager_ms=1.05, compiled_ms=0.78, amdahl_bound=1.54)
    report.kernels = [
        KernelResult("triton_red_a_0", 780.0, 750.0, 1.04, 16, {"correctness": 2}, "patience: 2 rounds without improvement",
                     Winner("launch-config", "num_warps 16->32", "<source>", []), "passed again with kernel seeds [1, 2, 3]"),
        KernelResult("triton_poi_b_1", 120.0, None, 1.0, 8, {}, "evaluation budget of 8 reached",
                     inductor_tuned={"XBLOCK": 512, "num_warps": 4}),
    ]
    report.skipped = [("extern_kernels.mm", "vendor call: kept as the compiler made it")]
    report.speedup_vs_compile, report.speedup_vs_compile_iqr = 1.039, (1.037, 1.041)
    report.optimized_ms, report.speedup_vs_eager = 0.751, 1.40
    report.final_reason, report.evaluations, report.gpu_s, report.exported = "verified: 1 kernel(s) replaced", 24, 48.0, "m.kopt.json"
    report.warnings = ["Inductor's coordinate descent failed on triton_poi_b_1 (crash: SIGSEGV)"]
    text = render(print_optimize, report)
    assert "triton_red_a_0" in text and "1.040x" in text and "launch-config: num_warps 16->32" in text
    assert "baseline kept" in text and "correctness 2" in text
    assert "skipped extern_kernels.mm: vendor call" in text
    assert "triton_red_a_0 winner re-evaluated: passed again with kernel seeds [1, 2, 3]" in text
    assert "triton_poi_b_1: Inductor's coordinate descent picks {'XBLOCK': 512, 'num_warps': 4} (tried first)" in text
    assert "1.039x over torch.compile (IQR 1.037-1.041x), 1.400x over eager" in text
    assert "24 evaluations, 48.0 s in the evaluation worker (30 per GPU-minute)" in text
    assert "exported m.kopt.json" in text
    assert "every candidate and its gate record: kernelopt nodes 7" in text
    assert "warning: Inductor's coordinate descent failed on triton_poi_b_1 (crash: SIGSEGV)" in text


def test_verify_report_lists_every_gate_and_the_outcome() -> None:
    cmp = {"speedup": 1.165, "speedup_q1": 1.162, "speedup_q3": 1.169, "baseline": {"median_ms": 9.3374}, "candidate": {"median_ms": 8.0144}}
    report = VerifyReport("rowl2", "triton_red_x_0", False,
                          [Verdict("static", True, "ok"), Verdict("correctness", False, "seed 1: out_ptr0 differs")],
                          kernel_speedup=cmp)
    text = render(print_verify, report)
    assert "correctness  FAIL  seed 1: out_ptr0 differs" in text
    assert "kernel speedup      1.165x (IQR 1.162-1.169x): 9337.4 us -> 8014.4 us" in text
    assert "REJECTED: the compiled baseline stays" in text
    assert text.splitlines()[0] == "verify triton_red_x_0 in rowl2"  # at the file's own sizes
    report.sizes = {"batch_size": 64, "dim": 1023}
    assert render(print_verify, report).splitlines()[0] == "verify triton_red_x_0 in rowl2 at batch_size=64, dim=1023"


def test_progress_counts_evaluations_best_and_failures() -> None:
    progress = OptimizeProgress(Console(record=True, width=200), enabled=False)
    progress.update("round", {"kernel": "k", "round": 2})
    progress.update("evaluated", {"kernel": "k", "passed": True, "fitness": 1.12})
    progress.update("evaluated", {"kernel": "k", "passed": False, "fitness": 0.0, "failed_gate": "model"})
    progress.update("stopped", {"kernel": "k", "reason": "patience"})
    row = progress.rows["k"]
    assert row == {"round": 2, "evaluations": 2, "best": 1.12, "failures": {"model": 1}, "state": "patience"}
    progress.update("warning", {"message": "no hardware counters for k: ncu not found"})
    assert "warning: no hardware counters for k: ncu not found" in progress.console.export_text()


def test_without_a_terminal_an_error_after_the_progress_table_starts_on_its_own_line() -> None:
    import io

    from kernelopt.cli.format import OptimizeProgress

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=100)
    with pytest.raises(RuntimeError), OptimizeProgress(console) as progress:
        progress.update("evaluated", {"kernel": "triton_k_0", "passed": False, "failed_gate": "correctness"})
        raise RuntimeError("boom")
    console.print("kernelopt: error: boom")
    assert "\nkernelopt: error: boom\n" in buffer.getvalue()
