"""The torch.compile backend on the H200: a verified replacement runs inside the user's own torch.compile."""

from __future__ import annotations

import pytest
import torch
from adversarial import HONEST
from conftest import EXAMPLES

import kernelopt
from kernelopt.capture import capture
from kernelopt.capture.swap import find_kernel
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.problem import load_problem

pytestmark = pytest.mark.gpu

RMSNORM = EXAMPLES / "level1/15_rmsnorm.py"
SIZES = {"batch_size": 8, "seq_len": 512, "hidden": 1024}


def _exported(tmp_path):
    """RMSNorm's captured Triton kernel, rewritten honestly and exported: (problem, model, inputs, kernel, path)."""
    problem = load_problem(RMSNORM, overrides=SIZES)
    model, inputs = problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    kernel = next(k for _, k in artifact.kernels() if k.language == "triton")
    address, _, _ = find_kernel(artifact, kernel.name)
    source = HONEST["rsqrt_rewrite"](kernel.source)
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(address, source)], {"note": "test"})
    return problem, model, inputs, kernel, path


def test_a_replacement_runs_in_the_users_compile_and_a_new_shape_keeps_inductors(tmp_path) -> None:
    problem, model, inputs, kernel, path = _exported(tmp_path)
    with torch.no_grad():
        expected = model(*inputs)
        torch._dynamo.reset()
        tuned = kernelopt.backend(path)
        compiled = torch.compile(model, backend=tuned, dynamic=False)
        torch.testing.assert_close(compiled(*inputs), expected, rtol=1e-5, atol=1e-5)
        assert tuned.report.used == {kernel.name: 1} and tuned.say_unused() is None
        other = problem.with_sizes(seq_len=256).make_inputs(0, "cuda")
        torch.testing.assert_close(compiled(*other), model(*other), rtol=1e-5, atol=1e-5)
        assert tuned.report.used == {kernel.name: 1}  # the recompiled graph kept Inductor's kernel


def test_a_replacement_runs_under_cuda_graphs_when_the_user_asks_for_reduce_overhead(tmp_path) -> None:
    _, model, inputs, kernel, path = _exported(tmp_path)
    with torch.no_grad():
        expected = model(*inputs)
        torch._dynamo.reset()
        tuned = kernelopt.backend(path)
        compiled = torch.compile(model, backend=tuned, mode="reduce-overhead", dynamic=False)
        for _ in range(3):  # warm-up, then the recording, then a replay
            got = compiled(*inputs)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert tuned.report.used == {kernel.name: 1}
