"""``kernelopt optimize``: a verified faster model, or the compiler's baseline back.

The run: analyze the compiled model in a persistent evaluation worker (one
capture for the whole run), pick the kernels whose headroom can buy something
end to end, search each with the chosen operators (every candidate through the
four gates, in the worker), then swap all winners in together, verify the
re-stitched model once more and export it. Nothing is exported when nothing
passes: the user keeps ``torch.compile``'s model. Every node is in the store;
``resume`` continues a killed run without repeating a finished evaluation.

The run's stages read in order here; their work lives beside it: the shared context and analysis
(:mod:`~kernelopt.pipeline.run_context`), the options searched first
(:mod:`~kernelopt.pipeline.knob_stage`), what each kernel's search knows before its first candidate
(:mod:`~kernelopt.pipeline.kernel_facts`), and the re-check and final verification
(:mod:`~kernelopt.pipeline.final_check`). Slightly over 400 lines: the entry point, the base mode
and one kernel's search stay together, as a reader follows a run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelopt.capture.compat import mode_options
from kernelopt.capture.graph_swap import GraphCandidate
from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.capture.swap import KernelAddress
from kernelopt.config import Settings, resolve
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.analysis import AnalysisReport
from kernelopt.evaluate.records import ProblemAnalysis
from kernelopt.evaluate.session import GateSettings, ProblemSpec, search_settings
from kernelopt.measure.environment import device_label, versions
from kernelopt.pipeline.evaluator import (
    SESSION,
    WorkerEvaluator,
    compile_cache_env,
    gpu_seconds,
    stage_medians,
)
from kernelopt.pipeline.final_check import RECHECK_ATTEMPTS, finalize, winner_of
from kernelopt.pipeline.graph_stage import GRAPH_OPERATOR, compiled_variants, graph_first
from kernelopt.pipeline.kernel_facts import inductor_tuned, ncu_counters, structural_variants_of
from kernelopt.pipeline.knob_stage import KNOB_OPERATOR, on_top_of_options, search_knobs, stacked
from kernelopt.pipeline.records import KernelResult, OptimizeReport, Winner
from kernelopt.pipeline.run_context import RunContext, analysis_of, replays_judged, resumed_sizes
from kernelopt.pipeline.stock_modes import (
    SEARCH_BASES,
    best_stock_for,
    choose_base_mode,
    reused_stock,
    settle_run_mode,
    time_stock_modes,
)
from kernelopt.problem import Problem, load_problem
from kernelopt.report import report_beside, try_write, write_run_report
from kernelopt.search.candidate import Candidate
from kernelopt.search.engine import SearchEngine
from kernelopt.search.graph_variants import graph_target
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import DEFAULT_OPERATORS, SearchContext, make_operators
from kernelopt.search.policy import make_policy
from kernelopt.search.targets import (
    COPY_SHARE,
    Target,
    headroom_elsewhere,
    reread_options_first,
    select_targets,
    structure_pays,
)
from kernelopt.search.termination import Budget
from kernelopt.store import Store
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker

if TYPE_CHECKING:
    from kernelopt.agents.providers import ApiKey, LLMConfig, ProviderSpec

STRUCTURAL_OPERATOR = "structural"


def llm_name(llm: str | ProviderSpec | None) -> str | None:
    """``kind:model`` of the run's LLM, for its record (never a URL: a bench's is its relay's)."""
    if llm is None:
        return None
    if isinstance(llm, str):
        return llm.partition("@")[0]
    return f"{llm.kind}:{llm.model}"


def require_gpu(command: str = "kernelopt optimize") -> None:
    import torch

    if not torch.cuda.is_available():
        raise KerneloptError(f"{command} needs an NVIDIA GPU with CUDA; torch sees none")


