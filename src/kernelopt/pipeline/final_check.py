"""The end of an optimize run: each winner re-checked in full, then all swapped in and verified together.

A winner that fails its full re-check gives way to the kernel's next-best passed candidate; a group
that fails the final verification falls back to the best single winner; else the baseline stays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import Any

from kernelopt.capture.output_code import kernel_identity
from kernelopt.evaluate.records import FinalCheck, ProblemAnalysis, candidate_op_hosts
from kernelopt.evaluate.session import GateSettings, final_settings
from kernelopt.pipeline.evaluator import SESSION, WorkerEvaluator
from kernelopt.pipeline.graph_stage import recheck_graph
from kernelopt.pipeline.records import GraphResult, KernelResult, OptimizeReport, Winner
from kernelopt.pipeline.run_context import RunContext
from kernelopt.search.nodes import Node

RECHECK_ATTEMPTS = 3  # passed candidates per kernel the full re-check may try, best first


def winner_of(node: Node) -> Winner:
    """A passed search node as the kernel's chosen replacement."""
    assert node.result is not None and node.candidate.source is not None
    return Winner(
        operator=node.operator,
        note=node.candidate.note,
        source=node.candidate.source,
        verdicts=node.result.verdicts,
        node=node.id,
        config=node.candidate.config,
        kernel_time_us=node.result.measurements.get("kernel_time_us"),
        search_speedup=node.fitness,
    )


def recheck(
    report: OptimizeReport, run: RunContext, settings: GateSettings, runners_up: dict[str, list[Winner]]
) -> None:
    """Every winner through the four gates again with all seeds, distributions and full timing.

    The search's gates are lighter, so a winner can fail here; the next-best passed
    candidates of the same kernel (up to :data:`RECHECK_ATTEMPTS` in all) are tried
    in turn, and a kernel none of them survives keeps the compiler's."""
    seeds = f"kernel seeds {list(settings.kernel_seeds)}, model seeds {list(settings.model_seeds)}, {settings.trials} trials"
    for k in report.kernels:
        if k.best is None:
            continue
        run.emit("stage", {"stage": "final gates", "kernel": k.name})
        failures: list[str] = []
        evaluator = WorkerEvaluator(run.worker, run.spec, k.name, settings, run.peak, run.timeout_s)
        for rank, choice in enumerate([k.best, *runners_up.get(k.name, [])], start=1):
            result = evaluator.one(choice.source)
            if result.passed and result.fitness > 1.0:
                earlier = f" (the search's #{rank}; " + "; ".join(failures) + ")" if failures else ""
                k.final_check = f"passed again with {seeds}{earlier}"
                k.best = dataclasses.replace(choice, verdicts=result.verdicts)
                k.speedup = result.fitness
                k.after_us = result.measurements.get("kernel_time_us", choice.kernel_time_us)
                break
            failures.append(f"#{rank} failed: {result.failed_gate}: {result.reason}")
        else:
            k.final_check = f"failed with {seeds}: " + "; ".join(failures)
            k.best = None
            k.speedup = 1.0
            k.after_us = None


