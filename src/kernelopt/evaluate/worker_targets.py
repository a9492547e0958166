"""Worker-side entry points of ``optimize``: they run in a persistent evaluation worker.

The worker keeps one :class:`~kernelopt.evaluate.session.EvaluationSession` per
problem (model captured once), so analysis, every candidate evaluation and the
final end-to-end check of a run share one capture. Only plain data crosses the
process boundary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import torch

from kernelopt.capture.graph_swap import captured_shape
from kernelopt.config import default_of
from kernelopt.evaluate.analysis import analyze_artifact
from kernelopt.evaluate.records import FinalCheck, KernelInfo, ProblemAnalysis
from kernelopt.evaluate.remote import ReferenceRunner, RunnerDied
from kernelopt.evaluate.session import EvaluationSession, GateSettings, ProblemSpec, stage
from kernelopt.evaluate.steps import fell_back
from kernelopt.measure.environment import device_label, versions
from kernelopt.measure.timer import compare_split
from kernelopt.verify.performance import judge_end_to_end
from kernelopt.verify.verdict import Verdict

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


def analyze_problem(
    spec: dict[str, Any], peak_gbps: float | None, trials: int = default_of("analyze_trials")
) -> dict[str, Any]:
    """Eager vs compiled timing, per-launch attribution and roofline, plus per-kernel facts."""
    s = _session(spec, peak_gbps)
    stage("analyze")
    report = analyze_artifact(s.problem.name, device_label(), s.peak_gbps, s.model, s.inputs, s.artifact, trials)
    report.versions = versions()
    report.own_ops = s.own_ops_found()  # the graph stage runs where kernelopt's own kernels would take some
    return ProblemAnalysis(
        report,
        {k.name: KernelInfo(k.source, gi, k.heuristic) for gi, k in s.artifact.kernels() if k.language == "triton"},
        {launch.name: launch.config for launch in s.artifact.launches if launch.kind == "triton"},
    ).to_dict()


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


def _time_against_base(s: EvaluationSession, base_options: dict[str, Any], trials: int, check: FinalCheck) -> None:
    """The re-stitched model against the base mode's compile (``base_options`` alone), interleaved: the
    result over what the user had, measured as one comparison instead of a product of two runs' medians.
    The base compile runs in a reference process of its own, timed as the end-to-end baseline is."""
    base = ReferenceRunner(device=s.device.type, spec={**asdict(s.spec), "options": dict(base_options)})
    try:
        check.vs_base = compare_split(
            base.timed_model(), s.runner.timed_model(), trials=trials, baseline_remote=True
        ).comparison.to_dict()
    except RunnerDied as exc:  # the base mode's compile or its process failed: say so, keep the product
        check.vs_base_reason = f"the base mode's compile failed in its process during {exc.call}: {exc.one_line}"
    finally:
        base.close()


def _judge_replayed(s: EvaluationSession, gates: GateSettings, check: FinalCheck) -> None:
    """Where CUDA graphs pay for the compiled model (its own replays faster than its forward beyond
    noise, in the reference process), judge the re-stitched model as the CUDA-graph mode it will run
    under does: gate 3 again on what its recorded graph computes when replayed on each seed's inputs,
    then both models' replays timed interleaved. The replayed judgment then decides delivery
    (:attr:`FinalCheck.deciding`); where graphs do not pay, or the compiled model cannot be recorded,
    the reason is kept and the plain forward's judgment stands. Both processes drop their recorded
    graphs afterwards: each holds a copy of the forward's buffers."""
    try:
        _judge_recorded(s, gates, check)
    finally:
        for runner in (s.restitched.reference, s.runner):
            try:
                runner.drop_recorded()
            except RunnerDied:
                runner.restart()


