"""``kernelopt optimize``: a verified faster model, or the compiler's baseline back.

The run: analyze the compiled model in a persistent evaluation worker (one
capture for the whole run), pick the kernels whose headroom can buy something
end to end, search each with the chosen operators (every candidate through the
four gates, in the worker), then swap all winners in together, verify the
re-stitched model once more and export it. Nothing is exported when nothing
passes: the user keeps ``torch.compile``'s model. Every node is in the store;
``resume`` continues a killed run without repeating a finished evaluation.

Longer than most modules: the run's stages (analyze, targets, search, knob search,
re-check, final check) read in order here; each stage's work lives in its layer.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelopt.capture.compat import mode_options
from kernelopt.capture.output_code import source_hash, triton_kernel_def
from kernelopt.capture.swap import KernelAddress
from kernelopt.config import Settings, default_of, resolve
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.records import FinalCheck, ProblemAnalysis
from kernelopt.evaluate.session import GateSettings, ProblemSpec, final_settings, search_settings
from kernelopt.measure.environment import device_label, versions
from kernelopt.pipeline.evaluator import (
    PER_CANDIDATE_TIMEOUT_S,
    SESSION,
    WorkerEvaluator,
    compile_cache_env,
    failure_of,
    gpu_seconds,
    result_of,
    stage_medians,
)
from kernelopt.pipeline.records import KernelResult, OptimizeReport, Winner
from kernelopt.pipeline.stock_modes import SEARCH_BASES, best_stock_for, choose_base_mode, time_stock_modes
from kernelopt.problem import load_problem
from kernelopt.search.candidate import MODEL_TARGET, Candidate, EvaluationResult
from kernelopt.search.engine import SearchEngine
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import DEFAULT_OPERATORS, Operator, SearchContext, make_operators
from kernelopt.search.policy import SelectionPolicy, make_policy
from kernelopt.search.structural import STRUCTURAL_OPTIONS
from kernelopt.search.targets import Target, headroom_elsewhere, select_targets
from kernelopt.search.termination import Budget
from kernelopt.store import Store
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker

KNOB_OPERATOR = "compiler-knobs"
STRUCTURAL_OPERATOR = "structural"
RECHECK_ATTEMPTS = 3  # passed candidates per kernel the full re-check may try, best first
EVAL_DEVICE = "cuda"  # where whole-model candidates are evaluated (the CPU tests use the CPU)
KNOB_EVALUATIONS: int = default_of(
    "knob_budget"
)  # each is two full compiles in a fresh process (a run's config overrides it)


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
    llm: str | None = None,
    llm_config: str | Path | None = None,
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

    problem = load_problem(problem_path, overrides=sizes, train=train)
    require_readable(problem.path, "the problem file")
    budget = budget or Budget(max_evaluations=config.budget, patience=config.patience)
    # The search screens and uses one seed per gate; winners are evaluated again in full
    # (final_settings) and timed end to end once, together, in the final verification.
    settings = settings or search_settings(config)
    ops = make_operators(list(operators))
    selection = make_policy(policy)
    label = device_label()
    if resume_run is not None:
        run = store.run(resume_run)
        if run.kind != "optimize" or run.problem != problem.name:
            raise KerneloptError(
                f"run {resume_run} is a {run.kind} run of {run.problem}, not an optimize run of {problem.name}"
            )
        if bool(run.args.get("train")) != train:
            mode = "--train" if run.args.get("train") else "no --train"
            raise KerneloptError(f"run {resume_run} was started with {mode}: resume it the same way")
        run_id = resume_run
    else:
        run_id = store.start_run(
            "optimize",
            problem.name,
            label,
            versions(),
            {
                "operators": list(operators),
                "policy": policy,
                "budget": asdict(budget),
                "seed": seed,
                "settings": config.values(),
                "train": train,
            },
        )
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

                client = make_client(llm, store=store, run_id=run_id, config=llm_config)  # a bad key or model: here
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
        report.base_mode_reason = base["reason"]
        report.options = report.options or (dict(spec.options) or None)
        report.llm_usage = usage
        report.warnings = warnings
        report.wall_s = time.monotonic() - started
        target = Path(export_path or f"{problem.path.stem}.kopt.json")
        if report.final_reason.startswith("verified"):
            replacements = [
                Replacement(KernelAddress.from_dict(k.best.address or {}), k.best.source)
                for k in report.kernels
                if k.best is not None
            ]
            options = report.options or {}
            report.exported = str(
                export_model(target, problem, replacements, report.to_dict(), seed=seed, options=options)
            )
            _keep_tuned(store, run_id, label, report)
        if stock_modes:
            _time_stock_modes(report, str(problem.path), config, seed, dict(problem.overrides), emit, train)
        store.add_measurement(run_id, "report", report.to_dict())
    store.finish_run(run_id)
    if write_report:
        _write_report(report, store, Path(report_path) if report_path else None, target, emit)
    return report


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
    from kernelopt.report import report_beside, try_write, write_run_report

    written, error = try_write(
        lambda: write_run_report(store, report.run_id, path or report_beside(export)),
        f"run {report.run_id}",
        f"try again with kernelopt report {report.run_id}",
    )
    if error is not None:
        emit("warning", {"message": error})
    report.report_path = str(written) if written else None


def _keep_tuned(store: Store, run_id: int, label: str, report: OptimizeReport) -> None:
    """The delivered kernels into the store's cache, for ``torch.compile(backend="kernelopt")``."""
    import torch

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


