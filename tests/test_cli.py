"""The command line on a CPU-only machine: user errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from kernelopt.cli.main import app

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "problems" / "level1" / "01_relu.py"

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # older click/typer: keep stderr apart
    except TypeError:
        return CliRunner()  # newer: result.stderr is always separate


def _stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_analyze_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    result = _runner().invoke(app, ["analyze", str(missing), "--store", str(tmp_path / "k.db")])
    assert result.exit_code == 2, result.output
    lines = _stderr_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("kernelopt: error:")
    assert str(missing) in lines[0]
    assert "Traceback" not in result.output
    assert result.stdout.strip() == ""


@needs_no_gpu
def test_analyze_without_gpu(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    result = _runner().invoke(app, ["analyze", str(EXAMPLE), "--store", str(db)])
    assert result.exit_code == 2, result.output
    lines = _stderr_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("kernelopt: error:")
    assert "kernelopt analyze needs an NVIDIA GPU with CUDA" in lines[0]


@needs_no_gpu
def test_doctor_without_gpu(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    result = _runner().invoke(app, ["doctor", "--store", str(db)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "device" in out and "torch" in out
    problems = [line for line in out.splitlines() if line.startswith("problem:")]
    assert any("no CUDA GPU" in line for line in problems), out
    # a CPU build of PyTorch has no CUDA toolkit: what that costs and what to install
    assert "CUDA C++      NOT buildable: PyTorch finds no CUDA toolkit" in out
    assert any(line.startswith("problem: no CUDA C++ builds (PyTorch finds no CUDA toolkit") for line in problems), out
    assert "ok: everything kernelopt needs is here" not in out
    assert db.is_file()  # --store was honoured


def test_help_lists_commands() -> None:
    result = _runner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "analyze" in result.stdout and "doctor" in result.stdout


def test_python_dash_m_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelopt", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage: kernelopt" in proc.stdout  # prog_name set by __main__, not "python -m"
    assert "analyze" in proc.stdout and "doctor" in proc.stdout


def test_transcripts_prints_a_runs_exchanges_trimmed(tmp_path) -> None:
    from kernelopt.store import Store
    from kernelopt.store.llm_records import add_transcript

    db = tmp_path / "k.db"
    with Store(db) as store:
        run_id = store.start_run("optimize", "softmax", "H200", {})
        silent = store.start_run("optimize", "relu", "H200", {})
        add_transcript(store.connection, run_id=run_id, role="planner", provider="openai", model="m",
                       messages=[{"role": "user", "content": "plan for " + "x" * 5000}], response='{"strategy": "s"}',
                       input_tokens=1200, output_tokens=40, cost_usd=0.0123)
        add_transcript(store.connection, run_id=run_id, role="coder", provider="openai", model="m",
                       messages=[{"role": "system", "content": "write the kernel"}], response=None, error="timeout")
    runner = CliRunner()
    both = runner.invoke(app, ["transcripts", str(run_id), "--store", str(db)])
    assert both.exit_code == 0, both.output
    assert "planner (openai:m, 1200 in / 40 out tokens, $0.0123)" in both.stdout
    assert "[3009 more characters; --full shows all]" in both.stdout and "ERROR: timeout" in both.stdout
    assert both.stdout.index("planner") < both.stdout.index("coder")
    full = runner.invoke(app, ["transcripts", str(run_id), "--role", "planner", "--full", "--store", str(db)])
    assert "x" * 5000 in full.stdout and "coder" not in full.stdout
    none = runner.invoke(app, ["transcripts", str(silent), "--store", str(db)])
    assert none.exit_code == 2 and "has no LLM transcripts (was it run with --llm?)" in none.output
    missing = runner.invoke(app, ["transcripts", "99", "--store", str(db)])
    assert missing.exit_code == 2 and "no run 99" in missing.output


def test_runs_lists_the_store(tmp_path) -> None:
    from typer.testing import CliRunner

    from kernelopt.cli.main import app
    from kernelopt.store import Store

    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "softmax", "H200", {})
        store.finish_run(run_id, "failed", "killed")
        store.start_run("analyze", "relu", "H200", {})
    result = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "k.db")])
    assert result.exit_code == 0
    assert "softmax" in result.stdout and "failed" in result.stdout and "relu" in result.stdout
    only = CliRunner().invoke(app, ["runs", "--kind", "analyze", "--store", str(tmp_path / "k.db")])
    assert "relu" in only.stdout and "softmax" not in only.stdout


@pytest.mark.parametrize("command", [["runs"], ["nodes", "1"], ["transcripts", "1"]])
def test_reading_commands_refuse_a_missing_store_and_create_nothing(tmp_path, command) -> None:
    from kernelopt.cli.main import app

    typo = tmp_path / "typo" / "k.db"
    result = _runner().invoke(app, [*command, "--store", str(typo)])
    assert result.exit_code == 2, result.output
    (line,) = _stderr_lines(result)
    assert "no store at" in line and str(typo) in line
    assert not typo.parent.exists()


def test_runs_refuses_an_unknown_kind(tmp_path) -> None:
    from kernelopt.cli.main import app
    from kernelopt.store import Store

    Store(tmp_path / "k.db").close()
    result = _runner().invoke(app, ["runs", "--kind", "nosuchkind", "--store", str(tmp_path / "k.db")])
    assert result.exit_code == 2, result.output
    (line,) = _stderr_lines(result)
    assert "no such run kind" in line and "optimize" in line


def test_transcript_header_names_the_node() -> None:
    from kernelopt.cli.format import transcript_text
    from kernelopt.store.llm_records import Transcript

    t = Transcript(1, 2, 7, "coder", "anthropic", "m", [{"role": "user", "content": "hi"}], "{}", 10, 5, None, None, 0.0)
    assert transcript_text(t).splitlines()[0] == "=== #1 coder (node 7, anthropic:m, 10 in / 5 out tokens)"


def test_nodes_prints_a_runs_search_graph(tmp_path) -> None:
    from kernelopt.search.candidate import Candidate, EvaluationResult
    from kernelopt.search.nodes import NodeStore
    from kernelopt.store import Store

    db = tmp_path / "k.db"
    with Store(db) as store:
        run_id = store.start_run("optimize", "softmax", "H200", {})
        graph = NodeStore(store, run_id)
        root = graph.add(Candidate("triton_red_k", "root", source="def k(): pass", config={"XBLOCK": 1}), None, 0)
        graph.record(root.id, EvaluationResult(True, 1.0, None, "baseline: the compiler's own kernel, not evaluated"))
        fast = graph.add(Candidate("triton_red_k", "launch-config", source="def k(): 1", config={"XBLOCK": 2}, note="XBLOCK 1->2"), root.id, 1)
        graph.record(fast.id, EvaluationResult(True, 1.23, None, "speedup 1.23x beyond margin 3%"))
        wrong = graph.add(Candidate("triton_red_k", "eviction-policy", source="def k(): 2", note="eviction load0=none"), root.id, 1)
        graph.record(wrong.id, EvaluationResult.failure("correctness", "out_ptr0: 3 of 8 elements differ"))
        graph.add(Candidate("triton_red_k", "launch-config", source="def k(): 3", note="num_warps 4->8"), fast.id, 2)
        other = store.start_run("analyze", "relu", "H200", {})
    runner = CliRunner()
    result = runner.invoke(app, ["nodes", str(run_id), "--store", str(db)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    row = next(line for line in lines if "XBLOCK 1->2" in line)
    assert "best" in row and "1.230×" in row
    row = next(line for line in lines if "eviction load0=none" in line)
    assert "failed: correctness" in row and "3 of 8 elements differ" in row
    assert "pending" in next(line for line in lines if "num_warps 4->8" in line)
    data = json.loads(runner.invoke(app, ["nodes", str(run_id), "--json", "--store", str(db)]).stdout)
    assert [n["operator"] for n in data["triton_red_k"]] == ["root", "launch-config", "eviction-policy", "launch-config"]
    wrong_target = runner.invoke(app, ["nodes", str(run_id), "--kernel", "nope", "--store", str(db)])
    assert wrong_target.exit_code == 2 and "searched no target 'nope'; its targets: triton_red_k" in wrong_target.output
    empty = runner.invoke(app, ["nodes", str(other), "--store", str(db)])
    assert empty.exit_code == 2 and "has no search nodes" in empty.output
    assert runner.invoke(app, ["nodes", "99", "--store", str(db)]).exit_code == 2


def test_nodes_kernel_model_names_the_compiler_knob_target(tmp_path) -> None:
    from kernelopt.search.candidate import MODEL_TARGET, Candidate, EvaluationResult
    from kernelopt.search.nodes import NodeStore
    from kernelopt.store import Store

    db = tmp_path / "k.db"
    with Store(db) as store:
        run_id = store.start_run("optimize", "softmax", "H200", {})
        graph = NodeStore(store, run_id)
        root = graph.add(Candidate(MODEL_TARGET, "root", options={}), None, 0)
        graph.record(root.id, EvaluationResult(True, 1.0, None, "baseline"))
        graph.add(Candidate("triton_red_k", "root", source="def k(): pass"), None, 0)
    result = CliRunner().invoke(app, ["nodes", str(run_id), "--kernel", "model", "--json", "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)) == [MODEL_TARGET]


def test_verify_marks_its_run_failed_when_the_worker_side_raises(tmp_path, monkeypatch) -> None:
    from kernelopt.api import verify as api_verify
    from kernelopt.store import Store

    def boom(*args, **kwargs):
        raise RuntimeError("the worker could not start")

    monkeypatch.setattr(api_verify, "verify_candidate", boom)
    monkeypatch.setattr(api_verify.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(api_verify, "device_label", lambda: "test GPU")
    monkeypatch.setattr(api_verify, "peak_bandwidth", lambda store: 4000.0)
    problem = Path(__file__).resolve().parents[1] / "examples/problems/level1/15_rmsnorm.py"
    candidate = Path(__file__).resolve().parent / "fixtures/candidates/original_pointwise.py"
    with Store(tmp_path / "k.db") as store:
        with pytest.raises(RuntimeError, match="could not start"):
            api_verify.verify(problem, "triton_poi_fused_gelu_0", candidate, store=store)
        (run,) = store.runs()
        assert run.status == "failed" and "could not start" in (run.error or "")
