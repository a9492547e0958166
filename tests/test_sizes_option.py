"""``--size NAME=VALUE`` for analyze and optimize, on problems and kernel files: parsed, checked against the
file's size constants before any worker or GPU check, recorded with the run, and kept by a resumed run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES, ROOT
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