@dataclass
class RunContext:
    """What every stage of one optimize run shares: where it records, how it evaluates, its limits."""

    name: str  # the problem's name
    store: Store
    run_id: int
    worker: PersistentWorker  # the evaluation worker holding the run's one capture
    spec: ProblemSpec
    peak: float | None  # the device's measured copy bandwidth (GB/s), None until the analysis measures it
    label: str  # the device
    ops: list[Operator]
    selection: SelectionPolicy
    budget: Budget
    settings: GateSettings  # the search's gates (the re-check's come from final_settings)
    max_targets: int
    timeout_s: float
    seed: int = 0
    emit: Callable[[str, dict[str, Any]], None] = lambda kind, data: None
    config: Settings | None = None
    base_mode: str = "default"  # the stock mode the capture compiles (spec.options are its options)

    def uses(self, operator: str) -> bool:
        return any(op.name == operator for op in self.ops)


def _analysis(run: RunContext, key: str = "analysis") -> ProblemAnalysis:
    """The compiled model's analysis, once per run and capture (kept in the store under ``key``: a
    resumed run reads it back)."""
    known = run.store.measurements(run.run_id, key).get(key)
    if known is None:
        run.emit("stage", {"stage": "analyze"})
        outcome = run.worker.call(f"{SESSION}:analyze_problem", asdict(run.spec), run.peak, timeout_s=run.timeout_s)
        if not outcome.ok:
            raise KerneloptError(
                f"{run.name}: the compiled model could not be analyzed: {outcome.status}: {outcome.reason}"
            )
        known = outcome.value
        run.store.add_measurement(run.run_id, key, known)
    analysis = ProblemAnalysis.from_dict(known)
    if run.peak is None:
        run.store.set_device_bandwidth(run.label, analysis.report.peak_gbps, {"source": "optimize analysis"})
    run.peak = analysis.report.peak_gbps
    return analysis