def optimize(
    problem_path: str | Path,
    store: Store,
    *,
    operators: Sequence[str] = DEFAULT_OPERATORS,
    policy: str = "beam",
    budget: Budget | None = None,
    settings: GateSettings | None = None,
    max_targets: int | None = None,
    export_path: str | Path | None = None,
    resume_run: int | None = None,
    seed: int = 0,
    timeout_s: float | None = None,
    sizes: dict[str, Any] | None = None,
    llm: str | ProviderSpec | None = None,
    llm_config: str | Path | LLMConfig | None = None,
    llm_key: ApiKey | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    effort: str | None = None,
    config: Settings | None = None,
    write_report: bool = True,
    report_path: str | Path | None = None,
    stock_modes: bool = False,
    train: bool = False,
) -> OptimizeReport:
    """Search faster kernels for one problem; export the verified model, or keep the baseline.

    ``budget``, ``settings`` (the search's gates), ``max_targets`` and ``timeout_s`` left
    as None come from ``config`` (default: :func:`~kernelopt.config.load_settings`) with
    ``effort`` and the explicit ones on top. With ``write_report`` the run's HTML report is
    written to ``report_path`` (default: beside the exported model, ``<problem>.report.html``);
    a report that cannot be written is a warning, never a failed run. ``stock_modes``: time the
    result against each mode of the ``stock_modes`` setting too, each in a process of its own,
    and name the best (:mod:`kernelopt.pipeline.stock_modes`). ``train``: optimize the problem's
    training step, forward and backward kernels, judged on outputs and every parameter's gradient
    (:mod:`kernelopt.problem.training`)."""
    require_gpu()
    # A malformed setting (KERNELOPT_COMPILE_WORKERS=abc, a bad kernelopt.toml) stops the run here, in one line.
    config = resolve(config, effort=effort, max_targets=max_targets, eval_timeout_s=timeout_s)
    started = time.monotonic()
    warnings: list[str] = []
    notify = on_event or (lambda kind, data: None)

    def emit(kind: str, data: dict[str, Any]) -> None:
        if kind == "warning":
            warnings.append(data["message"])  # kept in the report too, not only shown
        notify(kind, data)

    given_sizes = sizes
    if resume_run is not None:  # a resumed run keeps the sizes it started with (other ones: refused below)
        sizes = resumed_sizes(store, resume_run, None)
    problem = load_problem(problem_path, overrides=sizes, train=train)
    require_readable(problem.path, "the problem file")
    budget = budget or Budget(max_evaluations=config.budget, patience=config.patience)
    # The search screens and uses one seed per gate; winners are evaluated again in full
    # (final_settings) and timed end to end once, together, in the final verification.
    settings = settings or search_settings(config)
    ops = make_operators(list(operators))
    selection = make_policy(policy)
    label = device_label()
    args = {
        "operators": list(operators),
        "policy": policy,
        "budget": asdict(budget),
        "seed": seed,
        "settings": config.values(),
        "train": train,
        "sizes": dict(problem.overrides),
        "path": str(problem.path.resolve()),  # a bench finds the run its killed worker left (unfinished_run)
        "llm": llm_name(llm),
    }
    run_id = _open_run(store, problem, resume_run, given_sizes, train, label, args)
    with store.recording(run_id):  # a bad --llm, a failed search or export: the run ends failed
        emit("run", {"run_id": run_id, "problem": problem.name})
        base = _base_mode(store, run_id, config, str(problem.path), seed, dict(problem.overrides), emit, train)
        spec = ProblemSpec(
            str(Path(problem_path).resolve()), dict(problem.overrides), seed, mode_options(base["mode"]), train
        )
        peak = store.device_bandwidth(label)
        client = None
        try:
            if llm is not None or llm_config is not None:
                from kernelopt.agents.factory import make_client
                from kernelopt.search.llm_operator import LLMOperator

                # a bad key or model: here
                client = make_client(llm, store=store, run_id=run_id, config=llm_config, api_key=llm_key)
                ops = [*ops, LLMOperator(client, store, run_id, device=label)]
            with PersistentWorker(env=compile_cache_env(config)) as worker:
                report = _optimize(
                    RunContext(
                        name=problem.name,
                        store=store,
                        run_id=run_id,
                        worker=worker,
                        spec=spec,
                        peak=peak,
                        label=label,
                        ops=ops,
                        selection=selection,
                        budget=budget,
                        settings=settings,
                        max_targets=config.max_targets,
                        timeout_s=config.eval_timeout_s,
                        seed=seed,
                        emit=emit,
                        config=config,
                        base_mode=base["mode"],
                    )
                )
        finally:
            usage = asdict(client.usage()) if client is not None else None
            if client is not None:
                client.close()
        report.base_mode_reason, report.base_stock = base["reason"], dict(base["stock"])
        report.options = report.options or (dict(spec.options) or None)
        report.llm_usage = usage
        report.warnings = warnings
        report.wall_s = time.monotonic() - started
        target = Path(export_path or f"{problem.path.stem}.kopt.json")
        if report.final_reason.startswith("verified"):
            report.exported = str(_export(report, problem, target, seed))
            _keep_tuned(store, run_id, label, report)
        if stock_modes:
            _time_stock_modes(report, str(problem.path), config, seed, dict(problem.overrides), emit, train,
                              problem=problem, export_to=target)  # fmt: skip
        store.add_measurement(run_id, "report", report.to_dict())
    store.finish_run(run_id)
    if write_report:
        _write_report(report, store, Path(report_path) if report_path else None, target, emit)
    return report


