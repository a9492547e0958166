"""The judge and the accused in two processes (issue 11): a candidate that patches anything in its own
process cannot change a verdict.

A real candidate process (a persistent worker running ``kernelopt.evaluate.runner``) on the CPU,
with kernels stood in by Python source that runs when it is built, as a Triton module's code would.
The judge's side is this test process: it owns the buffers, runs the original, compares and times.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.evaluate.remote import RemoteRunner, RunnerDied
from kernelopt.measure.timer import compare_split
from kernelopt.verify import subkernel
from kernelopt.verify.performance import Calibration, PerformancePolicy, judge_timing_evidence

TESTS = Path(__file__).resolve().parent
NAME = "triton_poi_double_0"
SOURCE = f"""
@triton_heuristics.pointwise(size_hints={{'x': 4096}}, filename=__file__,
    triton_meta={{'signature': {{'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}}}},
    inductor_meta={{'grid_type': 'Grid1D', 'kernel_name': '{NAME}', 'mutated_arg_names': []}})
@triton.jit
def {NAME}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + (x0), tl.load(in_ptr0 + (x0), None) * 2, None)
"""
ORIGINAL = f"""
def {NAME}(args):
    x, out, n = args
    out.copy_(x * 2)
"""
SLOW = f"""
import time
def {NAME}(args):
    x, out, n = args
    time.sleep(0.03)
    out.copy_(x * 2)
"""
# Patches what would be the judge's, were the judge in this process; then computes the wrong thing.
PATCHES_THE_JUDGE = f"""
import os
os.environ.pop("KERNELOPT_ROLE", None)
import kernelopt.verify.correctness as correctness
import kernelopt.verify.performance as performance
import kernelopt.verify.tolerance as tolerance
correctness.diff_tensor = lambda *a, **k: None
correctness.check_case = lambda *a, **k: None
performance.PerformancePolicy.margin = -1.0
tolerance.tolerance_for = lambda dtype: tolerance.Tolerance(1e30, 1e30)
def {NAME}(args):
    x, out, n = args
    out.copy_(x * 3)
"""
# Slow, but reports itself fast: patches its process's clock reading.
FORGES_ITS_CLOCK = SLOW + """
import kernelopt.measure.timer as timer
# far below any real copy: it claims to be fast, and that the device's lead took 50 ms of the call (the
# judge allows the lead its calibration saw, not what a candidate's process says)
timer.read_call = lambda fn, **kw: (fn(), timer.CallReading(0.0001, 50.0))[1]
"""


@pytest.fixture(scope="module")
def kernel():
    return triton_kernel_def(NAME, SOURCE)


@pytest.fixture(scope="module")
def remote():
    runner = RemoteRunner(device="cpu", backend="runner_backend:BACKEND", extra_path=[TESTS], timeout_s=60)
    snapshot = [torch.randn(4096), torch.empty(4096), 4096]
    runner.register_original(NAME, ORIGINAL, snapshot)
    yield runner
    runner.close()


def original_launch(args):
    x, out, _ = args
    out.copy_(x * 2)


def gate2(kernel, remote, source):
    key, error, _ = remote.build(NAME, source)
    assert error is None, error
    snapshot = [torch.randn(4096), torch.empty(4096), 4096]
    return subkernel.run_subkernel_gate(kernel, original_launch, remote.launcher(NAME, key), [snapshot], seeds=(1,))


def test_the_candidates_process_imports_no_gate(remote) -> None:
    modules = remote.worker.call("runner_backend:loaded_modules").value
    assert "kernelopt.evaluate.runner" in modules
    judged = [m for m in modules if m.startswith("kernelopt.verify")]
    assert judged == [], judged


def test_the_judges_modules_refuse_to_load_in_the_candidates_process(remote) -> None:
    outcome = remote.worker.call("kernelopt.verify.performance:judge_performance")
    assert not outcome.ok and "judge" in outcome.reason


def test_an_honest_candidate_passes_and_a_wrong_one_fails(kernel, remote) -> None:
    assert gate2(kernel, remote, ORIGINAL).passed
    wrong = gate2(kernel, remote, ORIGINAL.replace("x * 2", "x * 2 + 1e-3"))
    assert not wrong.passed and "out_ptr0" in wrong.reason


def test_a_candidate_that_patches_the_judge_in_its_process_still_fails(kernel, remote) -> None:
    verdict = gate2(kernel, remote, PATCHES_THE_JUDGE)
    assert not verdict.passed and "out_ptr0" in verdict.reason
    # and the patches took in that process (the attack ran), not here
    assert PerformancePolicy().margin == 0.03


def test_the_calibration_comes_from_the_original_before_any_candidate(remote) -> None:
    assert len(remote.calibration.overhead_ms) >= 10
    assert all(0 <= ms < 50 for ms in remote.calibration.overhead_ms)


def timing(kernel, remote, source, trials=8):
    key, error, _ = remote.build(NAME, source)
    assert error is None
    args = [torch.randn(4096), torch.empty(4096), 4096]
    split = compare_split(lambda: original_launch(args), remote.timed(NAME, key, lambda: args), trials=trials,
                          warmup=1, device="cpu")
    remote.release()
    return split


def test_a_candidate_that_forges_its_clock_is_caught_by_the_judges(kernel, remote) -> None:
    # A loaded CI core jitters a pipe round trip by milliseconds: 5 ms of slack still leaves the
    # forged candidate's 30 ms per call far outside what its readings explain.
    policy = PerformancePolicy(overhead_slack_ms=5.0)
    honest = timing(kernel, remote, SLOW)
    assert judge_timing_evidence(honest.comparison.candidate.samples_ms, honest.candidate_wall_ms,
                                 remote.calibration, policy) is None
    forged = timing(kernel, remote, FORGES_ITS_CLOCK)
    assert forged.comparison.speedup > 1.0  # its readings claim it is fast ...
    verdict = judge_timing_evidence(forged.comparison.candidate.samples_ms, forged.candidate_wall_ms,
                                    remote.calibration, policy)
    assert verdict is not None and not verdict.passed  # ... the judge's clock says otherwise
    assert verdict.details["rule"] == "timing_evidence" and "do not explain" in verdict.reason


def test_a_candidate_that_kills_its_process_costs_one_call_not_the_judge(kernel, remote) -> None:
    key, error, _ = remote.build(NAME, f"import os\ndef {NAME}(args):\n    os._exit(3)\n")
    with pytest.raises(RunnerDied, match="launch"):
        remote.launcher(NAME, key)([torch.randn(4), torch.empty(4), 4])
    remote.restart()
    assert gate2(kernel, remote, ORIGINAL).passed  # a fresh process, calibrated again
    assert len(remote.calibration.overhead_ms) >= 10


def test_timing_evidence_rules() -> None:
    calibration = Calibration((0.2,) * 12)
    assert judge_timing_evidence([1.0] * 5, [1.3] * 5, calibration) is None
    longer = judge_timing_evidence([1.0] * 5, [0.5] * 5, calibration)
    assert longer is not None and "longer than the whole call" in longer.reason
    shaved = judge_timing_evidence([0.1] * 5, [1.3] * 5, calibration, PerformancePolicy())
    assert shaved is not None and "allows 0.650 ms" in shaved.reason
    assert judge_timing_evidence([1.0], [1.2], Calibration()) is not None  # no calibration: nothing is believed


def test_the_devices_lead_is_allowed_once_not_multiplied_with_the_overhead() -> None:
    """Every timed call holds the device's lead (about 1 ms of spinning before its start mark) in the
    judge's wall time. Taken out of the calibration before the overhead is doubled, and allowed once: an
    honest reading passes, and a reading shaved by 1.5 ms is still refused. Counted as overhead (no leads
    given), the same calibration would have let the shaved one through."""
    overhead, leads = (1.2,) * 12, (1.0,) * 12  # 0.2 ms of pipe and process, 1.0 ms of lead
    calibration = Calibration(overhead, leads)
    assert judge_timing_evidence([1.0] * 5, [2.25] * 5, calibration) is None
    shaved = judge_timing_evidence([0.1] * 5, [2.75] * 5, calibration)
    assert shaved is not None and "allows 1.900 ms" in shaved.reason  # 2 x 0.2 + 1.25 x 1.0 + 0.25
    assert shaved.details["calibration_lead_ms"] == list(leads)
    no_leads = Calibration(overhead)  # the lead counted as overhead, doubled: 2.65 ms allowed
    assert judge_timing_evidence([0.1] * 5, [2.75] * 5, no_leads) is None


def test_a_calibration_has_one_lead_per_call_or_none() -> None:
    with pytest.raises(ValueError, match="one lead per call: 2 leads for 3 calls"):
        Calibration((0.2, 0.2, 0.2), (1.0, 1.0))
    assert not Calibration() and Calibration((0.2,))
    assert Calibration((0.2,) * 4).allowed_ms(PerformancePolicy()) == pytest.approx(0.65)


def test_the_calibration_keeps_each_calls_lead_beside_its_overhead(monkeypatch) -> None:
    """The runner's calibration reads each trusted call's reply: the wall time the reading leaves
    unexplained, and the lead the reply names (none named: no lead)."""
    from kernelopt.evaluate import remote as remote_module

    runner = remote_module.RemoteRunner.__new__(remote_module.RemoteRunner)
    runner.device = "cpu"
    replies = iter([{"ms": 0.5, "lead_ms": 1.0}] * 6 + [{"ms": 0.5}] * 6)
    monkeypatch.setattr(runner, "_raw", lambda call, *a, **k: None)
    runner._calibrate_on(lambda: next(replies))
    assert len(runner.calibration.overhead_ms) == remote_module.CALIBRATION_CALLS == 12
    assert runner.calibration.lead_ms == (1.0,) * 6 + (0.0,) * 6
    assert all(ms > -0.5 for ms in runner.calibration.overhead_ms)  # wall time less the reading


def test_a_kernel_is_identified_up_to_the_backend_hash_each_process_stamps() -> None:
    """The judge's address names the runner's kernel (and kernelopt.load's) though each process stamped
    its own Triton backend hash; an H200 export once failed to load in the process that wrote it."""
    from kernelopt.capture.output_code import source_hash

    judge = triton_kernel_def(NAME, SOURCE.replace("'mutated_arg_names': []", "'mutated_arg_names': [], 'backend_hash': 'AAAA'"))
    mine = triton_kernel_def(NAME, judge.source.replace("'AAAA'", "'BBBB'"))
    assert mine.source != judge.source and mine.sha256 == judge.sha256 and mine.identified_by(judge.sha256)
    assert mine.identified_by(source_hash(mine.source))  # an address written before, as the full text's hash
    other = triton_kernel_def(NAME, judge.source.replace("* 2", "* 3"))
    assert not other.identified_by(judge.sha256)
    assert not mine.identified_by(source_hash(judge.source))  # the full text is exact: only the identity forgives


def test_a_candidate_that_stops_working_once_timed_fails_on_its_timed_outputs(kernel, remote, monkeypatch) -> None:
    from kernelopt.verify import perf_runner

    monkeypatch.setattr(perf_runner, "launch", lambda k, args: k(args))
    stale = f"""
calls = [0]
def {NAME}(args):
    x, out, n = args
    calls[0] += 1
    if calls[0] <= 2:  # right while gate 2 looks, then leaves whatever the buffer holds
        out.copy_(x * 2)
"""
    key, error, _ = remote.build(NAME, stale)
    assert error is None
    args = [torch.randn(4096), torch.empty(4096), 4096]
    verdict, _ = perf_runner.run_performance_gate(kernel, original_launch, remote, key, args, peak_gbps=1e9, trials=4)
    assert not verdict.passed and verdict.details["rule"] == "timed_outputs"
    assert "out_ptr0" in verdict.reason
    honest_key, _, _ = remote.build(NAME, ORIGINAL)
    honest, _ = perf_runner.run_performance_gate(kernel, original_launch, remote, honest_key, args, peak_gbps=1e9,
                                                  trials=4)
    assert honest.details.get("rule") != "timed_outputs", honest.reason


def test_lent_tensors_keep_their_layout_and_empty_ones_travel_too() -> None:
    import pickle

    from kernelopt.evaluate.shared_tensors import open_args, share_args

    base = torch.zeros(4, 6)
    view = base[:, 1:5]
    empty = torch.empty(0, 3)
    shared = pickle.loads(pickle.dumps(share_args([view, empty, 7])))
    opened = open_args(shared)
    assert opened[0].shape == view.shape and opened[0].stride() == view.stride()
    assert opened[1].shape == (0, 3) and opened[2] == 7
    opened[0].fill_(5.0)  # writes land in the lender's memory
    assert base[:, 1:5].eq(5.0).all() and base[:, 0].eq(0).all()


def test_a_failed_build_still_counts_as_code_run_in_the_process() -> None:
    runner = RemoteRunner(device="cpu", backend="runner_backend:BACKEND", extra_path=[TESTS], timeout_s=60)
    try:
        runner.register_original(NAME, ORIGINAL, [torch.randn(16), torch.empty(16), 16])
        first = runner.worker.starts
        _, error, _ = runner.build(NAME, "import os\nraise RuntimeError('after patching whatever it liked')\n")
        assert error is not None and runner.built  # its module code ran before it failed
        runner.register_original("other", ORIGINAL.replace(NAME, "other"), [torch.randn(16), torch.empty(16), 16])
        assert runner.worker.starts == first + 1  # a fresh process calibrates for the next kernel
        assert len(runner.calibration.overhead_ms) >= 10
    finally:
        runner.close()


def test_the_reference_process_times_the_original_and_refuses_candidates(kernel, remote, monkeypatch) -> None:
    from kernelopt.evaluate.remote import ReferenceRunner
    from kernelopt.verify import perf_runner

    monkeypatch.setattr(perf_runner, "launch", lambda k, args: k(args))
    reference = ReferenceRunner(device="cpu", backend="runner_backend:BACKEND", extra_path=[TESTS], timeout_s=60)
    try:
        args = [torch.randn(4096), torch.empty(4096), 4096]
        reference.register_original(NAME, ORIGINAL, [args[0], torch.empty(4096), 4096])
        slow_key, _, _ = remote.build(NAME, SLOW)
        local: list[int] = []

        def original_here(a):  # the judge runs the original only to check the last timed call's outputs
            local.append(1)
            original_launch(a)

        verdict, split = perf_runner.run_performance_gate(
            kernel, original_here, remote, slow_key, args, peak_gbps=1e9, trials=4, reference=reference
        )
        assert local == [1]
        assert not verdict.passed and split.comparison.speedup < 0.5  # 30 ms of sleep against a copy
        assert min(split.comparison.candidate.samples_ms) > 25
        for refused in (lambda: reference.build(NAME, ORIGINAL), lambda: reference.launcher(NAME, "x"),
                        lambda: reference.set_swaps([]), lambda: reference.timed(NAME, slow_key, lambda: args)):
            with pytest.raises(RuntimeError, match="reference process"):
                refused()
    finally:
        reference.close()
