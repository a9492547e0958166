"""GPU test: the stock modes are timed interleaved against an export their worker cannot read where it
lies (a bench problem's private folder, root's home), through the copy lent to that worker; under a
CUDA-graph mode the plain export is timed against the graphed one in the same process (the run mode's evidence)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu


def test_a_mode_is_timed_against_an_export_in_a_folder_only_root_enters() -> None:
    from kernelopt.deliver.export import export_model
    from kernelopt.pipeline.stock_modes import time_stock_modes
    from kernelopt.problem import load_problem
    from kernelopt.workers.identity import can_read, worker_identity

    path = EXAMPLES / "level1" / "10_row_l2_normalize.py"
    problem = load_problem(path, overrides={"batch_size": 1024})
    private = Path(tempfile.mkdtemp())  # mode 700
    try:
        export = export_model(private / "m.kopt.json", problem, [], {"passed": True})
        identity = worker_identity()
        print("workers run as", identity.user if identity else "this user", "; can read the export:",
              identity is None or can_read(export, identity))
        stock = time_stock_modes(str(path), ["default", "reduce-overhead"], str(export), overrides={"batch_size": 1024})
    finally:
        shutil.rmtree(private, ignore_errors=True)
    record = stock["default"]
    assert isinstance(record, dict), record
    assert "vs_optimized_error" not in record, record["vs_optimized_error"]
    assert record["vs_optimized"]["optimized"] == "kernelopt"  # timed against the export, in one process
    assert 0.9 < record["vs_optimized"]["speedup"] < 1.1  # the export replaces nothing: the default itself
    graphed = stock["reduce-overhead"]
    assert isinstance(graphed, dict) and "vs_plain_error" not in graphed, graphed
    assert graphed["vs_optimized"]["under"] == "reduce-overhead"  # the export ran under the mode's graphs
    print("reduce-overhead: the export under its graphs against the plain export, in one process:",
          graphed["vs_plain"]["speedup"])  # fmt: skip
    assert graphed["vs_plain"]["speedup"] > 0