def _open_run(
    store: Store,
    problem: Problem,
    resume_run: int | None,
    given_sizes: dict[str, Any] | None,
    train: bool,
    label: str,
    args: dict[str, Any],
) -> int:
    """The run this optimize records into: ``resume_run`` where it is an optimize run of this problem
    started the same way (training or not, the same sizes), else a new one with ``args``."""
    if resume_run is None:
        return store.start_run("optimize", problem.name, label, versions(), args)
    run = store.run(resume_run)
    if run.kind != "optimize" or run.problem != problem.name:
        raise KerneloptError(
            f"run {resume_run} is a {run.kind} run of {run.problem}, not an optimize run of {problem.name}"
        )
    if bool(run.args.get("train")) != train:
        mode = "--train" if run.args.get("train") else "no --train"
        raise KerneloptError(f"run {resume_run} was started with {mode}: resume it the same way")
    resumed_sizes(store, resume_run, given_sizes)  # after the check that it is this file's run
    return resume_run


def _export(report: OptimizeReport, problem: Problem, target: Path, seed: int) -> Path:
    """Write the verified result to ``target``: its kernel replacements, graph call sequences and the
    compile options they were verified under."""
    replacements = [
        Replacement(KernelAddress.from_dict(k.best.address or {}), k.best.source)
        for k in report.kernels
        if k.best is not None
    ]
    graphs = [GraphCandidate.from_dict(g.best) for g in report.graph_winners if g.best is not None]
    options = report.options or {}
    return export_model(target, problem, replacements, report.to_dict(), seed=seed, options=options, graphs=graphs)


def _base_mode(
    store: Store,
    run_id: int,
    config: Settings,
    path: str,
    seed: int,
    overrides: dict[str, Any],
    emit: Any,
    train: bool = False,
) -> dict[str, Any]:
    """The stock mode the search builds on, chosen once per run (a resumed run reads it back, so
    its capture is the one its nodes were judged on): with ``base_mode`` auto, every mode a search
    can start from is timed against the default first, each in its own process."""
    known = store.measurements(run_id, "base_mode").get("base_mode")
    if known is None:
        stock: dict[str, Any] = {}
        if config.base_mode == "auto":
            candidates = [m for m in SEARCH_BASES if m != "default"]
            stock = time_stock_modes(path, candidates, None, emit, seed=seed, overrides=overrides, train=train)
            mode, why = choose_base_mode(stock)
        else:
            mode, why = config.base_mode, f"the base_mode setting names {config.base_mode}"
        known = {"mode": mode, "reason": why, "stock": stock}
        store.add_measurement(run_id, "base_mode", known)
    emit("base_mode", {"mode": known["mode"], "reason": known["reason"]})
    return known