def _optimize(run: RunContext) -> OptimizeReport:
    base = _analysis(run)
    nodes = NodeStore(run.store, run.run_id)
    knobs = _search_knobs(run, nodes, base.report.compiled_ms * 1000.0) if run.uses(KNOB_OPERATOR) else None
    analysis = _analysis(run, "analysis/options") if knobs and knobs["used"] else base
    measured = analysis.report
    total_us = measured.compiled_ms * 1000.0
    targets, skipped = select_targets([asdict(launch) for launch in measured.launches], total_us)
    report = OptimizeReport(
        problem=run.name,
        run_id=run.run_id,
        device=measured.device,
        eager_ms=measured.eager_ms,
        compiled_ms=measured.compiled_ms,
        amdahl_bound=measured.amdahl_bound,
        gpu_busy=measured.gpu_busy,
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
    for extra in targets[run.max_targets :]:
        report.skipped.append((extra.name, f"beyond --max-targets {run.max_targets}"))
    for note in headroom_elsewhere(
        measured.amdahl_bound, measured.fusion_bound, measured.launch_overhead_bound, measured.gpu_busy
    ):
        run.emit("warning", {"message": note})
    run.emit("targets", {"targets": [t.name for t in targets[: run.max_targets]], "skipped": report.skipped})
    runners_up: dict[str, list[Winner]] = {}  # per kernel: the next-best passed candidates
    for target in targets[: run.max_targets]:
        result, next_best = _search_kernel(run, nodes, target, analysis)
        report.kernels.append(result)
        runners_up[target.name] = next_best
        evaluated = [n for n in nodes.evaluated(target.name) if n.operator != "root"]
        report.evaluations += len(evaluated)
        report.gpu_s += gpu_seconds(evaluated)
    _finalize(report, run, analysis, runners_up)
    if knobs and knobs["used"]:
        _on_top_of_options(report, knobs, base)
    return report


def _on_top_of_options(report: OptimizeReport, knobs: dict[str, Any], base: ProblemAnalysis) -> None:
    """The kernels were searched and verified on the options' compile: the result over the base mode's
    compile is the options' speedup (timed interleaved against the base) times the kernels' (timed
    interleaved against the options' compile). A product of two medians has no interquartile range."""
    over_options = report.speedup_vs_compile if report.winners else 1.0
    kernels = (
        f"{len(report.winners)} kernel(s) replaced on top ({over_options:.3f}x)"
        if report.winners
        else ("no kernel replacement passed on top")
    )
    report.speedup_vs_compile = knobs["speedup"] * over_options
    report.speedup_vs_compile_iqr = None
    report.compiled_ms = base.report.compiled_ms
    report.eager_ms = base.report.eager_ms
    if not report.winners:
        report.optimized_ms = base.report.compiled_ms / knobs["speedup"]
        report.final_compiled_ms = None
    report.speedup_vs_eager = report.eager_ms / (report.optimized_ms or report.compiled_ms)
    report.final_reason = (
        f"verified: Inductor options {knobs['best_options']} ({knobs['speedup']:.3f}x over the {report.base_mode} "
        f"compile, timed interleaved) and {kernels}: {report.speedup_vs_compile:.3f}x"
    )


def _time_stock_modes(
    report: OptimizeReport,
    path: str,
    config: Settings,
    seed: int,
    overrides: dict[str, Any],
    emit: Any,
    train: bool = False,
) -> None:
    """Each stock mode against the delivered result (or the default compile), and the best of them;
    the default among them where the search built on another mode (the run itself timed that one)."""
    modes = config.stock_modes.split(",")
    if not report.on_default:
        modes = ["default", *modes]
    report.stock = time_stock_modes(path, modes, report.exported, emit, seed=seed, overrides=overrides, train=train)
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
    counters = _counters(run.store, run.run_id, run.spec, target.name, run.emit) if run.uses("llm") else None
    tuned = (
        _inductor_tuned(run.store, run.run_id, run.worker, run.spec, target.name, peak, run.timeout_s, run.emit)
        if run.uses("launch-config")
        else None
    )
    variants = _structural(run, target.name) if run.uses(STRUCTURAL_OPERATOR) else None

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
    winner = _winner(passed[0]) if passed else None
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
    return result, [_winner(n) for n in passed[1:RECHECK_ATTEMPTS]]


def _search_knobs(run: RunContext, nodes: NodeStore, total_us: float) -> dict[str, Any]:
    """The model target, first: Inductor options judged end to end against the base compile, each
    variant in a fresh process. A variant that passes every gate faster becomes the capture the
    kernel search runs on (``run.spec`` gains its options), so kernels are searched on what the
    options compiled. At most ``knob_budget`` evaluations (the run's config; None:
    :data:`KNOB_EVALUATIONS`). A resumed run reads the choice back instead of searching again."""
    from kernelopt.workers import run_isolated

    known = run.store.measurements(run.run_id, "knobs").get("knobs")
    if known is not None:
        if known["used"]:
            run.spec = dataclasses.replace(run.spec, options={**run.spec.options, **known["best_options"]})
        return dict(known)

    def evaluate(batch: list[Node]) -> Iterator[tuple[Node, EvaluationResult]]:
        for node in batch:  # a fresh process each: every variant is a full compile
            outcome = run_isolated(
                f"{SESSION}:evaluate_knobs",
                asdict(run.spec),
                node.candidate.options or {},
                run.settings.to_dict(),
                EVAL_DEVICE,
                timeout_s=run.timeout_s + PER_CANDIDATE_TIMEOUT_S,
                env=compile_cache_env(run.config),
            )
            yield node, result_of(outcome.value) if outcome.ok else failure_of(outcome)

    def context(history: list[Node]) -> SearchContext:
        return SearchContext(
            target=MODEL_TARGET, nodes=history, rng=random.Random(run.seed), facts={"time_us": total_us}
        )

    cap = run.config.knob_budget if run.config is not None else KNOB_EVALUATIONS
    knob_budget = dataclasses.replace(run.budget, max_evaluations=min(run.budget.max_evaluations or cap, cap))
    run.emit("stage", {"stage": "compiler-knob search"})
    engine = SearchEngine(
        nodes,
        MODEL_TARGET,
        Candidate(MODEL_TARGET, "root", options={}),
        run.ops,
        run.selection,
        knob_budget,
        evaluate,
        context,
        on_event=lambda kind, data: run.emit(kind, {**data, "kernel": MODEL_TARGET}),
        seed=run.seed,
    )
    outcome = engine.run()
    best = outcome.best
    evaluated = [n for n in nodes.evaluated(MODEL_TARGET) if n.operator != "root"]
    won = best is not None and best.operator != "root" and best.result is not None and (best.fitness or 0.0) > 1.0
    record: dict[str, Any] = {
        "best_options": best.candidate.options if best else None,
        "speedup": best.fitness if won and best else 1.0,
        "evaluations": len(evaluated),
        "gpu_s": gpu_seconds(evaluated),
        "stop_reason": outcome.stop_reason,
        "used": won,
        "failures_by_gate": outcome.failures_by_gate,
    }
    if won:
        assert best is not None and best.result is not None
        record["comparison"] = best.result.measurements["kernel_comparison"]
        run.spec = dataclasses.replace(run.spec, options={**run.spec.options, **(best.candidate.options or {})})
    run.store.add_measurement(run.run_id, "knobs", record)
    return record


def _inductor_tuned(
    store: Store,
    run_id: int,
    worker: PersistentWorker,
    spec: ProblemSpec,
    kernel: str,
    peak: float | None,
    timeout_s: float,
    emit,
) -> dict[str, Any] | None:
    """Inductor's coordinate-descent config for the kernel, once per run (kept in the store).

    The launch-config search proposes it first, so the search starts from Inductor's
    tuned result and goes on from there. A failure to tune is said, not hidden: the
    search then starts from Inductor's heuristic config alone."""
    key = f"inductor-tuned/{kernel}"
    known = store.measurements(run_id, key).get(key)
    if known is None:
        emit("stage", {"stage": f"Inductor coordinate descent on {kernel}"})
        outcome = worker.call(f"{SESSION}:inductor_tuned_config", asdict(spec), kernel, peak, timeout_s=timeout_s)
        known = {
            "config": outcome.value if outcome.ok else None,
            "reason": None if outcome.ok else f"{outcome.status}: {outcome.reason}",
        }
        store.add_measurement(run_id, key, known)
        if not outcome.ok:
            emit(
                "warning",
                {
                    "message": f"Inductor's coordinate descent failed on {kernel} ({known['reason']}); "
                    "the search starts from its heuristic config"
                },
            )
    return known["config"]


def _structural(run: RunContext, kernel: str) -> list[dict[str, Any]]:
    """The kernel as Inductor writes it under each structural option set, once per run (kept in the
    store); the ones it could not produce are said in one warning line each."""
    key = f"structural/{kernel}"
    known = run.store.measurements(run.run_id, key).get(key)
    if known is None:
        run.emit("stage", {"stage": f"structural variants of {kernel}"})
        outcome = run.worker.call(
            f"{SESSION}:structural_variants",
            asdict(run.spec),
            kernel,
            run.peak,
            [dict(o) for o in STRUCTURAL_OPTIONS],
            timeout_s=run.timeout_s * 4,  # one compile per option set
        )
        known = {
            "variants": outcome.value if outcome.ok else [],
            "reason": None if outcome.ok else f"{outcome.status}: {outcome.reason}",
        }
        run.store.add_measurement(run.run_id, key, known)
        if not outcome.ok:
            run.emit("warning", {"message": f"no structural variants of {kernel}: {known['reason']}"})
    return list(known["variants"])


def _counters(store: Store, run_id: int, spec: ProblemSpec, kernel: str, emit) -> dict[str, float] | None:
    """Nsight Compute metrics of the kernel's original version for the Analyst, once per run (kept in the store)."""
    import json
    import sys

    from kernelopt.measure.ncu import kernel_metrics

    key = f"ncu/{kernel}"
    known = store.measurements(run_id, key).get(key)
    if known is None:
        emit("stage", {"stage": f"Nsight Compute on {kernel}"})
        metrics, reason = kernel_metrics(
            [sys.executable, "-m", "kernelopt.evaluate.ncu_probe", json.dumps(asdict(spec))], kernel
        )
        known = {"metrics": metrics, "reason": reason}
        store.add_measurement(run_id, key, known)
        if metrics is None:
            emit("warning", {"message": f"no hardware counters for {kernel}: {reason}"})
    return known["metrics"]


def _winner(node: Node) -> Winner:
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


def _recheck(
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


def _finalize(
    report: OptimizeReport, run: RunContext, analysis: ProblemAnalysis, runners_up: dict[str, list[Winner]]
) -> None:
    """Re-check each winner in full (the run's full seeds), swap them in together and verify;
    fall back to the best single winner; else the baseline."""
    settings = final_settings(run.settings, run.config)
    report.optimized_ms = report.compiled_ms
    report.speedup_vs_eager = report.eager_ms / report.compiled_ms
    _recheck(report, run, settings, runners_up)
    winners = report.winners
    if not winners:
        report.final_reason = "no candidate passed all four gates faster than the compiler: the baseline stays"
        return
    for k in winners:
        assert k.best is not None
        info = analysis.kernels[k.name]
        k.best.address = {"graph": info.graph, "name": k.name, "sha256": source_hash(info.source)}
    attempts = [winners] + ([[max(winners, key=lambda k: k.speedup)]] if len(winners) > 1 else [])
    for group in attempts:
        run.emit("stage", {"stage": "final verification", "kernels": [k.name for k in group]})
        payload = [{"address": k.best.address, "source": k.best.source} for k in group if k.best is not None]
        outcome = run.worker.call(
            f"{SESSION}:verify_together",
            asdict(run.spec),
            payload,
            settings.to_dict(),
            run.peak,
            timeout_s=run.timeout_s,
        )
        if not outcome.ok:
            report.final_reason = f"final verification failed: {outcome.status}: {outcome.reason}"
            continue
        final = FinalCheck.from_dict(outcome.value)
        if final.faster:
            cmp = final.comparison
            assert cmp is not None
            report.speedup_vs_compile = cmp["speedup"]
            report.speedup_vs_compile_iqr = (cmp["speedup_q1"], cmp["speedup_q3"])
            report.optimized_ms = cmp["candidate"]["median_ms"]
            report.final_compiled_ms = cmp["baseline"]["median_ms"]
            if final.vs_eager:
                report.speedup_vs_eager = final.vs_eager["speedup"]
                q1, q3 = final.vs_eager.get("speedup_q1"), final.vs_eager.get("speedup_q3")
                report.speedup_vs_eager_iqr = (q1, q3) if q1 is not None and q3 is not None else None
            for k in report.kernels:
                if k not in group:
                    k.best = None
            report.final_reason = f"verified: {len(group)} kernel(s) replaced, re-stitched model passed the model gate"
            return
        report.final_reason = f"re-stitched model rejected: {final.reason}"
    for k in report.kernels:
        k.best = None
    report.final_reason += "; the baseline stays"
