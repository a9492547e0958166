"""The compiler-knob stage of an optimize run: Inductor options for the whole model, searched first.

Each variant is judged end to end against the base compile in a fresh process; a winner's options
go into every later capture, so the kernel search runs on what they compiled (options x kernels),
and the result over the base is the product of the two interleaved speedups.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import Any

from kernelopt.config import default_of
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.records import ProblemAnalysis, candidate_op_hosts
from kernelopt.pipeline.evaluator import (
    PER_CANDIDATE_TIMEOUT_S,
    SESSION,
    compile_cache_env,
    failure_of,
    gpu_seconds,
    result_of,
)
from kernelopt.pipeline.options_search import search_options
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.pipeline.run_context import RunContext
from kernelopt.search.candidate import MODEL_TARGET, EvaluationResult
from kernelopt.search.nodes import Node, NodeStore

KNOB_OPERATOR = "compiler-knobs"
EVAL_DEVICE = "cuda"  # where whole-model candidates are evaluated (the CPU tests use the CPU)
KNOB_EVALUATIONS: int = default_of("knob_budget")
"""Whole-model evaluations the knob search may spend (the ``knob_budget`` setting's default)."""


def search_knobs(run: RunContext, nodes: NodeStore, total_us: float) -> dict[str, Any]:
    """The model target, first: Inductor options judged end to end against the base compile, each
    variant in a fresh process. A variant that passes every gate faster becomes the capture the
    kernel search runs on (``run.spec`` gains its options), so kernels are searched on what the
    options compiled. At most ``knob_budget`` evaluations (the run's config; None:
    :data:`KNOB_EVALUATIONS`). A resumed run reads the choice back instead of searching again."""
    known = run.store.measurements(run.run_id, "knobs").get("knobs")
    if known is not None:
        if known["used"]:
            run.spec = dataclasses.replace(run.spec, options={**run.spec.options, **known["best_options"]})
        return dict(known)

    def evaluate(node: Node) -> EvaluationResult:
        return judge_options(run, node.candidate.options or {}, run.settings)

    cap = run.config.knob_budget if run.config is not None else KNOB_EVALUATIONS
    knob_budget = dataclasses.replace(run.budget, max_evaluations=min(run.budget.max_evaluations or cap, cap))
    run.emit("stage", {"stage": "compiler-knob search"})
    found = search_options(run, nodes, MODEL_TARGET, run.ops, knob_budget, evaluate, {"time_us": total_us})
    best, won = found.outcome.best, found.winner is not None
    record: dict[str, Any] = {
        "best_options": best.candidate.options if best else None,
        "speedup": best.fitness if won and best else 1.0,
        "evaluations": len(found.evaluated),
        "gpu_s": gpu_seconds(found.evaluated),
        "stop_reason": found.outcome.stop_reason,
        "used": won,
        "failures_by_gate": found.outcome.failures_by_gate,
    }
    if won:
        assert best is not None and best.result is not None
        record["comparison"] = best.result.measurements["kernel_comparison"]
        record["op_hosts"] = candidate_op_hosts(best.result.measurements.get("end_to_end"))
        run.spec = dataclasses.replace(run.spec, options={**run.spec.options, **(best.candidate.options or {})})
    run.store.add_measurement(run.run_id, "knobs", record)
    return record


def judge_options(run: RunContext, options: dict[str, Any], settings: GateSettings) -> EvaluationResult:
    """The whole model compiled under ``options`` (on top of ``run.spec``'s) through the gates against
    its compile without them, end to end, in a fresh process: every variant is a full compile."""
    from kernelopt.workers import run_isolated

    outcome = run_isolated(
        f"{SESSION}:evaluate_knobs",
        asdict(run.spec),
        options,
        settings.to_dict(),
        EVAL_DEVICE,
        timeout_s=run.timeout_s + PER_CANDIDATE_TIMEOUT_S,
        env=compile_cache_env(run.config),
    )
    return result_of(outcome.value) if outcome.ok else failure_of(outcome)


def stacked(knobs: dict[str, Any] | None, promoted: dict[str, Any] | None) -> dict[str, Any] | None:
    """The options the kernels were searched on, over the base mode's compile: the knob search's winner,
    the graph stage's promoted winner, or both, the graph's judged on the knobs' compile, so their options
    join and their interleaved speedups multiply (each over the compile before it)."""
    if knobs is None or promoted is None:
        return knobs or promoted
    return {
        **promoted,
        "best_options": {**knobs["best_options"], **promoted["best_options"]},
        "speedup": knobs["speedup"] * promoted["speedup"],
        "parts": [knobs["speedup"], promoted["speedup"]],
        "label": f"the compiler knobs' and {promoted['label']}",
    }


def _spread(knobs: dict[str, Any]) -> tuple[float, float] | None:
    """The options' interquartile range over the base mode's compile, where one interleaved timing
    measured their speedup (not a product of two, as stacked options' is)."""
    cmp = knobs.get("comparison") or {}
    q1, q3 = cmp.get("speedup_q1"), cmp.get("speedup_q3")
    if knobs.get("parts") or not isinstance(q1, (int, float)) or not isinstance(q3, (int, float)):
        return None
    return float(q1), float(q3)


def on_top_of_options(report: OptimizeReport, knobs: dict[str, Any], base: ProblemAnalysis) -> None:
    """The kernels were searched and verified on the options' compile. The result over the base mode's
    compile is the final verification's timing of the two in one process, interleaved
    (``report.vs_base``); where that is missing, the options' speedup (timed interleaved against the
    base) times the kernels' (timed interleaved against the options' compile), a product of two
    medians without an interquartile range."""
    over_options = report.speedup_vs_compile if report.winners else 1.0
    kernels = (
        f"{len(report.winners)} kernel(s) replaced on top ({over_options:.3f}x)"
        if report.winners
        else ("no kernel replacement passed on top")
    )
    measured = report.vs_base if report.winners else None
    if measured is not None:
        report.speedup_vs_compile = measured["speedup"]
        q1, q3 = measured.get("speedup_q1"), measured.get("speedup_q3")
        report.speedup_vs_compile_iqr = (q1, q3) if q1 is not None and q3 is not None else None
        report.optimized_ms = measured["candidate"]["median_ms"]
        report.final_compiled_ms = measured["baseline"]["median_ms"]
    else:
        report.speedup_vs_compile = knobs["speedup"] * over_options
        report.speedup_vs_compile_iqr = None if report.winners else _spread(knobs)
    report.compiled_ms = base.report.compiled_ms
    report.eager_ms = base.report.eager_ms
    if not report.winners:  # delivered as the options' judge read it (with kernels: the final verification)
        report.optimized_ms = base.report.compiled_ms / knobs["speedup"]
        report.final_compiled_ms = None
        report.op_hosts = knobs.get("op_hosts")
    report.speedup_vs_eager = report.eager_ms / (report.optimized_ms or report.compiled_ms)
    parts = knobs.get("parts")
    how = (
        f": {' x '.join(f'{p:.3f}x' for p in parts)}, each timed interleaved against the compile before it"
        if parts
        else ", timed interleaved"
    )
    report.final_reason = (
        f"verified: {knobs.get('label', 'Inductor options')} {knobs['best_options']} ({knobs['speedup']:.3f}x over "
        f"the {report.base_mode} compile{how}) and {kernels}: {report.speedup_vs_compile:.3f}x"
        + (
            f" over the {report.base_mode} compile, timed interleaved with it in one process"
            if measured is not None
            else " (the product of the two timings)"
            if report.winners or parts
            else ""
        )
    )
