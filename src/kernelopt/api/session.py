"""Worker-side entry points of ``optimize``: they run in a persistent evaluation worker.

The worker keeps one :class:`~kernelopt.verify.session.EvaluationSession` per
problem (model captured once), so analysis, every candidate evaluation and the
final end-to-end check of a run share one capture. Only plain data crosses the
process boundary.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from kernelopt.api.analyze import analyze_artifact
from kernelopt.api.environment import device_label, versions
from kernelopt.capture.swap import KernelAddress, check_swaps_live, reapply, restore, swap_kernel
from kernelopt.measure import compare
from kernelopt.verify.model_gate import ModelGatePolicy
from kernelopt.verify.model_level import run_model_gate
from kernelopt.verify.performance import judge_end_to_end
from kernelopt.verify.session import EvaluationSession, GateSettings, ProblemSpec, stage

_SESSIONS: dict[tuple, EvaluationSession] = {}


def _session(spec: dict[str, Any], peak_gbps: float | None) -> EvaluationSession:
    problem_spec = ProblemSpec(**spec)
    key = problem_spec.key()
    if key not in _SESSIONS:
        for old in _SESSIONS.values():
            old.close()
        _SESSIONS.clear()  # one live capture per worker: Dynamo's caches are per process
        _SESSIONS[key] = EvaluationSession(problem_spec, peak_gbps)
    return _SESSIONS[key]


def analyze_problem(spec: dict[str, Any], peak_gbps: float | None, trials: int = 30) -> dict[str, Any]:
    """Eager vs compiled timing, per-launch attribution and roofline, plus per-kernel facts."""
    s = _session(spec, peak_gbps)
    stage("analyze")
    report = analyze_artifact(s.problem.name, device_label(), s.peak_gbps, s.model, s.inputs, s.artifact, trials)
    report.versions = versions()
    out = report.to_dict()
    out["kernels"] = {
        k.name: {"source": k.source, "heuristic": k.heuristic, "graph": gi} for gi, k in s.artifact.kernels() if k.language == "triton"
    }
    out["configs"] = {l.name: l.config for l in s.artifact.launches if l.kind == "triton"}
    return out


def evaluate_candidates(
    spec: dict[str, Any], kernel: str, sources: Sequence[str], settings: dict[str, Any], peak_gbps: float | None
) -> list[dict[str, Any]]:
    """The four gates for a batch of candidates of one kernel (compiled concurrently)."""
    s = _session(spec, peak_gbps)
    return s.evaluate_batch(kernel, list(sources), GateSettings(**settings))


def kernel_facts(spec: dict[str, Any], kernel: str, peak_gbps: float | None) -> dict[str, Any]:
    return _session(spec, peak_gbps).kernel_facts(kernel)


def inductor_tuned_config(spec: dict[str, Any], kernel: str, peak_gbps: float | None) -> dict[str, Any] | None:
    """Inductor's coordinate-descent choice for ``kernel`` (None where it would not tune it)."""
    stage("inductor coordinate descent")
    return _session(spec, peak_gbps).inductor_tuned_config(kernel)


def verify_together(
    spec: dict[str, Any], replacements: Sequence[dict[str, Any]], settings: dict[str, Any], peak_gbps: float | None
) -> dict[str, Any]:
    """All winning kernels swapped in at once: model gate again, and the end-to-end speedup."""
    s = _session(spec, peak_gbps)
    gates = GateSettings(**settings)
    stage("final")
    swaps = [swap_kernel(s.artifact, KernelAddress.from_dict(r["address"]), r["source"]) for r in replacements]
    try:
        check_swaps_live(s.artifact, swaps, s.inputs)

        def set_all(on: bool) -> None:
            for sw in swaps:
                (reapply if on else restore)(s.artifact, sw)

        def run_baseline(xs: Sequence[Any]) -> Any:
            set_all(False)
            return s.artifact(*xs)

        def run_candidate(xs: Sequence[Any]) -> Any:
            set_all(True)
            return s.artifact(*xs)

        verdict = run_model_gate(
            s.problem, s.model, run_baseline, run_candidate, s.device, gates.model_seeds, ModelGatePolicy(max_ratio=gates.max_error_ratio)
        )
        out: dict[str, Any] = {"model": verdict.to_dict()}
        if verdict.passed:

            def eager() -> Any:
                with torch.no_grad():
                    return s.model(*s.inputs)

            e2e = compare(lambda: s.artifact(*s.inputs), lambda: s.artifact(*s.inputs), trials=gates.trials,
                          prepare_baseline=lambda: set_all(False), prepare_candidate=lambda: set_all(True))
            set_all(True)
            vs_eager = compare(eager, lambda: s.artifact(*s.inputs), trials=max(10, gates.trials // 2))
            out["end_to_end"] = {**judge_end_to_end(e2e), "comparison": e2e.to_dict()}
            out["vs_eager"] = vs_eager.to_dict()
        return out
    finally:
        for sw in swaps:
            restore(s.artifact, sw)


def evaluate_knobs(
    spec: dict[str, Any], options: dict[str, Any], settings: dict[str, Any], device: str = "cuda"
) -> dict[str, Any]:
    """A whole-model candidate (Inductor options) through the gates; run in a fresh worker each."""
    from kernelopt.verify.model_candidate import evaluate_options

    return evaluate_options(ProblemSpec(**spec), options, GateSettings(**settings), device=device)
