"""The evaluation pipeline's CPU-side logic: crash attribution, worker failures, configs, export files."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import EXAMPLES, FIXTURES

from kernelopt.capture import parse_output_code
from kernelopt.capture.swap import KernelAddress
from kernelopt.deliver.export import Replacement, check_versions, export_model, read_export
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.one_candidate import STAGE_MARK, EvaluationRequest, crash_stage, verify_candidate
from kernelopt.problem import load_problem
from kernelopt.search.launch_configs import MAX_TILE_ELEMENTS, launch_config_space


def kernel_of(stem: str):
    code = parse_output_code((FIXTURES / "inductor" / f"{stem}.graph0.py").read_text())
    return next(k for k in code.kernels.values() if k.language == "triton")


def test_crash_is_attributed_to_the_last_stage_entered() -> None:
    log = f"noise\n{STAGE_MARK} capture\n{STAGE_MARK} static\n{STAGE_MARK} correctness\nCUDA error: illegal memory access"
    assert crash_stage(log) == "correctness"
    assert crash_stage(f"{STAGE_MARK} model\n{STAGE_MARK} performance\nKilled") == "performance"
    assert crash_stage("died before any stage") == "capture"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU failure path")
def test_worker_failure_becomes_a_failed_verdict_not_an_exception() -> None:
    request = EvaluationRequest(problem_path=str(EXAMPLES / "level1/15_rmsnorm.py"), kernel="k", candidate_source="")
    result = verify_candidate(request, timeout_s=120)
    assert result["passed"] is False
    (verdict,) = result["verdicts"]
    assert verdict["gate"] == "correctness" and not verdict["passed"]
    assert "capture stage" in verdict["reason"] and result["worker_status"] == "error"


def test_launch_config_space_by_kernel_kind() -> None:
    pointwise = list(launch_config_space(kernel_of("03_gemm_bias_gelu")))
    assert {tuple(sorted(c)) for c in pointwise} == {("XBLOCK", "num_stages", "num_warps")}
    assert {c["XBLOCK"] for c in pointwise} == {1 << i for i in range(13)}
    assert all(c["num_warps"] * 32 <= max(c["XBLOCK"], 32) * 4 for c in pointwise)
    persistent = list(launch_config_space(kernel_of("15_rmsnorm")))
    assert persistent and max(c["XBLOCK"] for c in persistent) == 512
    assert len({tuple(sorted(c.items())) for c in persistent}) == len(persistent)  # no duplicates


def test_looped_reduction_space_bounds_the_tile() -> None:
    from kernelopt.capture.output_code import KernelDef, KernelParam

    red = KernelDef("triton_red_x_0", "triton", "", (KernelParam("in_ptr0"), KernelParam("xnumel"),
                    KernelParam("XBLOCK", True), KernelParam("R0_BLOCK", True)), heuristic="reduction")
    space = list(launch_config_space(red))
    assert all(c["XBLOCK"] * c["R0_BLOCK"] <= MAX_TILE_ELEMENTS for c in space)
    assert {c["R0_BLOCK"] for c in space} == {1 << i for i in range(6, 15)}
    assert {c["num_stages"] for c in launch_config_space(red, include_stages=True)} == {1, 2, 3}


def test_looped_reduction_blocks_reach_the_whole_row() -> None:
    from kernelopt.capture.output_code import KernelDef, KernelParam, size_hints

    def looped(hints: str) -> KernelDef:
        source = f"@triton_heuristics.reduction(size_hints={hints}, reduction_hint=ReductionHint.INNER)\n@triton.jit\ndef k(): pass\n"
        return KernelDef("triton_red_x_0", "triton", source, (KernelParam("in_ptr0"), KernelParam("xnumel"),
                         KernelParam("XBLOCK", True), KernelParam("R0_BLOCK", True)), heuristic="reduction")

    wide = list(launch_config_space(looped("{'x': 4096, 'r0_': 65536}")))
    assert max(c["R0_BLOCK"] for c in wide) == 65536  # one iteration per pass: beyond Inductor's 16384
    assert {c["XBLOCK"] for c in wide if c["R0_BLOCK"] == 65536} == {1}  # the tile bound still holds
    narrow = list(launch_config_space(looped("{'x': 8, 'r0_': 512}")))
    assert {c["R0_BLOCK"] for c in narrow} == {64, 128, 256, 512}  # nothing wider than the row
    odd = list(launch_config_space(looped("{'x': 8, 'r0_': 3000}")))
    assert max(c["R0_BLOCK"] for c in odd) == 4096  # rounded up to a power of two
    assert size_hints(kernel_of("12_softmax_wide").source) == {"x": 8, "r0_": 512}  # a real capture's decorator
    assert size_hints("def k(): pass") == {}


def test_export_file_round_trip_and_version_refusal(tmp_path) -> None:
    problem = load_problem(EXAMPLES / "level1/15_rmsnorm.py").small()
    address = KernelAddress(0, "triton_per_x_0", "a" * 64)
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(address, "src")], {"passed": True}, seed=3)
    doc = read_export(path)
    assert doc["problem"]["overrides"] == problem.overrides and doc["problem"]["seed"] == 3
    assert Replacement.from_dict(doc["replacements"][0]) == Replacement(address, "src")
    check_versions(doc, path)  # same process: same versions
    doc["triton"] = "0.0.1"
    with pytest.raises(KerneloptError, match="verified with triton 0.0.1"):
        check_versions(doc, path)
    (tmp_path / "junk.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(KerneloptError, match="not a kernelopt artifact"):
        read_export(tmp_path / "junk.json")
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_an_export_edited_after_the_fact_is_refused(tmp_path) -> None:
    problem = load_problem(EXAMPLES / "level1/15_rmsnorm.py").small()
    address = KernelAddress(0, "triton_per_x_0", "a" * 64)
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(address, "src")], {"passed": True})
    doc = json.loads(path.read_text())
    for edit in (
        lambda d: d["replacements"][0].update(source="evil()"),
        lambda d: d["verification"].update(passed=True, note="trust me"),
        lambda d: d.pop("digest"),
    ):
        changed = json.loads(json.dumps(doc))
        edit(changed)
        (tmp_path / "edited.kopt.json").write_text(json.dumps(changed))
        with pytest.raises(KerneloptError, match="does not match its digest"):
            read_export(tmp_path / "edited.kopt.json")
    assert read_export(path)["digest"] == doc["digest"]  # the untouched file still reads