def _write_report(report: OptimizeReport, store: Store, path: Path | None, export: Path, emit) -> None:
    """The run's HTML page (after the run is finished in the store, so the page shows it done);
    a failure to render is one warning line, the run stands."""
    written, error = try_write(
        lambda: write_run_report(store, report.run_id, path or report_beside(export)),
        f"run {report.run_id}",
        f"try again with kernelopt report {report.run_id}",
    )
    if error is not None:
        emit("warning", {"message": error})
    report.report_path = str(written) if written else None


def _keep_tuned(store: Store, run_id: int, label: str, report: OptimizeReport) -> None:
    """The delivered kernels into the store's cache, for ``torch.compile(backend="kernelopt")``. Only a
    run on the default compile's kernels: that backend compiles with the default options, so a kernel
    verified on another mode's or options' compile would never match there (its file's backend,
    ``kernelopt.backend(path)``, compiles with the options it was verified on)."""
    import torch

    if report.options:
        return
    from kernelopt.measure.environment import triton_version
    from kernelopt.store.tuned import TunedKernel, add_tuned

    for k in report.winners:
        assert k.best is not None and k.best.address is not None
        add_tuned(
            store,
            TunedKernel(k.best.address["sha256"], k.name, k.best.source, k.speedup, run_id),
            device=label,
            torch_version=str(torch.__version__),
            triton_version=triton_version(),
        )


def _with_graph_stage(run: RunContext, measured: AnalysisReport, report: OptimizeReport) -> RunContext | None:
    """The run the graph stage searches with, or None where it does not run: always where
    ``--operators`` names graph-variants; with the ``graph_stage`` setting at auto (the default), also
    where the analysis says structure can pay (:func:`~kernelopt.search.targets.structure_pays`), the
    reason then kept in the report. The decision reads the stored analysis alone, so a resumed run
    takes it again the same way."""
    if run.uses(GRAPH_OPERATOR):
        return run
    if (run.config or Settings()).graph_stage != "auto":
        return None
    why = structure_pays(
        measured.amdahl_bound, measured.fusion_bound, measured.moves_share, measured.rereads_share, measured.own_ops
    )
    if why is None:
        return None
    report.graph_stage = why
    run.emit("stage", {"stage": f"graph stage, not named by --operators: {why}"})
    return replace(run, ops=[*run.ops, *make_operators([GRAPH_OPERATOR])])


def _share_of_us(run: RunContext, measured: AnalysisReport) -> float:
    """The time a kernel's share is taken of: the compiled forward's, or where the result is judged as
    CUDA-graph replays (the run's settings, from :func:`~kernelopt.pipeline.run_context.replays_judged`),
    the GPU's busy part of it, since replays leave no launch gaps to dilute a kernel's gain."""
    total_us = measured.compiled_ms * 1000.0
    if run.settings.cuda_graphs:
        return total_us * min(1.0, max(measured.gpu_busy, 1e-3))
    return total_us


