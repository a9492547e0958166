"""A hand-written CUDA C++ kernel in a Triton kernel's slot, on the H200: the four gates, export and load."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLES

from kernelopt.capture import capture
from kernelopt.capture.swap import find_kernel
from kernelopt.deliver.export import Replacement, export_model, load
from kernelopt.evaluate.one_candidate import EvaluationRequest, verify_candidate
from kernelopt.problem import load_problem

pytestmark = pytest.mark.gpu

ROW_L2 = EXAMPLES / "level1/10_row_l2_normalize.py"
CU = EXAMPLES.parent / "cuda" / "10_row_l2_normalize.cu"
SIZES = {"batch_size": 4096}
NAME = "triton_red_fused_div_linalg_vector_norm_0"


def evaluate(source: str):
    req = EvaluationRequest(problem_path=str(ROW_L2), kernel=NAME, candidate_source=source, overrides=SIZES, trials=20)
    result = verify_candidate(req, timeout_s=600)
    return result, {v["gate"]: v for v in result["verdicts"]}


def test_the_cuda_replacement_passes_all_four_gates() -> None:
    result, verdicts = evaluate(CU.read_text())
    print({g: (v["passed"], v["reason"][:160]) for g, v in verdicts.items()}, result.get("timings"))
    for gate in ("static", "correctness", "model", "performance"):
        assert verdicts[gate]["passed"], result["verdicts"]
    assert result["kernel_comparison"]["speedup"] > 1.03


def test_a_cuda_kernel_that_skips_rows_fails_correctness() -> None:
    skipping = CU.read_text().replace("row += gridDim.x", "row += 2 * gridDim.x")  # half the rows never written
    result, verdicts = evaluate(skipping)
    assert verdicts["static"]["passed"] and not verdicts["correctness"]["passed"], result["verdicts"]


def test_the_cuda_replacement_exports_and_loads_again(tmp_path) -> None:
    problem = load_problem(ROW_L2, overrides=SIZES)
    model, inputs = problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    address, _, _ = find_kernel(artifact, NAME)
    path = export_model(tmp_path / "row_l2.kopt.json", problem, [Replacement(address, CU.read_text())], {"note": "test"})
    loaded = load(path)
    assert loaded.swaps and type(loaded.swaps[0].replacement).__name__ == "CudaLauncher"
    with torch.no_grad():
        torch.testing.assert_close(loaded(*inputs), model(*inputs), rtol=1e-5, atol=1e-6)