def finalize(
    report: OptimizeReport,
    run: RunContext,
    analysis: ProblemAnalysis,
    runners_up: dict[str, list[Winner]],
    base_options: dict[str, Any] | None = None,
) -> None:
    """Re-check each winner in full (the run's full seeds), swap them in together and verify;
    fall back to the best single winner; else the baseline. ``base_options``: the base mode's
    options where knob options were searched on top of them, so the verified model is also timed
    against the base mode's compile in the same process (``report.vs_base``)."""
    settings = final_settings(run.settings, run.config)
    report.optimized_ms = report.compiled_ms
    report.speedup_vs_eager = report.eager_ms / report.compiled_ms
    recheck(report, run, settings, runners_up)
    for graph in report.graph_winners:
        run.emit("stage", {"stage": "final gates", "kernel": f"graph {graph.graph}"})
        recheck_graph(run, graph, settings)
    winners, graphs = report.winners, report.graph_winners
    if not winners and not graphs:
        report.final_reason = "no candidate passed all four gates faster than the compiler: the baseline stays"
        return
    for k in winners:
        assert k.best is not None
        info = analysis.kernels[k.name]
        k.best.address = {"graph": info.graph, "name": k.name, "sha256": kernel_identity(info.source)}
    for group, graph_group in _attempts(winners, graphs):
        names = [k.name for k in group] + [f"graph {g.graph}" for g in graph_group]
        run.emit("stage", {"stage": "final verification", "kernels": names})
        payload = [{"address": k.best.address, "source": k.best.source} for k in group if k.best is not None]
        outcome = run.worker.call(
            f"{SESSION}:verify_together",
            asdict(run.spec),
            payload,
            settings.to_dict(),  # cuda_graphs: judged as replays too where the run's analysis says so
            run.peak,
            [g.best for g in graph_group if g.best is not None],
            base_options,
            timeout_s=run.timeout_s * (2 if base_options is not None else 1),  # a second compile to time against
        )
        if not outcome.ok:
            report.final_reason = f"final verification failed: {outcome.status}: {outcome.reason}"
            continue
        final = FinalCheck.from_dict(outcome.value)
        report.as_replays = replays_summary(final)
        if final.faster:
            cmp = final.comparison
            assert cmp is not None
            report.speedup_vs_compile = cmp["speedup"]
            report.speedup_vs_compile_iqr = (cmp["speedup_q1"], cmp["speedup_q3"])
            report.optimized_ms = cmp["candidate"]["median_ms"]
            report.final_compiled_ms = cmp["baseline"]["median_ms"]
            report.vs_base = final.vs_base
            report.op_hosts = candidate_op_hosts(final.end_to_end)
            if base_options is not None and final.vs_base is None:
                report.warnings.append(
                    f"not timed against the base mode's compile in one process: {final.vs_base_reason}"
                )
            if final.vs_eager:
                report.speedup_vs_eager = final.vs_eager["speedup"]
                q1, q3 = final.vs_eager.get("speedup_q1"), final.vs_eager.get("speedup_q3")
                report.speedup_vs_eager_iqr = (q1, q3) if q1 is not None and q3 is not None else None
            for k in report.kernels:
                if k not in group:
                    k.best = None
            for g in report.graphs:
                if g not in graph_group and not g.promoted:
                    g.best = None
            replaced = f"{len(group)} kernel(s) replaced" + (
                f", {len(graph_group)} graph call sequence(s) regenerated" if graph_group else ""
            )
            report.final_reason = f"verified: {replaced}, re-stitched model passed the model gate"
            if final.replayed is not None:
                report.final_reason += (
                    f" also as CUDA-graph replays, and ran {final.replayed['speedup']:.3f}x the compiled model's "
                    "replays: launch-bound, so delivery rests on that ratio"
                )
            return
        report.final_reason = f"re-stitched model rejected: {final.reason}"
    for k in report.kernels:
        k.best = None
    for g in report.graph_winners:
        g.best = None
    report.final_reason += "; the baseline stays"


def _attempts(
    winners: list[KernelResult], graphs: list[GraphResult]
) -> list[tuple[list[KernelResult], list[GraphResult]]]:
    """What the final verification tries, in turn, until one verifies faster: every graph winner with
    the kernel winners of the other graphs (a graph candidate replaces all its graph's kernels, and it
    was judged end to end, a kernel winner only at its kernel: on the H200 an eviction hint 1.08x at
    log-softmax-vocab's kernel was no faster end to end, its graph's online softmax 1.25x); then every
    kernel winner with the graph winners of the other graphs; then the single best of each kind."""
    graph_of = {k.name: (k.best.address or {}).get("graph") if k.best else None for k in winners}
    replaced = {g.graph for g in graphs}
    attempts = [([k for k in winners if graph_of[k.name] not in replaced], graphs)]
    kept = set(graph_of.values())
    attempts.append((winners, [g for g in graphs if g.graph not in kept]))
    if winners:
        attempts.append(([max(winners, key=lambda k: k.speedup)], []))
    if graphs:
        attempts.append(([], [max(graphs, key=lambda g: g.speedup)]))
    out: list[tuple[list[KernelResult], list[GraphResult]]] = []
    seen: set[tuple[tuple[str, ...], tuple[int, ...]]] = set()
    for group, graph_group in attempts:
        key = (tuple(k.name for k in group), tuple(g.graph for g in graph_group))
        if (group or graph_group) and key not in seen:
            seen.add(key)
            out.append((group, graph_group))
    return out


def replays_summary(final: FinalCheck) -> dict[str, Any] | None:
    """What the report keeps of the final verification's CUDA-graph judgment: the replayed end-to-end
    speedup with its spread, the compiled model's own gain from graphs, and why there is no replayed
    judgment where there is none; None where it was not asked for."""
    if final.graphs_gain is None and final.replayed_reason is None and final.replayed is None:
        return None
    out: dict[str, Any] = {"graphs_gain": (final.graphs_gain or {}).get("speedup")}
    if final.replayed is not None:
        out.update({k: final.replayed.get(k) for k in ("speedup", "q1", "q3", "noise", "beyond_noise")})
    if final.replayed_reason is not None:
        out["reason"] = final.replayed_reason
    return out