def _optimize(run: RunContext) -> OptimizeReport:
    base = analysis_of(run)
    # a launch-bound result is judged as CUDA-graph replays: knob and graph candidates, the final verification
    run = replace(run, settings=replace(run.settings, cuda_graphs=replays_judged(run, base.report)))
    nodes = NodeStore(run.store, run.run_id)
    base_options = dict(run.spec.options)  # the base mode's: search_knobs puts its winner's on top
    knobs = search_knobs(run, nodes, base.report.compiled_ms * 1000.0) if run.uses(KNOB_OPERATOR) else None
    analysis = analysis_of(run, "analysis/options") if knobs and knobs["used"] else base
    measured = analysis.report
    targets, skipped = select_targets([asdict(launch) for launch in measured.launches], _share_of_us(run, measured))
    report = OptimizeReport(
        problem=run.name,
        run_id=run.run_id,
        device=measured.device,
        eager_ms=measured.eager_ms,
        compiled_ms=measured.compiled_ms,
        amdahl_bound=measured.amdahl_bound,
        gpu_busy=measured.gpu_busy,
        triton_share=min(1.0, measured.triton_ms / measured.compiled_ms) if measured.compiled_ms > 0 else None,
        launch_overhead_bound=measured.launch_overhead_bound,
        fusion_bound=measured.fusion_bound,
        skipped=[(s.name, s.reason) for s in skipped],
        base_mode=run.base_mode,
        knobs=knobs,
        options=dict(run.spec.options) or None,
    )
    if knobs:
        report.evaluations += knobs["evaluations"]
        report.gpu_s += knobs["gpu_s"]
    graph_run = _with_graph_stage(run, measured, report)
    for note in headroom_elsewhere(
        measured.amdahl_bound,
        measured.fusion_bound,
        measured.launch_overhead_bound,
        measured.gpu_busy,
        graph_stage=graph_run is not None,
    ):
        run.emit("warning", {"message": note})
    copies_first = measured.moves_share >= COPY_SHARE
    rereads_first = reread_options_first(
        measured.amdahl_bound, measured.fusion_bound, measured.rereads_share, measured.own_ops
    )
    # the graph stage before the kernels, on the knob winner's compile where there is one (options stack)
    first = None if graph_run is None else graph_first(run, graph_run, nodes, copies_first, rereads_first)
    promoted = first.promoted if first is not None else None
    if first is not None:
        report.graphs = first.graphs
        report.graph_compile = compiled_variants(run)
    if promoted is not None:  # the kernels are searched on the graph winner's compile
        report.options = dict(run.spec.options)
        try:
            analysis = analysis_of(run, "analysis/graph-options")
        except KerneloptError as exc:  # the winner itself passed its full re-check: it stays, alone
            run.emit("warning", {"message": f"no kernel searched on the graph winner's compile: {exc}"})
            targets = []
        else:
            targets, skipped = select_targets(
                [asdict(launch) for launch in analysis.report.launches], _share_of_us(run, analysis.report)
            )
            report.skipped = [(s.name, s.reason) for s in skipped]
    for extra in targets[run.max_targets :]:
        report.skipped.append((extra.name, f"beyond --max-targets {run.max_targets}"))
    run.emit("targets", {"targets": [t.name for t in targets[: run.max_targets]], "skipped": report.skipped})
    runners_up: dict[str, list[Winner]] = {}  # per kernel: the next-best passed candidates
    for target in targets[: run.max_targets]:
        result, next_best = _search_kernel(run, nodes, target, analysis)
        report.kernels.append(result)
        runners_up[target.name] = next_best
        evaluated = [n for n in nodes.evaluated(target.name) if n.operator != "root"]
        report.evaluations += len(evaluated)
        report.gpu_s += gpu_seconds(evaluated)
    if graph_run is not None:
        for g in report.graphs:
            evaluated = [n for n in nodes.evaluated(graph_target(g.graph)) if n.operator != "root"]
            report.evaluations += len(evaluated)
            report.gpu_s += gpu_seconds(evaluated)
    on_top = stacked(knobs if knobs and knobs["used"] else None, promoted)
    finalize(report, run, analysis, runners_up, base_options if on_top else None)
    if on_top:
        on_top_of_options(report, on_top, base)
    return report


