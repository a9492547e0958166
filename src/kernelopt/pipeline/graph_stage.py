"""The graph stage of an optimize run: each graph's call sequence as Inductor writes it under other options.

It runs before the kernel search (:func:`graph_first`). The fastest winner whose options a whole-model
compile takes, judged again in full (on a model of several graphs as the whole model compiled under
them, since the options change every graph, and first together with the other graphs' winners' options
where one compile can hold them all), becomes the compile the kernels are then searched on
(options x kernels). The other winners (a row split, which kernelopt applies to one graph's kernels
after Inductor's compile, or other graphs' winners of other options) stay graph candidates: one replaces
every kernel of its graph, so a graph candidate and a kernel winner never stack on one graph, and the
final verification tries the graph winners before the kernel winners they displace
(:func:`~kernelopt.pipeline.final_check.finalize`). Each option set of
:data:`~kernelopt.search.graph_variants.GRAPH_OPTIONS` is compiled once in the evaluation worker;
the graphs it changed are searched, each candidate judged end to end (gate 1's wrapper rules, the
model gate, the whole model timed against the compiled one). The winners join the kernel winners
in the final verification and the export.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.capture.compile_stop import STOPPED
from kernelopt.config import Settings
from kernelopt.evaluate.gate_settings import GateSettings, final_settings
from kernelopt.evaluate.records import candidate_op_hosts
from kernelopt.evaluate.session import OWN_OPTIONS
from kernelopt.pipeline.evaluator import PER_CANDIDATE_TIMEOUT_S, SESSION, failure_of, result_of
from kernelopt.pipeline.knob_stage import judge_options
from kernelopt.pipeline.options_search import search_options
from kernelopt.pipeline.records import GraphResult
from kernelopt.pipeline.run_context import RunContext
from kernelopt.search.candidate import EvaluationResult
from kernelopt.search.graph_variants import graph_target, option_sets
from kernelopt.search.nodes import NodeStore

GRAPH_OPERATOR = "graph-variants"
PROMOTED = "graph_promoted"  # the store's record of the options made the kernel search's compile, or of none
NOT_PROMOTED = "graph_not_promoted:"  # + a set's label: its failed re-check, so a resumed run does not judge it again


def compile_budget_s(run: RunContext) -> float:
    """Seconds the worker may spend compiling graph variants: the ``graph_compile_s`` setting, the
    run's evaluation time-out or its wall-time budget per target (``bench --time-limit``), whichever
    is shortest, so a stage the run did not name cannot take a real model's minutes or push a bench
    problem past its own time-out."""
    limits = [run.timeout_s, (run.config or Settings()).graph_compile_s]
    if run.budget.max_wall_s is not None:
        limits.append(run.budget.max_wall_s)
    return min(limits)


def compile_line(rows: list[list[dict[str, Any]]], seconds: float, budget_s: float) -> str:
    """What compiling the option sets cost, in one line: how many were compiled, in how long, against
    which budget, how many stopped after the post-grad pass with nothing to rewrite
    (:mod:`~kernelopt.capture.compile_stop`), and how many the budget left out (``rows``: per option
    set, per graph)."""
    reasons = [str(row[0].get("reason") or "") if row else "" for row in rows]
    stopped = sum(1 for why in reasons if why.startswith("not compiled") and STOPPED in why)
    left = sum(1 for why in reasons if why.startswith("not compiled") and STOPPED not in why)
    done = len(rows) - stopped - left
    line = f"compiled {done} of {len(rows)} option sets in {seconds:.0f} s (budget {budget_s:.0f} s)"
    line += f"; {stopped} stopped: nothing to rewrite" if stopped else ""
    return line + (f"; {left} not compiled: the budget ran out" if left else "")


def graph_variants(
    run: RunContext, copies_first: bool = False, rereads_first: bool = False
) -> list[list[dict[str, Any]]] | None:
    """Per graph, per option set: whether Inductor wrote it otherwise (kept in the store with what
    compiling cost, :func:`compile_line`: a resumed run reads both back); None when the worker could
    not say (the reason is emitted)."""
    known = run.store.measurements(run.run_id, "graph_variants").get("graph_variants")
    if known is None:
        run.emit("stage", {"stage": "graph variants"})
        outcome = run.worker.call(
            f"{SESSION}:graph_variants",
            asdict(run.spec),
            option_sets(copies_first, rereads_first),
            run.peak,
            compile_budget_s(run),
            timeout_s=run.timeout_s * 2,  # the compile under way when the budget ends may take as long again
        )
        if not outcome.ok:
            run.emit("warning", {"message": f"graph variants not compiled: {outcome.status}: {outcome.reason}"})
            return None
        rows = outcome.value  # per option set, per graph
        line = compile_line(rows, outcome.duration_s, compile_budget_s(run))
        known = {
            "graph_variants": [[row[g] for row in rows] for g in range(len(rows[0]) if rows else 0)],
            "compile": line,
        }
        run.store.add_measurement(run.run_id, "graph_variants", known)
    return known["graph_variants"]


def compiled_variants(run: RunContext) -> str | None:
    """The run's :func:`compile_line`, where its graph variants were compiled."""
    known = run.store.measurements(run.run_id, "graph_variants").get("graph_variants")
    return known.get("compile") if known else None


