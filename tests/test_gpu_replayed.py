"""A launch-bound model judged as CUDA-graph replays on the H200: the recorded graph computes what the
forward computes on values it never saw while recording, a forward that records other work than it
runs is seen doing so, and the final verification of a small (launch-bound) model judges its result
as replays, the compiled model's replays timed against the re-stitched model's."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch
from adversarial import HONEST
from conftest import EXAMPLES

from kernelopt.capture.swap import find_kernel
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.records import FinalCheck
from kernelopt.evaluate.runner_model import RunnerModel
from kernelopt.evaluate.session import ProblemSpec
from kernelopt.pipeline.evaluator import SESSION
from kernelopt.workers.persistent import PersistentWorker

pytestmark = pytest.mark.gpu

RMSNORM = EXAMPLES / "level1/15_rmsnorm.py"
TINY = {"batch_size": 2, "seq_len": 8, "hidden": 128}  # a few microseconds of kernel: launch-bound


def _spec() -> ProblemSpec:
    return ProblemSpec(str(RMSNORM), dict(TINY))


def _outputs_like(model: RunnerModel) -> list[torch.Tensor]:
    with torch.no_grad():
        return [torch.full_like(o, float("nan")) for o in [model.artifact(*model.inputs)]]


def test_the_recorded_graph_computes_the_forward_on_values_it_never_saw() -> None:
    model = RunnerModel(asdict(_spec()), torch.device("cuda"))
    kept = [x.clone() for x in model.inputs]
    fresh = model.problem.make_inputs(7, "cuda")
    outputs = _outputs_like(model)
    layouts = model.run_recorded(fresh, outputs)["outputs"]
    with torch.no_grad():
        expected = model.artifact(*fresh)
    assert layouts == [{"shape": list(expected.shape), "dtype": "float32"}]
    torch.testing.assert_close(outputs[0], expected, rtol=0, atol=0)
    assert all(torch.equal(a, b) for a, b in zip(model.inputs, kept))  # the recorded inputs got their values back


def test_a_forward_that_records_other_work_than_it_runs_is_seen_in_the_replay() -> None:
    """The cheat the replayed gate 3 exists for: right when called, idle when recorded."""
    model = RunnerModel(asdict(_spec()), torch.device("cuda"))
    honest = model.artifact

    def cheat(*xs):
        out = honest(*xs)
        return torch.zeros_like(out) if torch.cuda.is_current_stream_capturing() else out

    model.artifact = cheat  # type: ignore[assignment]
    fresh = model.problem.make_inputs(3, "cuda")
    outputs = _outputs_like(model)
    with torch.no_grad():
        called = cheat(*fresh)
    model.run_recorded(fresh, outputs)
    assert called.abs().sum() > 0 and torch.count_nonzero(outputs[0]) == 0


def test_the_final_verification_judges_a_launch_bound_result_as_replays() -> None:
    spec = _spec()
    probe = RunnerModel(asdict(spec), torch.device("cuda"))
    kernel = next(k for _, k in probe.artifact.kernels() if k.language == "triton")
    address, _, _ = find_kernel(probe.artifact, kernel.name)
    del probe
    settings = GateSettings(kernel_seeds=(1,), model_seeds=(0, 1), trials=20, memcheck=False, cuda_graphs=True)
    replacement = {"address": address.to_dict(), "source": HONEST["rsqrt_rewrite"](kernel.source)}
    with PersistentWorker() as worker:  # the judge lives in a worker, as optimize runs it (CUDA IPC between users)
        outcome = worker.call(f"{SESSION}:verify_together", asdict(spec), [replacement], settings.to_dict(), None,
                              timeout_s=300)  # fmt: skip
    assert outcome.ok, outcome.reason
    check = FinalCheck.from_dict(outcome.value)
    print("replayed", check.graphs_gain and check.graphs_gain["summary"], check.replayed and check.replayed["summary"],
          check.replayed_reason, check.end_to_end and check.end_to_end["summary"])  # fmt: skip
    assert check.model.passed and check.evidence is None, check.reason
    assert check.graphs_gain is not None and check.graphs_gain["speedup"] > 1.0  # launches are most of its time
    assert check.replayed is not None and check.replayed_reason is None
    assert check.deciding is check.replayed
    base, cand = (check.replayed["comparison"][side]["median_ms"] for side in ("baseline", "candidate"))
    plain = check.end_to_end["comparison"]["baseline"]["median_ms"]
    assert 0 < base < plain and 0 < cand < plain  # replays skip the launch overhead the forward pays
