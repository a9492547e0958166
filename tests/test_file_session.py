"""The kernel-file judge on CPU tensors (Triton's interpreter): every gate, and the cheats each refuses.

Candidates run in their own worker process and the original is timed in a clean one, exactly as on
the GPU; only the device differs (``FileSpec.device="cpu"``; conftest sets ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from kernelopt.evaluate.file_session import FileSession, FileSpec
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.search.file_configs import apply_config

pytest.importorskip("triton")
SOFTMAX_PATH = ROOT / "examples" / "kernels" / "softmax_naive.py"
SOFTMAX = SOFTMAX_PATH.read_text()
IN_PLACE_PATH = FIXTURES / "kernel_files" / "add_in_place.py"
IN_PLACE = IN_PLACE_PATH.read_text()
SETTINGS = GateSettings(kernel_seeds=(0, 1), model_seeds=(0,), trials=5, kernel_distributions=("neg",), kernel_edges=())
STORE = "tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)"


@pytest.fixture(scope="module")
def softmax() -> Iterator[FileSession]:
    session = FileSession(FileSpec(str(SOFTMAX_PATH), {"ROWS": 6, "COLS": 50}, 0, "cpu"))
    yield session
    session.close()


@pytest.fixture(scope="module")
def in_place() -> Iterator[FileSession]:
    session = FileSession(FileSpec(str(IN_PLACE_PATH), {}, 0, "cpu"))
    yield session
    session.close()


def _gates(result: dict) -> list[tuple[str, bool]]:
    return [(v["gate"], v["passed"]) for v in result["verdicts"]]


def _failed(result: dict) -> dict:
    return next(v for v in result["verdicts"] if not v["passed"])


def test_the_facts_name_shapes_the_reference_and_no_roofline_without_a_gpu(softmax: FileSession) -> None:
    facts = softmax.facts()
    assert facts["inputs"] == [[6, 50]] and facts["outputs"] == [[6, 50]]
    assert facts["reference"] is True and facts["written_inputs"] == [] and facts["min_time_us"] is None


def test_a_retuned_launch_passes_the_first_three_gates_and_is_timed(softmax: FileSession) -> None:
    candidate = apply_config(SOFTMAX, {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 2}})
    result = softmax.evaluate(candidate, SETTINGS)
    assert _gates(result)[:3] == [("static", True), ("correctness", True), ("model", True)]
    assert result["verdicts"][3]["gate"] == "performance"
    assert result["kernel_comparison"]["candidate"]["median_ms"] > 0
    assert "4 cases" in result["verdicts"][1]["reason"]  # 2 seeds x (given, neg)


def test_wrong_outputs_fail_correctness_naming_the_output(softmax: FileSession) -> None:
    result = softmax.evaluate(SOFTMAX.replace(STORE, STORE.replace("num / tl.sum", "1.01 * num / tl.sum")), SETTINGS)
    failed = _failed(result)
    assert failed["gate"] == "correctness" and "output 0" in failed["reason"]


def test_a_precision_loss_within_the_tolerance_fails_against_the_float64_reference(softmax: FileSession) -> None:
    result = softmax.evaluate(SOFTMAX.replace(STORE, STORE.replace("num / tl.sum", "1.00003 * num / tl.sum")), SETTINGS)
    assert _gates(result)[:2] == [("static", True), ("correctness", True)]
    failed = _failed(result)
    assert failed["gate"] == "model" and "the compiled baseline's" in failed["reason"]


def test_writing_into_an_input_fails_correctness_as_input_mutation(softmax: FileSession) -> None:
    mutating = SOFTMAX.replace(STORE, STORE + "\n    tl.store(x_ptr + row * x_stride + cols, x, mask=mask)")
    failed = _failed(softmax.evaluate(mutating, SETTINGS))
    assert failed["gate"] == "correctness" and "input 0 was modified" in failed["reason"]


def test_returning_other_outputs_than_the_original_is_named(softmax: FileSession) -> None:
    failed = _failed(softmax.evaluate(SOFTMAX.replace("    return y\n", "    return y, y\n", 1), SETTINGS))
    assert failed["gate"] == "correctness" and "returned (6, 50) float32, (6, 50) float32" in failed["reason"]


def test_a_launch_that_raises_fails_correctness_with_the_exception(softmax: FileSession) -> None:
    raising = SOFTMAX.replace("BLOCK=triton.next_power_of_2(n_cols)", "BLOCK=triton.next_power_of_2(n_cols) + 1")
    failed = _failed(softmax.evaluate(raising, SETTINGS))
    assert failed["gate"] == "correctness" and "launch() raised" in failed["reason"]


def test_an_in_place_file_is_judged_on_the_input_it_writes(in_place: FileSession) -> None:
    assert in_place.facts()["written_inputs"] == [0] and in_place.facts()["outputs"] == []
    bigger = apply_config(IN_PLACE, {"launch:0:add_kernel": {"BLOCK": 512, "num_warps": 4, "num_stages": 3}})
    bigger = bigger.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel(), 512)")
    assert _gates(in_place.evaluate(bigger, SETTINGS))[:3] == [("static", True), ("correctness", True), ("model", True)]
    half = IN_PLACE.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel(), 512)")  # half the blocks
    failed = _failed(in_place.evaluate(half, SETTINGS))
    assert failed["gate"] == "correctness" and "input 0 (written in place)" in failed["reason"]


def test_a_softmax_without_its_max_subtraction_fails_only_on_the_edge_cases(softmax: FileSession) -> None:
    unsafe = SOFTMAX.replace("    x = x - tl.max(x, axis=0)\n", "")
    assert _gates(softmax.evaluate(unsafe, SETTINGS))[:2] == [("static", True), ("correctness", True)]
    edges = GateSettings(
        kernel_seeds=(0, 1), model_seeds=(0,), trials=5, kernel_distributions=("neg",), kernel_edges=("large",)
    )
    failed = _failed(softmax.evaluate(unsafe, edges))
    assert failed["gate"] == "correctness" and "seed 0, edge large" in failed["reason"]


def test_cases_beyond_the_cache_budget_are_built_again_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelopt.evaluate.file_cases as fs

    monkeypatch.setattr(fs, "CASE_CACHE_BYTES", 1)  # nothing but the given inputs fits
    session = FileSession(FileSpec(str(SOFTMAX_PATH), {"ROWS": 6, "COLS": 50}, 0, "cpu"))
    try:
        assert session.case(0, "given") is session.case(0, "given")
        neg = session.case(0, "neg")
        assert neg is not session.case(0, "neg") and (0, "neg") not in session.cases._cases
        candidate = apply_config(SOFTMAX, {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 2}})
        assert _gates(session.evaluate(candidate, SETTINGS))[:2] == [("static", True), ("correctness", True)]
    finally:
        session.close()


def test_the_candidate_files_process_imports_no_gate_and_the_judge_stays_in_its_own() -> None:
    import torch

    from kernelopt.evaluate.file_remote import FileRunner

    tests = Path(__file__).resolve().parent
    x = torch.randn(6, 50)
    runner = FileRunner(
        original_source=SOFTMAX, entry="launch", calibration_inputs=[x], device="cpu", extra_path=[tests]
    )
    try:
        runner.start()
        assert len(runner.calibration.overhead_ms) >= 10  # the original was timed before any candidate
        key, error, _ = runner.load(
            apply_config(SOFTMAX, {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 3}})
        )
        assert error is None
        out = torch.full((6, 50), float("nan"))
        assert runner.run_into(key, [x], [out])["error"] is None
        torch.testing.assert_close(out, torch.softmax(x, dim=-1))  # written into the judge's buffer
        modules = runner.worker.call("runner_backend:loaded_modules").value
        assert "kernelopt.evaluate.runner_file" in modules and not [
            m for m in modules if m.startswith("kernelopt.verify")
        ]
    finally:
        runner.close()