def search_graphs(
    run: RunContext, nodes: NodeStore, copies_first: bool = False, rereads_first: bool = False
) -> list[GraphResult]:
    """Search every graph that some option set compiles otherwise (``copies_first``:
    the option sets that remove copy kernels are compiled first; ``rereads_first``: the row splits)."""
    per_graph = graph_variants(run, copies_first, rereads_first)
    if per_graph is None:
        return []
    if any(_unjudged(nodes, graph, variants) for graph, variants in enumerate(per_graph)):
        warm_model_processes(run)
    results = []
    for graph, variants in enumerate(per_graph):
        if not any(v["available"] for v in variants):
            continue
        results.append(_search_graph(run, nodes, graph, variants))
    return results


def _unjudged(nodes: NodeStore, graph: int, variants: list[dict[str, Any]]) -> bool:
    """Whether some compiled variant of graph ``graph`` has no verdict in the store yet (a resumed run
    whose graph search ended has none left)."""
    judged = [n.candidate.options for n in nodes.evaluated(graph_target(graph))]
    return any(v["available"] and v["options"] not in judged for v in variants)


def warm_model_processes(run: RunContext) -> None:
    """The processes that time whole models compile and run the model before the graph search's clock
    starts: on the H200 that took about 40 s of a fresh worker's first graph candidate (its compile and
    its screen), which a 20 s search budget then counted as the search's, leaving the other variants
    unjudged. A failure is said in one line; the first candidate then pays the warm-up itself."""
    run.emit("stage", {"stage": "graph warm-up"})
    outcome = run.worker.call(f"{SESSION}:warm_model_processes", asdict(run.spec), run.peak, timeout_s=run.timeout_s)
    if not outcome.ok:
        run.emit(
            "warning",
            {
                "message": f"the model-timing processes were not warmed ({outcome.status}: {outcome.reason}); "
                "the first graph candidate pays their compile"
            },
        )


def _evaluate(run: RunContext, graph: int, options: dict[str, Any], settings: GateSettings) -> EvaluationResult:
    """Graph ``graph`` under ``options`` through the gates in the evaluation worker."""
    outcome = run.worker.call(
        f"{SESSION}:evaluate_graph",
        asdict(run.spec),
        graph,
        options,
        settings.to_dict(),
        run.peak,
        timeout_s=run.timeout_s + PER_CANDIDATE_TIMEOUT_S,
    )
    return result_of(outcome.value) if outcome.ok else failure_of(outcome)


def recheck_graph(run: RunContext, result: GraphResult, settings: GateSettings) -> EvaluationResult:
    """A graph winner through the gates again with the run's full seeds and timing (the verdict
    returned); one that fails keeps the graph as compiled."""
    assert result.best is not None
    again = _evaluate(run, result.graph, result.best.get("options") or {}, settings)
    seeds = f"model seeds {list(settings.model_seeds)}, {settings.trials} trials"
    if again.passed and again.fitness > 1.0:
        result.final_check = f"passed again with {seeds}"
        result.speedup = again.fitness
        result.best = again.measurements.get("graph_candidate", result.best)
    else:
        result.final_check = f"failed with {seeds}: {again.failed_gate}: {again.reason}"
        result.best = None
        result.speedup = 1.0
    return again