def _time_stock_modes(
    report: OptimizeReport,
    path: str,
    config: Settings,
    seed: int,
    overrides: dict[str, Any],
    emit: Any,
    train: bool = False,
    problem: Problem | None = None,
    export_to: str | Path | None = None,
) -> None:
    """Each stock mode against the delivered result (or the default compile), and the best of them;
    the default among them where the search built on another mode (the run itself timed that one).
    With ``problem``, a CUDA-graph mode that runs the result faster is delivered with it, or as it is
    to ``export_to`` when nothing was exported (:func:`~kernelopt.pipeline.stock_modes.settle_run_mode`)."""
    modes = config.stock_modes.split(",")
    if not report.on_default:
        modes = ["default", *modes]
    report.stock = time_stock_modes(
        path, modes, report.exported, emit, seed=seed, overrides=overrides, train=train, known=reused_stock(report)
    )
    if problem is not None:
        settle_run_mode(report, report.stock, lambda: problem, export_to, config.margin, seed, config.cuda_graphs)
    best = best_stock_for(report, report.stock)
    if best is not None:
        report.best_stock_mode, _ms, report.best_stock_speedup = best


def _search_kernel(
    run: RunContext, nodes: NodeStore, target: Target, analysis: ProblemAnalysis
) -> tuple[KernelResult, list[Winner]]:
    """One kernel's search; returns its result and the next-best passed candidates (for the re-check)."""
    assert run.peak is not None  # set by the analysis
    peak = run.peak
    source = analysis.kernels[target.name].source
    kernel = triton_kernel_def(target.name, source)
    root = Candidate(target.name, "root", source=source, config=analysis.configs.get(target.name))
    evaluator = WorkerEvaluator(run.worker, run.spec, target.name, run.settings, peak, run.timeout_s)
    facts = run.worker.call(f"{SESSION}:kernel_facts", asdict(run.spec), target.name, peak, timeout_s=run.timeout_s)
    min_us = facts.value.get("min_time_us") if facts.ok else None
    launch = facts.value.get("launch") if facts.ok else None
    counters = (
        ncu_counters(run.store, run.run_id, run.worker, run.spec, target.name, run.emit) if run.uses("llm") else None
    )
    tuned = (
        inductor_tuned(run.store, run.run_id, run.worker, run.spec, target.name, peak, run.timeout_s, run.emit)
        if run.uses("launch-config")
        else None
    )
    variants = structural_variants_of(run, target.name) if run.uses(STRUCTURAL_OPERATOR) else None

    def context(history: list[Node]) -> SearchContext:
        return SearchContext(
            target=target.name,
            kernel=kernel,
            root_source=root.source,
            root_config=root.config,
            nodes=history,
            rng=random.Random(run.seed + len(history)),
            facts={
                "time_us": target.time_us,
                "min_time_us": min_us,
                "peak_gbps": peak,
                "ncu": counters,
                "inductor_tuned_config": tuned,
                "structural_variants": variants,
                "launch": launch,
            },
        )

    def on_event(kind: str, data: dict[str, Any]) -> None:
        run.emit(kind, {**data, "kernel": target.name})

    run.emit("stage", {"stage": f"search on {target.name}"})
    engine = SearchEngine(
        nodes,
        target.name,
        root,
        run.ops,
        run.selection,
        run.budget,
        evaluator,
        context,
        on_event=on_event,
        seed=run.seed,
    )
    outcome = engine.run()
    evaluated = [n for n in nodes.evaluated(target.name) if n.operator != "root"]
    passed = sorted(
        (n for n in evaluated if n.result and n.result.passed and (n.fitness or 0.0) > 1.0),
        key=lambda n: n.fitness or 0.0,
        reverse=True,
    )
    winner = winner_of(passed[0]) if passed else None
    result = KernelResult(
        name=target.name,
        before_us=target.time_us,
        after_us=winner.kernel_time_us if winner else None,
        speedup=(passed[0].fitness or 1.0) if winner else 1.0,
        evaluations=outcome.evaluations,
        failures_by_gate=outcome.failures_by_gate,
        stop_reason=outcome.stop_reason,
        best=winner,
        inductor_tuned=tuned,
        stage_medians_s=stage_medians(evaluated),
    )
    return result, [winner_of(n) for n in passed[1:RECHECK_ATTEMPTS]]
