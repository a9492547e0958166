"""Both sides of a timed A/B comparison run on the same memory, restored before every call.

On the H200 a kernel timed against itself on two separately allocated argument
sets measured 1-2 % faster on one of them, and a verbatim candidate once passed
gate 4: the sets must be shared, and what one call wrote must not reach the next.
"""

from __future__ import annotations

from collections import Counter

import torch

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.problem.layouts import RotatingInputs
from kernelopt.verify import perf_runner
from kernelopt.verify.performance import Calibration

NAME = "triton_poi_gather_0"
SOURCE = f"""
@triton_heuristics.pointwise(size_hints={{'x': 64}}, filename=__file__,
    triton_meta={{'signature': {{'in_ptr0': '*fp32', 'in_ptr1': '*i64', 'out_ptr0': '*fp32', 'xnumel': 'i32',
    'XBLOCK': 'constexpr'}}}},
    inductor_meta={{'grid_type': 'Grid1D', 'kernel_name': '{NAME}', 'mutated_arg_names': []}})
@triton.jit
def {NAME}(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    i = tl.load(in_ptr1 + (x0), None)
    tl.store(out_ptr0 + (x0), tl.load(in_ptr0 + (i), None), None)
"""


def test_a_fork_shares_the_sets_and_restores_what_a_call_overwrote() -> None:
    base = [torch.randn(64), torch.arange(64), torch.empty(64), 64]
    a = RotatingInputs(base, [0, 1], sets=2)
    b = a.fork()
    a.prepare()
    b.prepare()
    assert a.current is b.current  # the same set, not a copy of it
    a.current[1].fill_(0)  # a call scribbles over the index input
    a.current[0].fill_(1e9)
    b.sets[1][1].fill_(7)
    for _ in range(2):
        b.prepare()
        assert torch.equal(b.current[1], base[1])  # integers restored exactly
        assert torch.allclose(b.current[0], base[0], rtol=1e-2)  # floats: fresh values near the real ones
        assert not torch.equal(b.current[0], base[0])


def test_stride_zero_integer_inputs_are_restored() -> None:
    index = torch.tensor([3]).expand(8)
    rotation = RotatingInputs([index], [0], sets=1)
    rotation.sets[0][0].as_strided((1,), (1,)).fill_(0)
    rotation.prepare()
    assert rotation.current[0].tolist() == [3] * 8


class _InProcessRunner:
    """Stands in for the candidate's process: records the memory each timed call ran on."""

    calibration = Calibration((0.0,), (0.0,))

    def __init__(self, seen: list[int]) -> None:
        self.seen = seen

    def timed(self, name, key, args_of):
        def run() -> float:
            args = args_of()
            self.seen.append(args[0].data_ptr())
            args[2].copy_(args[0][args[1]])
            return 0.01

        return run

    def release(self) -> None:
        pass


def test_the_original_and_the_candidate_are_timed_on_the_same_sets_equally_often() -> None:
    kernel = triton_kernel_def(NAME, SOURCE)
    args = [torch.randn(64), torch.randperm(64), torch.empty(64), 64]
    base_seen: list[int] = []
    cand_seen: list[int] = []

    def original(launch_args):
        base_seen.append(launch_args[0].data_ptr())
        launch_args[2].copy_(launch_args[0][launch_args[1]])

    _patch = perf_runner.launch
    perf_runner.launch = lambda k, a: k(a)
    try:
        split, before, after = perf_runner.time_kernels(kernel, original, _InProcessRunner(cand_seen), "k", args,
                                                        trials=8)
    finally:
        perf_runner.launch = _patch
    assert set(base_seen) == set(cand_seen) and len(set(base_seen)) == perf_runner.ROTATING_SETS
    assert Counter(base_seen) == Counter(cand_seen)  # each set as often on both sides
    assert all(p != args[0].data_ptr() for p in base_seen)  # never the judge's own snapshot
    assert torch.equal(after[2], before[0][before[1]])


class _Reference(_InProcessRunner):
    """Stands in for the reference process: times the original only."""

    def timed_original(self, name, args_of):
        return self.timed(name, "original", args_of)


def test_with_a_reference_process_the_original_is_timed_there_not_here() -> None:
    kernel = triton_kernel_def(NAME, SOURCE)
    args = [torch.randn(64), torch.randperm(64), torch.empty(64), 64]
    local: list[int] = []
    ref_seen: list[int] = []
    cand_seen: list[int] = []
    split, _, _ = perf_runner.time_kernels(
        kernel, lambda a: local.append(1), _InProcessRunner(cand_seen), "k", args, trials=6, reference=_Reference(ref_seen)
    )
    assert not local  # the judge launched nothing itself
    assert Counter(ref_seen) == Counter(cand_seen) and len(ref_seen) == perf_runner.WARMUP + 6
    assert split.comparison.baseline.samples_ms == (0.01,) * 6


def test_a_large_set_rotates_alone_and_a_timed_call_that_wrote_its_input_is_still_seen(monkeypatch) -> None:
    """One set above ROTATION_MAX_BYTES; and the record after the last timed call keeps a copy of a
    read-only input the candidate changed, so check_launch names the mutation."""
    kernel = triton_kernel_def(NAME, SOURCE)
    args = [torch.randn(64), torch.randperm(64), torch.empty(64), 64]
    assert perf_runner.rotating_sets(args) == perf_runner.ROTATING_SETS
    monkeypatch.setattr(perf_runner, "ROTATION_MAX_BYTES", 64)
    assert perf_runner.rotating_sets(args) == 1

    class Mutating(_InProcessRunner):
        def timed(self, name, key, args_of):
            def run() -> float:
                a = args_of()
                a[2].copy_(a[0][a[1]])
                a[0].add_(1.0)  # writes its read-only input
                return 0.01

            return run

    monkeypatch.setattr(perf_runner, "launch", lambda k, a: k(a))

    def original(a):
        a[2].copy_(a[0][a[1]])

    verdict, _ = perf_runner.run_performance_gate(kernel, original, Mutating([]), "k", args, 1000.0, trials=4)
    assert not verdict.passed and verdict.details["rule"] == "timed_outputs"
    assert "in_ptr0 was modified by the candidate" in verdict.reason