def _search_graph(run: RunContext, nodes: NodeStore, graph: int, variants: list[dict[str, Any]]) -> GraphResult:
    target = graph_target(graph)
    run.emit("stage", {"stage": "graph search", "kernel": target})
    found = search_options(
        run,
        nodes,
        target,
        [op for op in run.ops if op.name == GRAPH_OPERATOR],
        run.budget,
        lambda node: _evaluate(run, graph, node.candidate.options or {}, run.settings),
        {"graph_variants": variants},
    )
    winner = found.winner
    return GraphResult(
        graph=graph,
        speedup=winner.fitness if winner and winner.fitness else 1.0,
        evaluations=len(found.evaluated),
        failures_by_gate=found.outcome.failures_by_gate,
        stop_reason=found.outcome.stop_reason,
        best=winner.result.measurements.get("graph_candidate") if winner and winner.result else None,
        note=winner.candidate.note if winner else "",
        node=winner.id if winner else None,
    )


@dataclass
class GraphFirst:
    """The graph stage, run before the kernel search."""

    graphs: list[GraphResult]
    promoted: dict[str, Any] | None  # the winner's options as the kernels' compile, in a knob record's shape


def whole_model(options: dict[str, Any]) -> bool:
    """Whether a whole-model compile takes these graph options (kernelopt's row split it applies to one
    graph's kernels itself, after Inductor's compile)."""
    return not any(name in OWN_OPTIONS for name in options)


def graph_first(
    run: RunContext, graph_run: RunContext, nodes: NodeStore, copies_first: bool = False, rereads_first: bool = False
) -> GraphFirst:
    """The graph stage before the kernel search, so the kernels are searched on the winning variant's
    compile, as a compiler knob's winner is (issue 13: compile options x kernels). The fastest winner
    whose options a whole-model compile takes is re-checked with the run's full seeds and timing: on a
    model of one graph as its graph candidate, which is the whole model; on a model of several graphs as
    the whole model compiled under those options (:func:`~kernelopt.pipeline.knob_stage.judge_options`),
    since they compile every graph otherwise, not only the one searched; there the options of every
    graph's winner, where one compile can hold them all, are judged together first. Where it passes again,
    ``run.spec`` gains its options, every graph winner of options it holds is in that compile too, and
    the record returned has the shape :func:`~kernelopt.pipeline.knob_stage.on_top_of_options` reads.
    The other graph winners stay for the final verification, which judges them again on the compile the
    run ends with. Variants that could not be compiled (the reason emitted) leave no graph to search. A
    resumed run reads the choice back instead of re-checking again, and a run killed between two sets'
    re-checks resumes without judging again the sets it found no faster."""
    per_graph = graph_variants(graph_run, copies_first, rereads_first)
    if per_graph is None:
        return GraphFirst([], None)
    graphs = search_graphs(graph_run, nodes, copies_first, rereads_first)
    known = run.store.measurements(run.run_id, PROMOTED).get(PROMOTED)
    if known is None:
        failed: list[str] = []
        judged = run.store.measurements(run.run_id, NOT_PROMOTED)  # sets a run killed since had judged
        for credited, options, label in _promotable(graphs):
            known = judged.get(NOT_PROMOTED + label)
            if known is None or known["best_options"] != options:  # the same label for other options: judged anew
                run.emit("stage", {"stage": "final gates", "kernel": label})
                known = _recheck_for_promotion(run, credited, options, label, len(per_graph))
                if not known["used"]:
                    run.store.add_measurement(run.run_id, NOT_PROMOTED + label, known)
            if known["used"]:
                break
            failed.append(f"{label} not promoted: {known['final_check']}")
        if known is None:
            return GraphFirst(graphs, None)
        known["not_promoted"] = failed
        run.store.add_measurement(run.run_id, PROMOTED, known)
    winner = next((g for g in graphs if g.graph == known["graph"]), None)  # None: a resumed search lost it
    if len(per_graph) > 1:  # the graph candidates of options not promoted stand for the final verification
        alone = [] if known["used"] else [f"{known['label']} not promoted: {known['final_check']}"]
        for line in known.get("not_promoted", alone):  # a record of before the union was tried has one
            run.emit("warning", {"message": line})
    if not known["used"]:
        if len(per_graph) == 1 and winner is not None:  # one graph: its candidate failed the very re-check
            winner.final_check, winner.best, winner.speedup = known["final_check"], None, 1.0
        return GraphFirst(graphs, None)
    options = known["best_options"]
    for g in graphs:
        if g is winner or (g.best is not None and _within(_options(g), options)):
            g.promoted = True
            g.final_check = known["final_check"] if g is winner else f"in the compile of {known['label']}"
    if winner is not None:
        winner.speedup = known["speedup"]
        winner.final_check += "; the kernels were searched on its compile"
    run.spec = dataclasses.replace(run.spec, options={**run.spec.options, **options})
    return GraphFirst(graphs, dict(known))


