"""One graph candidate (a changed call sequence of one graph) through the gates, judged from outside.

A graph candidate changes which kernels run, so there is no single kernel to compare launch by
launch: gate 2 has nothing of its own to run, and the model gate judges the changed graph inside
the whole model against float64, on every model seed. Gate 1 reads the call and each kernel it
brings (:mod:`kernelopt.verify.static_graph`) before anything of it reaches a process; the
candidate's process builds and installs it (:mod:`kernelopt.evaluate.runner`) and proves it runs;
gate 4 times the whole re-stitched model there against the compiled one in the reference process,
interleaved, with the readings checked against the judge's clock (calibrated on the original
model's forward when no kernel calibrated that process). Where the run judges a launch-bound result
as CUDA-graph replays (``GateSettings.cuda_graphs``) and graphs pay for the compiled model, gate 3
also runs on the candidate's recorded graph and gate 4 times both models' replays: a call sequence
that only saves launches gains nothing a CUDA-graph mode would not give anyway.

In a search (``GateSettings.screen_trials`` > 0, no replays judged) a short interleaved run screens the
stitched-in candidate before gate 3, as a kernel's screen does, and turns away only one slower than the
compiled model: on the H200 ``split_reductions=False`` made the Frobenius norm over 1 GiB one program
(0.03x), and its model gate took 103 s of the 215 s the bench gave the whole problem.
"""

from __future__ import annotations

from typing import Any

from kernelopt.capture.graph_swap import GraphCandidate
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.records import naming_host_path
from kernelopt.evaluate.remote import RunnerDied
from kernelopt.evaluate.restitched import RestitchedModel
from kernelopt.evaluate.steps import Stages, fell_back, screened_out
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end, judge_performance
from kernelopt.verify.static_graph import check_static_graph
from kernelopt.verify.verdict import Verdict

GRAPH_SCREEN_MIN_SPEEDUP = 1.0
"""Below this in the screen a graph candidate is turned away: only a slower one. A graph candidate is rare
(one per option set) and costs a compile of its own; the kernel screen's stricter floor (half the margin)
could lose a real winner to a short run's noise for little saved."""

NO_SUBKERNEL = (
    "a changed call sequence has no single kernel to compare launch by launch: the model gate judges the whole graph"
)


def evaluate_graph(
    restitched: RestitchedModel, graph_source: str, candidate: GraphCandidate, settings: GateSettings
) -> dict[str, Any]:
    """The gates in order for ``candidate`` against the graph whose output code is ``graph_source``;
    stops at the first failure. The candidate's process is left with nothing installed."""
    runner = restitched.runner
    result: dict[str, Any] = {
        "verdicts": [],
        "passed": False,
        "graph": candidate.graph,
        "digest": candidate.digest(),
        "origin": candidate.origin,
    }
    stages = Stages(result)
    stages.enter("static")
    static = check_static_graph(candidate, original_source=graph_source)
    stages.lap("static")
    if not static.passed:
        return stages.done(static)
    result["verdicts"].append(static.to_dict())
    result["verdicts"].append(Verdict("correctness", True, NO_SUBKERNEL, {"level": "graph"}).to_dict())
    try:
        runner.calibrate_on_model()  # before anything of the candidate runs in that process
        stages.enter("model")
        key, error, seconds = runner.build_graph(candidate.to_dict())
        stages.lap("compile")
        result["build_s"] = round(seconds, 6)
        if error is not None:
            return stages.done(Verdict("model", False, error, {"rule": "build"}))
        try:
            installed = runner.set_swaps([], [key])
        except RunnerDied as exc:
            if exc.outcome.status != "error":
                raise
            return stages.done(
                Verdict(
                    "model", False, f"the call sequence cannot be stitched in: {exc.outcome.reason}", {"rule": "swap"}
                )
            )
        stages.lap("install")  # stitched in and run once: a kernelopt op's first call builds it here (nvcc)
        slow = fell_back(list(installed.get("fallbacks") or []))
        if slow is not None:  # correct but slow, and not what the rewrite asked the op for: name it, time nothing
            return stages.done(slow)
        if settings.screen_trials > 0 and not settings.cuda_graphs:  # replays judged: the plain run cannot say
            stages.enter("screen")
            screened = restitched.end_to_end(settings.screen_trials)
            stages.lap("screen")
            result["screen"] = screened.to_dict()
            if screened.comparison.speedup < GRAPH_SCREEN_MIN_SPEEDUP:
                return stages.done(
                    screened_out(screened.comparison.speedup, settings.screen_trials, GRAPH_SCREEN_MIN_SPEEDUP)
                )
            stages.enter("model")
        model_verdict = restitched.model_gate(settings.model_seeds, settings.max_error_ratio)
        replayed = False
        if model_verdict.passed and settings.cuda_graphs:
            replayed, why = restitched.graphs_pay(max(10, settings.trials // 2))
            result["replayed_reason"] = why
            if replayed:  # gate 3 again on what the recorded graph computes, replayed on each seed's inputs
                again = restitched.model_gate(settings.model_seeds, settings.max_error_ratio, recorded=True)
                if not again.passed:
                    model_verdict = Verdict("model", False, f"as CUDA-graph replays: {again.reason}", again.details)
        stages.lap("model")
        if not model_verdict.passed:
            return stages.done(model_verdict)
        result["verdicts"].append(model_verdict.to_dict())

        stages.enter("performance")
        e2e = restitched.end_to_end(max(10, settings.trials), recorded=replayed)
        stages.lap("performance")
        result["kernel_comparison"] = e2e.comparison.to_dict()  # for a graph candidate the "kernel" is the model
        result["end_to_end"] = {
            **judge_end_to_end(e2e.comparison),
            "comparison": e2e.to_dict(),
            "replayed": replayed,
            "host_ms": restitched.host_times(replayed),
            "op_hosts": restitched.op_hosts(replayed),
        }
        evidence = restitched.timing_evidence(e2e)
        verdict = naming_host_path(
            evidence or judge_performance(e2e.comparison, None, PerformancePolicy(margin=settings.margin)),
            result["end_to_end"]["op_hosts"],
        )
        result["passed"] = verdict.passed
        return stages.done(verdict)
    except RunnerDied as exc:
        runner.restart()
        return stages.died(exc)
    finally:
        if runner.worker.alive:
            try:
                runner.set_swaps([], [])
            except RunnerDied:
                runner.restart()
