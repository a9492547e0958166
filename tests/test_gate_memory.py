"""How many copies of a problem's tensors the gates hold at once (counted on the CPU).

On the H200, ``kernelopt verify`` on row-L2 (8.6 GB in, 8.6 GB out) ran out of 141 GB in gate 2:
the judge held about 14 tensors' worth at once there (``scripts/device/memory_by_stage.py``). The
bounds below are what each step needs by construction; a change that adds a copy fails here.
"""

from __future__ import annotations

import pytest
import torch
from memory_probe import peak_bytes

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.problem import edges, layouts
from kernelopt.problem.layouts import RotatingInputs
from kernelopt.verify import _chunks, subkernel
from kernelopt.verify.performance import Calibration

SOURCE = """
@triton_heuristics.pointwise(size_hints={'x': 64}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_double_0', 'mutated_arg_names': []})
@triton.jit
def triton_poi_double_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
"""
ROWS, COLS = 256, 4096  # 4 MiB per tensor: a gate's bounded temporaries (small blocks) stay under half
UNIT = ROWS * COLS * 4


def double(args) -> None:
    x, out, _ = args
    torch.mul(x, 2, out=out)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks far below the tensors' size, as they are for a gigabyte tensor on the GPU."""
    monkeypatch.setattr(subkernel, "launch", lambda kernel, args: kernel(args))
    monkeypatch.setattr(edges, "FILL_BLOCK_ELEMENTS", 1 << 14)
    monkeypatch.setattr(layouts, "BLOCK_ELEMENTS", 1 << 14)
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 14)


def test_gate_2_holds_one_case_and_its_runs_at_a_time() -> None:
    """Per case: its input (1), the original's output (1), the candidate's guarded input copy, shared
    by both its runs (1), and their two outputs (2); the write-only output is the snapshot's own."""
    kernel = triton_kernel_def("triton_poi_double_0", SOURCE)
    snapshot = [torch.randn(ROWS, COLS), torch.empty(ROWS, COLS), ROWS * COLS]
    peak, verdict = peak_bytes(  # the snapshot, a seeded case, two edge cases: one after another
        lambda: subkernel.run_subkernel_gate(kernel, double, double, [snapshot], (1,), ("given",), ("tiny", "large"))
    )
    assert verdict.passed and verdict.details["n_cases"] == 4
    assert peak <= 5.5 * UNIT, f"gate 2 held {peak / UNIT:.2f} tensors at once"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fresh_and_perturbed_values_cost_the_tensor_only(dtype: torch.dtype) -> None:
    base = torch.randn(ROWS, COLS).to(dtype)
    unit = base.untyped_storage().nbytes()
    peak, fresh = peak_bytes(lambda: layouts.random_like_layout(base, torch.Generator().manual_seed(0), 2.0))
    assert fresh.dtype == dtype and peak <= 1.2 * unit, f"{peak / unit:.2f} tensors for one"
    target = torch.empty_like(base)
    peak, _ = peak_bytes(lambda: layouts.perturbed_copy_(target, base))
    assert peak <= 0.2 * unit, f"perturbing in place made {peak / unit:.2f} tensors"
    changed = (target.float() != base.float()).float().mean().item()
    # float32 moves nearly every element; bfloat16's spacing (2^-8) swallows most 1e-3 steps
    assert changed > (0.5 if dtype == torch.float32 else 0.005)


def test_edge_values_cost_the_tensor_only() -> None:
    base = torch.randn(ROWS, COLS)
    generator = torch.Generator().manual_seed(0)
    for name in edges.EDGE_DISTRIBUTIONS:
        peak, _ = peak_bytes(lambda name=name: edges.edge_like_layout(base, name, generator))
        assert peak <= 1.2 * UNIT, f"edge {name}: {peak / UNIT:.2f} tensors for one"