def _promotable(graphs: list[GraphResult]) -> list[tuple[GraphResult, dict[str, Any], str]]:
    """What to judge as the kernels' compile, in order, each as (the winner it is credited to, its
    options, its label): the fastest graph winner whose options a whole-model compile takes; on a model
    of several graphs whose winners want other options that one compile can hold at once (none given
    two values), all of them together first, since a whole-model compile applies its options to every
    graph."""
    ready = [g for g in graphs if g.best is not None and whole_model(_options(g))]
    if not ready:
        return []
    ready.sort(key=lambda g: g.speedup, reverse=True)
    fastest = ready[0]
    merged, joined = _options(fastest), [fastest.graph]
    for g in ready[1:]:
        extra = _options(g)
        if (
            extra
            and not _within(extra, merged)
            and all(merged.get(name, value) == value for name, value in extra.items())
        ):
            merged.update(extra)
            joined.append(g.graph)
    alone = (fastest, _options(fastest), f"graph {fastest.graph}'s options")
    if len(joined) == 1:
        return [alone]
    *most, last = sorted(joined)
    names = ", ".join(str(n) for n in most) + f" and {last}"
    return [(fastest, merged, f"graphs {names}'s options"), alone]


def _options(graph: GraphResult) -> dict[str, Any]:
    """A graph winner's compile options."""
    return dict((graph.best or {}).get("options") or {})


def _within(options: dict[str, Any], promoted: dict[str, Any]) -> bool:
    """Whether a compile under ``promoted`` holds every one of ``options``."""
    return bool(options) and options.items() <= promoted.items()


def _recheck_for_promotion(
    run: RunContext, winner: GraphResult, options: dict[str, Any], label: str, graph_count: int
) -> dict[str, Any]:
    """``options`` judged again with the run's full seeds and timing (the winner's graph candidate on a
    model of one graph, the whole model compiled under them on one of several), as the store keeps it."""
    settings = final_settings(run.settings, run.config)
    if graph_count == 1:
        again = recheck_graph(run, winner, settings)
        used, speedup, check = winner.best is not None, winner.speedup, winner.final_check
    else:
        again = judge_options(run, options, settings)
        seeds = f"model seeds {list(settings.model_seeds)}, {settings.trials} trials"
        used = again.passed and again.fitness > 1.0
        speedup = again.fitness if used else 1.0
        check = (
            f"passed again as the whole model compiled under them ({graph_count} graphs) with {seeds}"
            if used
            else f"the whole model compiled under them ({graph_count} graphs) failed with {seeds}: "
            f"{again.failed_gate}: {again.reason}"
        )
    return {
        "graph": winner.graph,
        "best_options": dict(options),
        "speedup": speedup,
        "final_check": check,
        "used": used,
        "label": label,
        "comparison": again.measurements.get("kernel_comparison") if used else None,  # its interleaved timing
        "op_hosts": candidate_op_hosts(again.measurements.get("end_to_end")) if used else None,
    }
