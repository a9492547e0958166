"""Whole-model candidates (other Inductor options) through the gates, in one worker process.

The default-compiled model and the variant are captured side by side (the
variant's forward gets its own code object, hence its own Dynamo cache), so the
model gate compares both against float64 eager on the same seeds and the
performance gate times them interleaved, L2 flushed, on refreshed inputs; where the run judges a
launch-bound result as CUDA-graph replays and graphs pay for the default compile, as replays of
each compile recorded as a CUDA graph (options that only save launches gain nothing a CUDA-graph
mode would not give anyway). There is no candidate source: the static and sub-kernel gates pass by
construction (Inductor generated every kernel) and say so. In a search, a short interleaved run screens
the variant before the model gate and turns away only one slower than the default compile, as for a
graph candidate (:data:`~kernelopt.evaluate.graph_candidate.GRAPH_SCREEN_MIN_SPEEDUP`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.artifact import separate_code
from kernelopt.capture.rewrites import row_softmax_op
from kernelopt.evaluate.graph_candidate import GRAPH_SCREEN_MIN_SPEEDUP
from kernelopt.evaluate.records import naming_host_path
from kernelopt.evaluate.session import GateSettings, ProblemSpec, stage
from kernelopt.evaluate.steps import fell_back, screened_out
from kernelopt.measure import compare, op_hosts
from kernelopt.measure.graph_replay import GraphCaptureError, RecordedForward
from kernelopt.problem import load_problem
from kernelopt.problem.layouts import RotatingInputs
from kernelopt.verify.model_gate import ModelGatePolicy
from kernelopt.verify.model_level import run_model_gate
from kernelopt.verify.performance import PerformancePolicy, graphs_unpaid, judge_end_to_end, judge_performance
from kernelopt.verify.verdict import Verdict


def graphs_pay(forward: Callable[[], Any], device: torch.device, trials: int) -> tuple[bool, str | None]:
    """(whether the compiled ``forward``'s CUDA-graph replays beat its calls beyond noise, timed
    interleaved here; why not in one line where they do not). Inductor generated every kernel of a
    whole-model candidate, so both compiles are trusted code and may share this process."""
    try:
        recorded = RecordedForward(forward, device)
    except GraphCaptureError as exc:
        return False, str(exc)
    why = graphs_unpaid(compare(forward, recorded.replay, trials=max(10, trials // 2), include_host=True))
    return why is None, why


def evaluate_options(
    spec: ProblemSpec, options: dict[str, Any], settings: GateSettings, device: str | None = None
) -> dict[str, Any]:
    """The gates for one set of Inductor options against the default-compiled model.

    ``device`` defaults to CUDA; the CPU works too (Inductor's C++ backend), which is
    how the CPU tests exercise the side-by-side capture and the gates' wiring.
    """
    started = time.monotonic()
    target = torch.device(device or "cuda")
    stage("capture")
    problem = load_problem(spec.problem_path, overrides=spec.overrides or None, train=spec.train)
    model = problem.build_model(spec.seed, target)
    inputs = problem.make_inputs(spec.seed, target)
    baseline = capture(model, inputs, spec.options)
    counted = Counter(row_softmax_op.FALLBACKS)  # the capture runs the variant: kernelopt's own ops say so
    variant = capture(separate_code(model, "kernelopt_variant"), inputs, {**spec.options, **options}, reset=False)
    slow = fell_back(row_softmax_op.fallbacks_since(counted))
    result: dict[str, Any] = {"verdicts": [], "passed": False, "options": options}
    note = "whole-model candidate: Inductor generated every kernel"
    result["verdicts"].append(Verdict("static", True, f"{note}; no candidate source to read").to_dict())
    result["verdicts"].append(
        Verdict("correctness", True, f"{note}; the model gate compares the whole model").to_dict()
    )

    def done(verdict: Verdict) -> dict[str, Any]:
        result["verdicts"].append(verdict.to_dict())
        result["gpu_s"] = time.monotonic() - started
        return result

    if slow is not None:
        return done(slow)

    def timed(trials: int) -> Any:  # its input copies are freed on return: none are held through the model gate
        a = RotatingInputs(inputs, range(len(inputs)))
        b = a.fork()  # the same memory for both sides
        return compare(
            lambda: baseline(*a.current),
            lambda: variant(*b.current),
            trials=trials,
            prepare_baseline=a.prepare,
            prepare_candidate=b.prepare,
            include_host=True,
        )

    if settings.screen_trials > 0 and not settings.cuda_graphs:  # as a graph candidate's screen
        stage("screen")
        screened = timed(settings.screen_trials)
        result["screen"] = screened.to_dict()
        if screened.speedup < GRAPH_SCREEN_MIN_SPEEDUP:
            return done(screened_out(screened.speedup, settings.screen_trials, GRAPH_SCREEN_MIN_SPEEDUP))

    stage("model")
    model_verdict = run_model_gate(
        problem,
        model,
        lambda xs: baseline(*xs),
        lambda xs: variant(*xs),
        target,
        settings.model_seeds,
        ModelGatePolicy(max_ratio=settings.max_error_ratio),
    )
    if not model_verdict.passed:
        return done(model_verdict)
    result["verdicts"].append(model_verdict.to_dict())

    stage("performance")
    before = compat.recompile_count()
    replayed = False
    if settings.cuda_graphs:
        replayed, why = graphs_pay(lambda: baseline(*inputs), target, settings.trials)
        result["replayed_reason"] = why
    if replayed:  # both compiles as CUDA-graph replays, the way the CUDA-graph mode delivered runs them
        cmp = compare(
            RecordedForward(lambda: baseline(*inputs), target).replay,
            RecordedForward(lambda: variant(*inputs), target).replay,
            trials=settings.trials,
            include_host=True,
        )
    else:
        cmp = timed(settings.trials)
    if compat.recompile_count() != before:
        return done(Verdict("performance", False, "a compiled model recompiled while being timed; the timing is void"))
    result["kernel_comparison"] = cmp.to_dict()  # for a model candidate the "kernel" is the model
    # both compiles run here; only the variant calls kernelopt's own ops, so their host paths are its
    hosts = {"baseline": {}, "candidate": op_hosts.read()}
    result["end_to_end"] = {
        **judge_end_to_end(cmp), "comparison": cmp.to_dict(), "replayed": replayed, "op_hosts": hosts,
    }  # fmt: skip
    verdict = naming_host_path(judge_performance(cmp, None, PerformancePolicy(margin=settings.margin)), hosts)
    result["passed"] = verdict.passed
    return done(verdict)