def test_rotating_inputs_hold_their_sets_and_nothing_per_call() -> None:
    base = [torch.randn(ROWS, COLS), torch.empty(ROWS, COLS)]
    rotation = RotatingInputs(base, refresh=[0, 1], sets=2)
    peak, _ = peak_bytes(lambda: [rotation.prepare() for _ in range(4)])
    assert peak <= 0.2 * UNIT


def test_gate_3_holds_one_seed_and_one_pass_at_a_time() -> None:
    """Per seed: its inputs (1), then the float64 pass (inputs and output in float64: 2 + 2), then
    the baseline (a fresh input copy, its output and that output's clone: 3) beside the float64
    reference (2); the candidate's output (and clone) after that. No float64 zeros of the output's size."""
    from conftest import EXAMPLES

    from kernelopt.problem import load_problem
    from kernelopt.verify.model_level import ReferenceCache, run_model_gate

    problem = load_problem(EXAMPLES / "level1/10_row_l2_normalize.py", overrides={"batch_size": 256, "dim": 4096})
    model = problem.build_model(0, "cpu")
    unit = sum(t.untyped_storage().nbytes() for t in problem.make_inputs(0, "cpu"))
    def run(xs):
        return model(*xs)

    peak, verdict = peak_bytes(
        lambda: run_model_gate(problem, model, run, run, torch.device("cpu"), (0, 1), cache=ReferenceCache(max_bytes=0))
    )
    assert verdict.passed, verdict.reason
    assert peak <= 5.5 * unit, f"gate 3 held {peak / unit:.2f} input-sized tensors at once"


class _Runner:
    """Stands in for the candidate's and the reference's processes: the kernel runs here, on the lent sets."""

    calibration = Calibration((0.0,), (0.0,))

    def timed(self, name, key, args_of):
        def run() -> float:
            double(args_of())
            return 0.01

        return run

    def timed_original(self, name, args_of):
        return self.timed(name, "original", args_of)

    def release(self) -> None:
        pass


def test_gate_4_holds_its_two_sets_and_one_record_of_the_last_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two argument sets shared by both sides (4 tensors), the last timed call's inputs and outputs
    before it (2) and its outputs after it (1: the input it left unchanged is the copy from before),
    the original checked in place on that record; the screen keeps no record at all. A set above
    ROTATION_MAX_BYTES rotates alone (2 tensors fewer)."""
    from kernelopt.verify import perf_runner

    monkeypatch.setattr(perf_runner, "launch", lambda kernel, args: kernel(args))
    kernel = triton_kernel_def("triton_poi_double_0", SOURCE)
    args = [torch.randn(ROWS, COLS), torch.empty(ROWS, COLS), ROWS * COLS]
    runner = _Runner()
    peak, (verdict, _split) = peak_bytes(
        lambda: perf_runner.run_performance_gate(kernel, double, runner, "k", args, 1000.0, trials=4, reference=runner)
    )
    assert verdict.details.get("rule") != "timed_outputs", verdict.reason  # the timed outputs were checked, and right
    assert peak <= 7.5 * UNIT, f"gate 4 held {peak / UNIT:.2f} tensors at once"
    peak, _ = peak_bytes(lambda: perf_runner.screen(kernel, double, runner, "k", args, 4, reference=runner))
    assert peak <= 4.5 * UNIT, f"the screen held {peak / UNIT:.2f} tensors at once"
    monkeypatch.setattr(perf_runner, "ROTATION_MAX_BYTES", UNIT)  # this set (2 tensors) is now "large"
    assert perf_runner.rotating_sets(args) == 1
    peak, (verdict, _split) = peak_bytes(
        lambda: perf_runner.run_performance_gate(kernel, double, runner, "k", args, 1000.0, trials=4, reference=runner)
    )
    assert verdict.details.get("rule") != "timed_outputs", verdict.reason
    assert peak <= 5.5 * UNIT, f"gate 4 on one large set held {peak / UNIT:.2f} tensors at once"