def _judge_recorded(s: EvaluationSession, gates: GateSettings, check: FinalCheck) -> None:
    pays, why = s.restitched.graphs_pay(max(10, gates.trials // 2))
    gain = s.restitched.recorded_gain
    if gain is not None:
        check.graphs_gain = {**judge_end_to_end(gain.comparison), "comparison": gain.to_dict()}
    if not pays:
        check.replayed_reason = why
        return
    try:
        verdict = s.model_gate(gates.model_seeds, gates.max_error_ratio, recorded=True)
        if not verdict.passed:
            check.model = Verdict("model", False, f"as CUDA-graph replays: {verdict.reason}", verdict.details)
            return
        e2e = s.end_to_end(gates.trials, recorded=True)
    except RunnerDied as exc:  # the compiled model records, so the replacements are what broke it
        s.runner.restart()
        check.model = Verdict(
            "model", False, f"the re-stitched model fails as CUDA-graph replays: {exc.one_line}", {"rule": "cuda_graph"}
        )
        return
    evidence = s.restitched.timing_evidence(e2e)
    if evidence is not None:
        check.evidence = evidence
        return
    check.replayed = {**judge_end_to_end(e2e.comparison), "comparison": e2e.to_dict()}


def ncu_metrics(spec: dict[str, Any], kernel: str, timeout_s: float = 600.0) -> dict[str, Any]:
    """Nsight Compute's counters for one kernel of the problem's compiled model, with the reason in one line.

    Called in the evaluation worker, so ncu and the problem it starts
    (:mod:`kernelopt.evaluate.ncu_probe`: the user's model, compiled) run with the worker's environment
    and user, never kernelopt's (its API keys among them). The session is not touched: the probe is a
    process of its own."""
    import json
    import sys

    from kernelopt.measure.ncu import kernel_metrics

    stage("ncu")
    probe = [sys.executable, "-m", "kernelopt.evaluate.ncu_probe", json.dumps(spec)]
    metrics, reason = kernel_metrics(probe, kernel, timeout_s=timeout_s)
    return {"metrics": metrics, "reason": reason}


def verify_together(
    spec: dict[str, Any],
    replacements: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    peak_gbps: float | None,
    graphs: Sequence[dict[str, Any]] = (),
    base_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """All winning kernels and graph candidates swapped in at once: model gate again, and the
    end-to-end speedup; with ``base_options`` (the capture has knob options on top of the base
    mode's), also against the model compiled under ``base_options`` alone, interleaved in this process.

    The replacements are built and run in the candidate's process; this (judge's)
    process compares and times its own compiled model against them. Each graph candidate
    passes gate 1 again here, against this capture's graph, before anything of it is built."""
    from kernelopt.capture.graph_swap import GraphCandidate
    from kernelopt.verify.static_graph import check_static_graph

    s = _session(spec, peak_gbps)
    gates = GateSettings(**settings)
    stage("final")
    # the end-to-end readings are checked against a calibration of the candidate's process: a kernel's
    # evaluation made one, and where none did (graph candidates only, a fresh worker) the model's forward
    # does; the reference process compiles and runs the model here too, not inside the first timing
    s.warm_for_models()
    graph_keys = []
    for raw in graphs:
        candidate = GraphCandidate.from_dict(raw)
        if not 0 <= candidate.graph < len(s.artifact.graphs):
            return FinalCheck(
                Verdict("model", False, f"the model has no graph {candidate.graph}", {"rule": "swap"})
            ).to_dict()
        static = check_static_graph(candidate, original_source=s.artifact.graphs[candidate.graph].source_code)
        if not static.passed:
            return FinalCheck(static).to_dict()
        key, error, _ = s.runner.build_graph(candidate.to_dict())
        if error is not None:
            return FinalCheck(Verdict("model", False, f"graph {candidate.graph}: {error}", {"rule": "build"})).to_dict()
        graph_keys.append(key)
    keys = []
    for r in replacements:
        key, error, _ = s.runner.build(r["address"]["name"], r["source"])
        if error is not None:
            return FinalCheck(Verdict("model", False, f"{r['address']['name']}: {error}", {"rule": "build"})).to_dict()
        keys.append((r["address"], key))
    try:
        installed = s.runner.set_swaps(keys, graph_keys)
        # kernelopt's op computed by torch here, as at a candidate's first run: not what was judged
        slow = fell_back(list(installed.get("fallbacks") or []))
        if slow is not None:
            return FinalCheck(slow).to_dict()
        verdict = s.model_gate(gates.model_seeds, gates.max_error_ratio)
        check = FinalCheck(verdict)
        if verdict.passed:
            e2e = s.end_to_end(gates.trials)
            hosts = s.restitched.host_times()  # before vs eager reads the candidate's host time again
            op_hosts = s.restitched.op_hosts()
            evidence = s.restitched.timing_evidence(e2e)
            if evidence is not None:
                return FinalCheck(verdict, evidence=evidence).to_dict()

            def eager() -> Any:
                with torch.no_grad():
                    return s.model(*s.inputs)

            vs_eager = compare_split(
                eager, s.runner.timed_model(), trials=max(10, gates.trials // 2), baseline_host=True
            )  # eager's forward with its host's part, as the worker reads kernelopt's
            check.end_to_end = {
                **judge_end_to_end(e2e.comparison), "comparison": e2e.to_dict(), "host_ms": hosts, "op_hosts": op_hosts,
            }  # fmt: skip
            check.vs_eager = vs_eager.comparison.to_dict()
            if base_options is not None:
                _time_against_base(s, base_options, gates.trials, check)
            if gates.cuda_graphs:
                _judge_replayed(s, gates, check)
        return check.to_dict()
    except RunnerDied as exc:
        s.runner.restart()
        return FinalCheck(Verdict("model", False, str(exc), {"rule": "candidate_process"})).to_dict()


def _compiled_shape(graph: Any) -> dict[str, int] | None:
    """:func:`captured_shape`, or None for a graph whose call it cannot read (its variants' notes then
    say what they have, not what they drop)."""
    try:
        return captured_shape(graph)
    except (ValueError, SyntaxError):
        return None


def graph_variants(
    spec: dict[str, Any],
    option_sets: Sequence[dict[str, Any]],
    peak_gbps: float | None,
    budget_s: float | None = None,
) -> list[list[dict[str, Any]]]:
    """Per option set, per graph: whether Inductor wrote that graph otherwise under it
    (``{"options", "available", "reason"}``, and where it did ``"kernels"``, ``"copies"``: how many of
    them only move data, ``"rereads"``: its kernels' passes over their rows after the first,
    ``"serial"``: its reductions of a large tensor on a few programs, ``"buffers"``: how many its call
    allocates, and ``"compiled"``: the same five for the graph as compiled); the candidates stay in the
    session.

    A real model can take a minute a compile: once ``budget_s`` seconds have gone on compiling, the
    option sets left are not compiled and say so (the first one always is). Those holding a rewrite of
    kernelopt's that the capture's probes found something for (a group norm, a wide softmax) are compiled
    first, in their given order, then the rest: they were written for what this model holds. The rows
    come back in ``option_sets``' order."""
    s = _session(spec, peak_gbps)
    started = time.monotonic()
    compiled = [_compiled_shape(graph) for graph in s.artifact.graphs]
    order = sorted(range(len(option_sets)), key=lambda i: not s.rewrites_found(option_sets[i]))
    rows: dict[int, list[dict[str, Any]]] = {}
    for rank, i in enumerate(order):
        options = option_sets[i]
        if budget_s is not None and rank > 0 and time.monotonic() - started > budget_s:
            why = f"not compiled: the {budget_s:.0f} s for compiling graph variants ran out"
            rows[i] = [{"options": dict(options), "available": False, "reason": why} for _ in s.artifact.graphs]
            continue
        row = []
        for graph, made in enumerate(s.graph_variants(dict(options))):
            if isinstance(made, str):
                row.append({"options": dict(options), "available": False, "reason": made})
            else:
                counts = {
                    "kernels": len(made.kernels),
                    "copies": len(made.copy_kernels),
                    "rereads": made.rereads,
                    "serial": made.serial,
                    "buffers": made.buffers,
                }
                row.append(
                    {"options": dict(options), "available": True, "reason": None, **counts, "compiled": compiled[graph]}
                )
        rows[i] = row
    return [rows[i] for i in range(len(option_sets))]


def warm_model_processes(spec: dict[str, Any], peak_gbps: float | None) -> dict[str, Any]:
    """The processes that time whole models compile and run the model now, before a graph search's clock
    starts (:meth:`~kernelopt.evaluate.session.EvaluationSession.warm_for_models`); the seconds it took."""
    s = _session(spec, peak_gbps)
    stage("warm")
    started = time.monotonic()
    s.warm_for_models()
    return {"seconds": round(time.monotonic() - started, 3)}


def evaluate_graph(
    spec: dict[str, Any], graph: int, options: dict[str, Any], settings: dict[str, Any], peak_gbps: float | None
) -> dict[str, Any]:
    """A graph candidate (graph ``graph`` under ``options``) through the gates; a passed one carries
    its call sequence and kernels (``graph_candidate``) for the final check and the export."""
    return _session(spec, peak_gbps).evaluate_graph(graph, dict(options), GateSettings(**settings))


def evaluate_knobs(
    spec: dict[str, Any], options: dict[str, Any], settings: dict[str, Any], device: str = "cuda"
) -> dict[str, Any]:
    """A whole-model candidate (Inductor options) through the gates; run in a fresh worker each."""
    from kernelopt.evaluate.knob_candidate import evaluate_options

    return evaluate_options(ProblemSpec(**spec), options, GateSettings(**settings), device=device)


def structural_variants(
    spec: dict[str, Any], kernel_name: str, peak_gbps: float | None, option_sets: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The searched kernel as Inductor writes it under each option set (capture.variant_kernel): each
    variant is compiled beside the session's capture (a forward with its own code object, so the
    captured model keeps its kernels), and its kernel for this slot comes back renamed, or None with
    the reason. Inductor's own code, from the user's own model: no candidate runs here."""
    from kernelopt.capture.variant_kernel import as_replacement, matching_kernel

    s = _session(spec, peak_gbps)
    _, _, original = s.kernel(kernel_name)
    out: list[dict[str, Any]] = []
    for i, options in enumerate(option_sets):
        variant = s.compile_variant(dict(options), f"kernelopt structural {i}")
        if isinstance(variant, str):
            out.append({"options": dict(options), "source": None, "reason": variant})
            continue
        match = matching_kernel(original, [k for _, k in variant.kernels()])
        out.append(
            {
                "options": dict(options),
                "source": as_replacement(match, original.name) if match else None,
                "reason": None
                if match
                else "no kernel with the same fused operations and parameters, or the same kernel as before",
            }
        )
        del variant
        torch.cuda.empty_cache()
    return out
