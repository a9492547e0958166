"""GPU tests of capture and analyze on our own example problems (run on an H200)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import EXAMPLES

from kernelopt.api.analyze import analyze
from kernelopt.capture import capture
from kernelopt.problem import load_problem
from kernelopt.store import Store

pytestmark = pytest.mark.gpu

PROBLEMS = [
    "level1/12_softmax_wide.py",
    "level1/15_rmsnorm.py",
    "level2/03_gemm_bias_gelu.py",
    "level2/07_conv2d_bn_relu.py",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("store") / "k.db")


@pytest.mark.parametrize("rel", PROBLEMS)
def test_analyze_attribution_matches_compiled_time(rel: str, store: Store) -> None:
    problem = load_problem(EXAMPLES / rel)
    report = analyze(problem, store, trials=20)
    # Per-launch GPU times from the profiler add up to the separately timed compiled model.
    assert report.attributed_ms == pytest.approx(report.compiled_ms, rel=0.10), report.to_dict()
    assert report.unattributed_ms <= 0.05 * report.compiled_ms
    triton = [r for r in report.launches if r.kind == "triton"]
    assert triton, "every example problem has at least one generated Triton kernel"
    for row in triton:
        assert row.time_us > 0 and row.bytes_read + row.bytes_written > 0
        # Nothing beats the copy roofline by more than measurement noise.
        assert row.pct_of_peak < 115, row  # percent
    assert report.amdahl_bound >= 1.0
    assert store.run(report.run_id).status == "done"
    assert store.measurements(report.run_id)["analysis"]["problem"] == problem.name


@pytest.mark.parametrize("rel", PROBLEMS)
def test_runtime_launches_agree_with_generated_code(rel: str) -> None:
    problem = load_problem(EXAMPLES / rel).small()
    model = problem.build_model(0, "cuda")
    inputs = problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    static = Counter((s.kind, s.name) for g in artifact.graphs for s in g.output_code.launch_sites)
    runtime = Counter((ln.kind, ln.name) for ln in artifact.launches)
    assert runtime == static
    kernels = {k.name: k for _, k in artifact.kernels()}
    for launch in artifact.launches:
        if launch.kind == "triton":
            assert launch.kernel_sha256 == kernels[launch.name].sha256
            assert launch.config is not None and "num_warps" in launch.config
    gemm_like = any(ln.kind == "vendor" for ln in artifact.launches)
    assert gemm_like == ("gemm" in rel or "conv" in rel)
    with torch.no_grad():
        torch.testing.assert_close(artifact(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)


def test_inputs_are_generated_on_the_gpu_deterministically() -> None:
    problem = load_problem(EXAMPLES / "level1/15_rmsnorm.py").small()
    torch.manual_seed(7)
    cpu_state, gpu_state = torch.get_rng_state(), torch.cuda.get_rng_state()
    a, b = problem.make_inputs(3, "cuda"), problem.make_inputs(3, "cuda")
    assert a[0].is_cuda and torch.equal(a[0], b[0])  # the same seed, the same values, in any process
    assert not torch.equal(a[0], problem.make_inputs(4, "cuda")[0])
    # the caller's random state is untouched on both devices
    assert torch.equal(torch.get_rng_state(), cpu_state) and torch.equal(torch.cuda.get_rng_state(), gpu_state)
