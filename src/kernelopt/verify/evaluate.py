"""One evaluation: a candidate kernel through the four gates, inside a worker process.

:func:`evaluate` is the worker's target (``kernelopt.verify.evaluate:evaluate``):
it rebuilds the problem, captures the compiled model, and runs the gates in
order, stopping at the first that fails. It prints a stage marker before each
gate so that when the process dies (illegal memory access, hang, out of memory)
the parent can say which gate it died in. :func:`verify_candidate` is the
parent side: it runs the worker with a timeout and turns any ending into
verdicts.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STAGE_MARK = "kernelopt-stage:"


@dataclass
class EvaluationRequest:
    problem_path: str
    kernel: str
    candidate_source: str
    graph: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    peak_gbps: float | None = None
    kernel_seeds: tuple[int, ...] = (1, 2, 3)
    model_seeds: tuple[int, ...] = (0, 1, 2)
    trials: int = 50
    margin: float = 0.03
    max_error_ratio: float = 10.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stage(name: str) -> None:
    print(f"{STAGE_MARK} {name}", flush=True)


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """Run the gates for one candidate; returns plain data (verdicts, timings, identity)."""
    import torch

    from kernelopt.capture import capture
    from kernelopt.capture.swap import SwapError, build_kernel, check_swaps_live, find_kernel, reapply, restore, swap_kernel
    from kernelopt.capture.snapshot import snapshot_launches
    from kernelopt.measure import compare, measure_copy_bandwidth
    from kernelopt.problem import load_problem
    from kernelopt.verify.model_gate import ModelGatePolicy
    from kernelopt.verify.model_level import run_model_gate
    from kernelopt.verify.perf_runner import run_performance_gate
    from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end
    from kernelopt.verify.static import check_static
    from kernelopt.verify.subkernel import run_subkernel_gate
    from kernelopt.verify.verdict import Verdict

    req = EvaluationRequest(**request)
    device = torch.device("cuda")
    result: dict[str, Any] = {"verdicts": [], "passed": False}

    def finish(verdict: Verdict) -> dict[str, Any]:
        result["verdicts"].append(verdict.to_dict())
        return result

    _stage("capture")
    problem = load_problem(req.problem_path, overrides=req.overrides)
    model = problem.build_model(req.seed, device)
    inputs = problem.make_inputs(req.seed, device)
    artifact = capture(model, inputs, req.options)
    address, var, kernel = find_kernel(artifact, req.kernel, req.graph)
    result["address"] = address.to_dict()
    result["original_source"] = kernel.source

    _stage("static")
    static = check_static(req.candidate_source, kernel_name=kernel.name, original_source=kernel.source)
    result["verdicts"].append(static.to_dict())
    if not static.passed:
        return result

    _stage("correctness")
    snapshots = [s.args for s in snapshot_launches(artifact, inputs, address.graph, var)]
    original = vars(artifact.graphs[address.graph].module)[var]
    try:
        candidate = build_kernel(req.candidate_source, kernel.name)
    except SwapError as exc:
        return finish(Verdict("correctness", False, str(exc)))
    correctness = run_subkernel_gate(kernel, original, candidate, snapshots, req.kernel_seeds)
    result["verdicts"].append(correctness.to_dict())
    if not correctness.passed:
        return result

    _stage("model")
    swap = swap_kernel(artifact, address, req.candidate_source, kernel=candidate)
    try:
        check_swaps_live(artifact, [swap], inputs)

        def run_baseline(xs: Any) -> Any:
            restore(artifact, swap)
            return artifact(*xs)

        def run_candidate(xs: Any) -> Any:
            reapply(artifact, swap)
            return artifact(*xs)

        model_verdict = run_model_gate(
            problem, model, run_baseline, run_candidate, device, req.model_seeds, ModelGatePolicy(max_ratio=req.max_error_ratio)
        )
        result["verdicts"].append(model_verdict.to_dict())
        if not model_verdict.passed:
            return result

        _stage("performance")
        peak = req.peak_gbps or measure_copy_bandwidth().gbps
        result["peak_gbps"] = peak
        perf, kernel_cmp = run_performance_gate(
            kernel, original, candidate, snapshots[0], peak, PerformancePolicy(margin=req.margin), req.trials
        )
        result["kernel_comparison"] = kernel_cmp.to_dict()
        e2e = compare(
            lambda: artifact(*inputs),
            lambda: artifact(*inputs),
            trials=max(10, req.trials // 2),
            prepare_baseline=lambda: restore(artifact, swap),
            prepare_candidate=lambda: reapply(artifact, swap),
        )
        result["end_to_end"] = {**judge_end_to_end(e2e), "comparison": e2e.to_dict()}
        result["verdicts"].append(perf.to_dict())
        result["passed"] = perf.passed
        return result
    finally:
        restore(artifact, swap)


def _crash_stage(stderr_tail: str) -> str:
    """The last stage the worker announced before it ended ("capture" if none)."""
    marks = [line.split(STAGE_MARK, 1)[1].strip() for line in stderr_tail.splitlines() if STAGE_MARK in line]
    return marks[-1] if marks else "capture"


def verify_candidate(request: EvaluationRequest, timeout_s: float = 900.0, gpu: int | None = None) -> dict[str, Any]:
    """Run :func:`evaluate` in an isolated worker; a crash, hang or OOM becomes a failed verdict."""
    from kernelopt.verify.verdict import GATES, Verdict
    from kernelopt.workers import run_isolated

    src_root = str(Path(__file__).resolve().parents[2])
    outcome = run_isolated(
        "kernelopt.verify.evaluate:evaluate", request.to_dict(), timeout_s=timeout_s, gpu=gpu, extra_path=[src_root]
    )
    if outcome.ok:
        return dict(outcome.value)
    stage = _crash_stage(outcome.stderr_tail)
    # Capture failing is charged to correctness: the candidate never got a fair run.
    gate = stage if stage in GATES else "correctness"
    reason = f"the evaluation worker ended in the {stage} stage: {outcome.status}: {outcome.reason}"
    return {
        "verdicts": [Verdict(gate, False, reason, {"worker": outcome.to_dict(), "stage": stage}).to_dict()],
        "passed": False,
        "worker_status": outcome.status,
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run through kernelopt verify")
