"""GPU tests of re-stitching and the four gates on real Inductor kernels (run on an H200)."""

from __future__ import annotations

import json

import pytest
import torch
from adversarial import CHEATS, GELU_CHEATS, HONEST
from conftest import EXAMPLES

from kernelopt.capture import capture
from kernelopt.capture.swap import KernelAddress, SwapError, check_swaps_live, find_kernel, restore, swap_kernel
from kernelopt.deliver.export import Replacement, export_model, load, seal
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.one_candidate import EvaluationRequest, verify_candidate
from kernelopt.problem import load_problem

pytestmark = pytest.mark.gpu

RMSNORM = EXAMPLES / "level1/15_rmsnorm.py"
RMS_SIZES = {"batch_size": 8, "seq_len": 512, "hidden": 1024}
GELU = EXAMPLES / "level2/03_gemm_bias_gelu.py"
GELU_SIZES = {"batch_size": 512, "in_features": 512, "out_features": 1024}


def captured(path, sizes):
    problem = load_problem(path, overrides=sizes)
    model = problem.build_model(0, "cuda")
    inputs = problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    (kernel,) = [k for _, k in artifact.kernels() if k.language == "triton"][:1]
    return problem, model, inputs, artifact, kernel


@pytest.fixture(scope="module")
def rms():
    return captured(RMSNORM, RMS_SIZES)


def test_swap_round_trip(rms) -> None:
    problem, model, inputs, artifact, kernel = rms
    expected = artifact(*inputs).clone()
    address, var, _ = find_kernel(artifact, kernel.name)
    wrong = CHEATS["bias_within_tolerance"][0](kernel.source).replace("* 1.00005", "* 2.0")
    swap = swap_kernel(artifact, address, wrong)
    check_swaps_live(artifact, [swap], inputs)
    torch.testing.assert_close(artifact(*inputs), expected * 2.0)
    restore(artifact, swap)
    torch.testing.assert_close(artifact(*inputs), expected, rtol=0, atol=0)
    with pytest.raises(SwapError, match="differs from the one"):
        swap_kernel(artifact, KernelAddress(address.graph, address.name, "0" * 64), kernel.source)
    with pytest.raises(SwapError, match="no generated kernel"):
        find_kernel(artifact, "triton_nope_0")
    swap = swap_kernel(artifact, address, kernel.source)
    other = problem.with_sizes(seq_len=256).make_inputs(0, "cuda")
    with pytest.raises(SwapError, match="recompiled|did not run"):
        check_swaps_live(artifact, [swap], other)  # new shapes recompile and drop the swap
    restore(artifact, swap)


def evaluate(path, sizes, kernel_name, source, **kw):
    req = EvaluationRequest(problem_path=str(path), kernel=kernel_name, candidate_source=source, overrides=sizes,
                            trials=20, **kw)
    result = verify_candidate(req, timeout_s=300)
    return result, {v["gate"]: v for v in result["verdicts"]}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_rejected_by_its_gate(name: str, rms) -> None:
    kernel = rms[4]
    transform, gate = CHEATS[name]
    try:
        candidate = transform(kernel.source)
    except ValueError as exc:  # e.g. no masked load to unmask in this kernel at these sizes
        pytest.skip(f"{name} does not apply to {kernel.name}: {exc}")
    result, verdicts = evaluate(RMSNORM, RMS_SIZES, kernel.name, candidate)
    assert not result["passed"]
    failed = [g for g, v in verdicts.items() if not v["passed"]]
    assert failed == [gate], result["verdicts"]
    assert result["verdicts"][-1]["gate"] == gate  # the gates stop at the first failure


def test_value_shortcut_rejected_on_gelu_epilogue() -> None:
    problem, model, inputs, artifact, kernel = captured(GELU, GELU_SIZES)
    transform, gate = GELU_CHEATS["value_shortcut"]
    result, verdicts = evaluate(GELU, GELU_SIZES, kernel.name, transform(kernel.source))
    assert not result["passed"] and not verdicts[gate]["passed"], result["verdicts"]


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidate_passes_correctness_gates(name: str, rms) -> None:
    kernel = rms[4]
    result, verdicts = evaluate(RMSNORM, RMS_SIZES, kernel.name, HONEST[name](kernel.source))
    for gate in ("static", "correctness", "model"):
        assert verdicts[gate]["passed"], result["verdicts"]
    assert "performance" in verdicts  # decided on measured speed: faster passes, not faster does not
    cmp = result["kernel_comparison"]
    assert cmp["baseline"]["l2_flushed"] and len(cmp["ratios"]) == 20
    if verdicts["performance"]["passed"]:
        assert cmp["speedup"] > 1.03
    if name == "verbatim":  # the same kernel is not faster than itself
        assert not verdicts["performance"]["passed"] and 0.9 < cmp["speedup"] < 1.1


def test_export_and_load_round_trip(rms, tmp_path) -> None:
    problem, model, inputs, artifact, kernel = rms
    address, _, _ = find_kernel(artifact, kernel.name)
    source = HONEST["rsqrt_rewrite"](kernel.source)
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(address, source)], {"note": "test"})
    loaded = load(path)
    assert loaded.swaps and loaded.swaps[0].source == source
    with torch.no_grad():
        torch.testing.assert_close(loaded(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)
    doc = json.loads(path.read_text())
    doc["torch"] = "1.0.0"
    bad = tmp_path / "old.kopt.json"
    bad.write_text(json.dumps(seal(doc)))
    with pytest.raises(KerneloptError, match="verified with torch 1.0.0"):
        load(bad)
    doc = json.loads(path.read_text())
    doc["replacements"][0]["sha256"] = "f" * 64
    stale = tmp_path / "stale.kopt.json"
    stale.write_text(json.dumps(seal(doc)))
    with pytest.raises(SwapError, match="differs from the one"):
        load(stale)


def test_large_blocks_on_the_gpu_give_the_small_blocks_answers() -> None:
    from kernelopt.verify._chunks import CHUNK_ELEMENTS, MAX_CHUNK_ELEMENTS, chunk_elements_for
    from kernelopt.verify.correctness import diff_tensor
    from kernelopt.verify.model_gate import relative_error

    expected = torch.randn(96, 65535, device="cuda")  # 6.3 M elements: several small blocks, one large
    actual = expected.clone()
    actual[70, 12345] += 0.25
    actual[90, :7] = float("nan")
    chunk = chunk_elements_for(expected)
    assert CHUNK_ELEMENTS < chunk <= MAX_CHUNK_ELEMENTS  # an H200 has the memory for larger blocks
    large, small = diff_tensor("out", expected, actual), diff_tensor("out", expected, actual, chunk_elements=CHUNK_ELEMENTS)
    assert large.reason == small.reason and large.mismatched == small.mismatched == 8
    assert "first at index (90, 0)" in large.reason
    ref = expected.double()
    actual[90, :7] = expected[90, :7]
    assert relative_error(actual, ref) == pytest.approx(relative_error(actual, ref, chunk_elements=CHUNK_ELEMENTS), rel=1e-9)
