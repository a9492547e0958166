"""``--size NAME=VALUE`` for analyze and optimize, on problems and kernel files: parsed, checked against the
file's size constants before any worker or GPU check, recorded with the run, and kept by a resumed run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT
from typer.testing import CliRunner

from kernelopt.cli.common import parse_sizes
from kernelopt.cli.main import app
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.pipeline.run_context import resumed_sizes
from kernelopt.search.termination import Budget
from kernelopt.store import Store

SOFTMAX = ROOT / "examples" / "kernels" / "softmax_naive.py"
ROW_L2 = EXAMPLES / "level1" / "10_row_l2_normalize.py"
LIGHT = GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=4, kernel_distributions=("neg",))


def test_sizes_are_python_literals_by_name() -> None:
    assert parse_sizes(None) is None and parse_sizes([]) is None
    assert parse_sizes(["batch_size=4096", " dim = 1023 ", "eps=1e-5", "shape=(2, 3)"]) == {
        "batch_size": 4096,
        "dim": 1023,
        "eps": 1e-5,
        "shape": (2, 3),
    }
    for bad, says in [("4096", "expected NAME=VALUE"), ("2x=3", "expected NAME=VALUE"), ("n=abc", "'abc' is not a number")]:
        with pytest.raises(KerneloptError, match=says):
            parse_sizes([bad])


@pytest.mark.parametrize("command", ["analyze", "optimize"])
@pytest.mark.parametrize("path", [ROW_L2, SOFTMAX], ids=["problem", "kernel-file"])
def test_a_size_the_file_does_not_have_is_one_line_naming_the_ones_it_has(command: str, path: Path) -> None:
    result = CliRunner().invoke(app, [command, str(path), "--size", "nosuch=3"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot override nosuch" in lines[0], result.output
    assert "its size constants: " + ("batch_size, dim" if path == ROW_L2 else "ROWS, COLS") in lines[0]
    assert "GPU" not in lines[0]  # bad input is said before the GPU check


def test_analyze_of_a_kernel_file_runs_at_the_sizes_given(tmp_path: Path) -> None:
    from kernelopt.pipeline.analyze_kernel_file import analyze_kernel_file

    store = Store(tmp_path / "k.db")
    found = analyze_kernel_file(SOFTMAX, store, trials=3, device="cpu", sizes={"ROWS": 3, "COLS": 40})
    assert found["inputs"] == [[3, 40]], found  # the one input, at the size given
    assert store.run(found["run_id"]).args["sizes"] == {"ROWS": 3, "COLS": 40}


def test_a_resumed_run_keeps_its_sizes_and_refuses_others(tmp_path: Path) -> None:
    from kernelopt.pipeline.optimize_file import optimize_file

    store = Store(tmp_path / "k.db")
    small = {"ROWS": 6, "COLS": 50}
    report = optimize_file(SOFTMAX, store, budget=Budget(max_evaluations=1), settings=LIGHT, sizes=small,
                           export_path=tmp_path / "s.kopt.py", device="cpu")  # fmt: skip
    assert store.run(report.run_id).args["sizes"] == small
    assert resumed_sizes(store, report.run_id, None) == small  # left out: the run's own
    assert resumed_sizes(store, report.run_id, dict(small)) == small
    with pytest.raises(KerneloptError, match=r"was started with --size COLS=50 --size ROWS=6: resume it with the same"):
        resumed_sizes(store, report.run_id, {"ROWS": 8, "COLS": 50})
    with pytest.raises(KerneloptError, match="resume it with the same sizes"):
        optimize_file(SOFTMAX, store, budget=Budget(max_evaluations=2), settings=LIGHT, sizes={"ROWS": 7},
                      resume_run=report.run_id, device="cpu")  # fmt: skip
    other = store.start_run("optimize", "p", "cpu", {}, {})
    assert resumed_sizes(store, other, None) is None  # a run from before sizes were recorded: the file's own
    with pytest.raises(KerneloptError, match="was started with no --size"):
        resumed_sizes(store, other, {"ROWS": 6})


# -- verify ----------------------------------------------------------------------------------------

SOFTMAX_WIDE = EXAMPLES / "level1" / "12_softmax_wide.py"


@pytest.mark.parametrize("path", [ROW_L2, SOFTMAX], ids=["problem", "kernel-file"])
def test_verify_refuses_a_size_the_file_does_not_have_before_reading_the_candidate(path: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no_candidate.py"  # were the candidate read first, the error would be about it
    args = ["verify", str(path), "--candidate", str(missing), "--size", "nosuch=3"]
    result = CliRunner().invoke(app, args + (["--kernel", "k"] if path == ROW_L2 else []))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot override nosuch" in lines[0] and "no_candidate" not in lines[0], result.output


def test_verify_of_a_problem_judges_and_exports_it_at_the_sizes_given(tmp_path: Path, monkeypatch) -> None:
    """The worker is asked for the sizes, and the export carries them: loading it rebuilds the model there."""
    import torch
    from test_backend import HONEST, KERNEL

    from kernelopt.api import verify as api_verify
    from kernelopt.capture.swap import KernelAddress
    from kernelopt.deliver.export import read_export
    from kernelopt.verify.verdict import Verdict

    asked = []

    def judged(request, timeout_s):
        asked.append(request)
        gates = [Verdict(g, True, "fine").to_dict() for g in ("static", "correctness", "model", "performance")]
        return {"passed": True, "verdicts": gates, "address": KernelAddress(0, KERNEL.name, KERNEL.sha256).to_dict()}

    monkeypatch.setattr(api_verify, "verify_candidate", judged)
    monkeypatch.setattr(api_verify, "peak_bandwidth", lambda store: 4000.0)
    monkeypatch.setattr(api_verify, "device_label", lambda: "test GPU")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the worker, the one GPU user, is stood in for
    candidate = tmp_path / "mine.py"
    candidate.write_text(HONEST)
    sizes = {"batch_size": 6, "dim": 96}
    store = Store(tmp_path / "k.db")
    report = api_verify.verify(SOFTMAX_WIDE, KERNEL.name, candidate, store, tmp_path / "m.kopt.json", sizes=sizes)
    assert report.passed and report.sizes == sizes and asked[0].overrides == sizes
    assert store.run(report.run_id or 0).args["sizes"] == sizes
    doc = read_export(report.exported or "")
    assert doc["problem"]["overrides"] == sizes and doc["verification"]["sizes"] == sizes


def test_an_export_made_at_other_sizes_is_loaded_at_them(tmp_path: Path) -> None:
    import kernelopt
    from kernelopt.deliver.export import export_model
    from kernelopt.problem import load_problem

    problem = load_problem(SOFTMAX_WIDE).with_sizes(batch_size=6, dim=96)
    path = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True})
    loaded = kernelopt.load(path, device="cpu")
    assert loaded.problem is not None and loaded.problem.overrides == {"batch_size": 6, "dim": 96}
    assert list(loaded.example_inputs[0].shape) == [6, 96]  # not the file's 4096 x 65536


def test_a_tuple_size_resumes_as_the_tuple_it_was(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run("optimize", "p", "cpu", {}, {"sizes": {"kernel_size": (3, 5), "batch_size": 4}})
    assert store.run(run).args["sizes"]["kernel_size"] == [3, 5]  # JSON keeps no tuples
    assert resumed_sizes(store, run, None) == {"kernel_size": (3, 5), "batch_size": 4}  # rewritten as given
    assert resumed_sizes(store, run, {"kernel_size": (3, 5), "batch_size": 4}) == {"kernel_size": (3, 5), "batch_size": 4}
