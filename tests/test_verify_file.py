"""``kernelopt verify`` on a kernel file: your candidate file through the gates on CPU tensors, gate 1
before any worker, the delivery when it passes, and the CLI's kind-aware flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from kernelopt.api.verify_file import verify_file
from kernelopt.cli.main import app
from kernelopt.search.file_configs import apply_config
from kernelopt.store import Store

pytest.importorskip("triton")
SOFTMAX = ROOT / "examples" / "kernels" / "softmax_naive.py"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The softmax example at its CPU size (verify takes a file as it is: no size overrides)."""
    path = tmp_path / "softmax_small.py"
    path.write_text(SOFTMAX.read_text().replace("ROWS = 4096\nCOLS = 32768", "ROWS = 6\nCOLS = 50"))
    return path


def test_a_candidate_gate_1_refuses_is_rejected_before_any_worker(small: Path, tmp_path: Path) -> None:
    cheat = tmp_path / "cheat.py"
    cheat.write_text(small.read_text().replace("    return y\n", "    return torch.softmax(x, -1)\n", 1))
    store = Store(tmp_path / "k.db")
    report = verify_file(small, cheat, store, device="cpu")
    assert not report.passed and [v.gate for v in report.verdicts] == ["static"] and report.run_id is None
    assert store.runs() == []  # nothing was started


def test_a_retuned_file_is_judged_with_the_final_check_s_settings_and_recorded(small: Path, tmp_path: Path) -> None:
    candidate = tmp_path / "mine.py"
    candidate.write_text(apply_config(small.read_text(), {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 3}}))
    store = Store(tmp_path / "k.db")
    report = verify_file(small, candidate, store, tmp_path / "out_kopt.py", device="cpu")
    assert [(v.gate, v.passed) for v in report.verdicts[:3]] == [("static", True), ("correctness", True), ("model", True)]
    assert "edge cases" in report.verdicts[1].reason  # the final check's cases, edge cases among them
    run = store.run(report.run_id or 0)
    assert run.kind == "verify" and run.status == "done" and run.args["input"] == "triton"
    assert store.measurements(report.run_id or 0, "evaluation")["evaluation"]["passed"] == report.passed
    assert (tmp_path / "out_kopt.py").exists() == report.passed  # delivered only when it passed


def test_the_cli_takes_a_kernel_name_for_a_file_only_with_cuda_and_needs_one_for_a_problem(small: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["verify", str(small), "--candidate", str(small), "--kernel", "k"])
    assert result.exit_code != 0 and "names the kernel a CUDA C++ candidate replaces" in result.output
    assert "leave --kernel out" in result.output
    problem = ROOT / "examples" / "problems" / "level1" / "15_rmsnorm.py"
    result = CliRunner().invoke(app, ["verify", str(problem), "--candidate", str(small)])
    assert result.exit_code != 0 and "name the generated kernel to replace with --kernel" in result.output


def test_analyze_times_the_file_in_a_worker_and_records_it(small: Path, tmp_path: Path) -> None:
    from kernelopt.pipeline.analyze_kernel_file import analyze_kernel_file

    store = Store(tmp_path / "k.db")
    found = analyze_kernel_file(small, store, trials=5, device="cpu")
    assert found["kind"] == "triton" and found["inputs"] == [[6, 50]] and found["outputs"] == [[6, 50]]
    assert found["time_us"] > 0 and found["min_time_us"] is None  # no peak bandwidth on a CPU
    assert store.run(found["run_id"]).kind == "analyze"
    assert store.measurements(found["run_id"], "kernel_file_analysis")["kernel_file_analysis"]["time_us"] == found["time_us"]
    from kernelopt.report import write_run_report

    page = write_run_report(store, found["run_id"], tmp_path / "a.html").read_text()
    assert f"{found['time_us']:.1f} µs" in page and "an analyze run: no search" in page
    result = CliRunner().invoke(app, ["analyze", str(small), "--stock-modes"])
    assert result.exit_code != 0 and "--stock-modes applies to a model" in result.output


def test_a_kernel_file_is_judged_at_the_sizes_given_and_the_run_says_so(tmp_path: Path, monkeypatch) -> None:
    """At the file's own 4096 x 32768 Triton's interpreter would not finish: the sizes reach the judge."""
    import functools
    import json

    from kernelopt.api import verify_file as api

    monkeypatch.setattr(api, "verify_file", functools.partial(verify_file, device="cpu"))  # the CLI's, on a CPU
    candidate = tmp_path / "mine.py"
    candidate.write_text(apply_config(SOFTMAX.read_text(), {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 3}}))
    store = tmp_path / "k.db"
    args = ["verify", str(SOFTMAX), "--candidate", str(candidate), "--store", str(store), "--json",
            "--export", str(tmp_path / "out_kopt.py"), "--size", "ROWS=6", "--size", "COLS=50"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output  # passed, or not faster on a CPU: judged either way
    report = json.loads(result.stdout)
    assert report["sizes"] == {"ROWS": 6, "COLS": 50}
    assert [(v["gate"], v["passed"]) for v in report["verdicts"][:2]] == [("static", True), ("correctness", True)]
    with Store(store) as db:
        assert db.run(report["run_id"]).args["sizes"] == {"ROWS": 6, "COLS": 50}


def test_a_delivery_verified_at_other_sizes_records_them(small: Path, tmp_path: Path, monkeypatch) -> None:
    import json

    from kernelopt.api import verify_file as api
    from kernelopt.search.candidate import EvaluationResult

    judged = []

    class Passing:  # a judge that finds the candidate 1.2x faster: what is checked is what the delivery records
        def __init__(self, worker, spec, settings, peak, timeout_s) -> None:
            judged.append(spec)

        def one(self, source: str) -> EvaluationResult:
            cmp = {"baseline": {"median_ms": 1.2}, "candidate": {"median_ms": 1.0}, "speedup_q1": 1.1, "speedup_q3": 1.3}
            gates = [{"gate": g, "passed": True, "reason": "fine", "details": {}} for g in ("static", "correctness")]
            return EvaluationResult(True, 1.2, None, "faster", gates, {"kernel_comparison": cmp})

    monkeypatch.setattr(api, "FileEvaluator", Passing)
    candidate = tmp_path / "mine.py"
    candidate.write_text(apply_config(small.read_text(), {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 3}}))
    report = api.verify_file(small, candidate, Store(tmp_path / "k.db"), tmp_path / "out_kopt.py", device="cpu",
                             sizes={"ROWS": 3})  # fmt: skip
    assert report.passed and judged[0].overrides == {"ROWS": 3}
    record = json.loads((tmp_path / "out_kopt.json").read_text())
    assert record["sizes"] == {"ROWS": 3} and report.sizes == {"ROWS": 3}
