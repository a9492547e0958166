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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.capture.output_code import source_hash, triton_kernel_def
from kernelopt.capture.swap import KernelAddress
from kernelopt.config import Settings, default_of, resolve
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.errors import KerneloptError
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
from kernelopt.problem import load_problem
from kernelopt.search.candidate import MODEL_TARGET, Candidate, EvaluationResult
from kernelopt.search.engine import SearchEngine
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import DEFAULT_OPERATORS, SearchContext, make_operators
from kernelopt.search.policy import make_policy
from kernelopt.search.targets import select_targets
from kernelopt.search.termination import Budget
from kernelopt.store import Store
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker

KNOB_OPERATOR = "compiler-knobs"
RECHECK_ATTEMPTS = 3  # passed candidates per kernel the full re-check may try, best first
EVAL_DEVICE = "cuda"  # where whole-model candidates are evaluated (the CPU tests use the CPU)
KNOB_EVALUATIONS: int = default_of(
    "knob_budget"
)  # each is two full compiles in a fresh process (a run's config overrides it)


@dataclass
class KernelResult:
    name: str
    before_us: float
    after_us: float | None
    speedup: float
    evaluations: int
    failures_by_gate: dict[str, int]
    stop_reason: str
    best: dict[str, Any] | None = None  # operator, note, config, verdicts of the winner
    final_check: str = ""  # the winner's re-evaluation with every seed and no screen
    inductor_tuned: dict[str, Any] | None = None  # Inductor's coordinate-descent config, the search's first proposal
    stage_medians_s: dict[str, float] = field(default_factory=dict)  # where an evaluation's time went (throughput)


@dataclass
class OptimizeReport:
    problem: str
    run_id: int
    device: str
    eager_ms: float
    compiled_ms: float
    amdahl_bound: float
    kernels: list[KernelResult] = field(default_factory=list)
    gpu_busy: float = 1.0  # kernel time over the compiled forward's time (analysis)
    launch_overhead_bound: float = 1.0  # the speedup removing every gap between launches could buy
    skipped: list[tuple[str, str]] = field(default_factory=list)
    speedup_vs_compile: float = 1.0
    speedup_vs_compile_iqr: tuple[float, float] | None = None
    speedup_vs_eager: float | None = None
    optimized_ms: float | None = None
    final_compiled_ms: float | None = None  # the baseline timed interleaved with the optimized model
    final_reason: str = ""
    exported: str | None = None
    evaluations: int = 0
    gpu_s: float = 0.0
    wall_s: float = 0.0
    llm_usage: dict[str, Any] | None = None  # calls, tokens, cost, cache hits of the LLM agents
    options: dict[str, Any] | None = None  # Inductor options of the delivered model, when knobs won
    knobs: dict[str, Any] | None = None  # the compiler-knob search: best options, speedup, evaluations
    warnings: list[str] = field(default_factory=list)  # what the run could not do as asked (no counters, no tuning)

    @property
    def evaluations_per_gpu_minute(self) -> float | None:
        return 60.0 * self.evaluations / self.gpu_s if self.gpu_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evaluations_per_gpu_minute"] = self.evaluations_per_gpu_minute
        return d


def require_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        raise KerneloptError("kernelopt optimize needs an NVIDIA GPU with CUDA; torch sees none")


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
) -> OptimizeReport:
    """Search faster kernels for one problem; export the verified model, or keep the baseline.

    ``budget``, ``settings`` (the search's gates), ``max_targets`` and ``timeout_s`` left
    as None come from ``config`` (default: :func:`~kernelopt.config.load_settings`) with
    ``effort`` and the explicit ones on top."""
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

    problem = load_problem(problem_path, overrides=sizes)
    require_readable(problem.path, "the problem file")
    budget = budget or Budget(max_evaluations=config.budget, patience=config.patience)
    # The search screens and uses one seed per gate; winners are evaluated again in full
    # (final_settings) and timed end to end once, together, in the final verification.
    settings = settings or search_settings(config)
    ops = make_operators(list(operators))
    selection = make_policy(policy)
    spec = ProblemSpec(str(Path(problem_path).resolve()), dict(problem.overrides), seed, {})
    label = device_label()
    if resume_run is not None:
        run = store.run(resume_run)
        if run.kind != "optimize" or run.problem != problem.name:
            raise KerneloptError(
                f"run {resume_run} is a {run.kind} run of {run.problem}, not an optimize run of {problem.name}"
            )
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
            },
        )
    emit("run", {"run_id": run_id, "problem": problem.name})
    peak = store.device_bandwidth(label)
    client = None
    if llm is not None or llm_config is not None:
        from kernelopt.agents.factory import make_client
        from kernelopt.search.llm_operator import LLMOperator

        client = make_client(llm, store=store, run_id=run_id, config=llm_config)  # a bad key or model stops here
        ops = [*ops, LLMOperator(client, store, run_id, device=label)]
    with PersistentWorker(env=compile_cache_env(config)) as worker:
        try:
            report = _optimize(
                problem.name,
                store,
                run_id,
                worker,
                spec,
                peak,
                label,
                ops,
                selection,
                budget,
                settings,
                config.max_targets,
                config.eval_timeout_s,
                seed,
                emit,
                config=config,
            )
        except BaseException as exc:
            store.finish_run(run_id, "failed", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise
        finally:
            usage = asdict(client.usage()) if client is not None else None
            if client is not None:
                client.close()
    report.llm_usage = usage
    report.warnings = warnings
    report.wall_s = time.monotonic() - started
    if report.final_reason.startswith("verified"):
        target = Path(export_path or f"{problem.path.stem}.kopt.json")
        replacements = [
            Replacement(KernelAddress.from_dict(k.best["address"]), k.best["source"]) for k in report.kernels if k.best
        ]
        options = report.options or {}
        report.exported = str(export_model(target, problem, replacements, report.to_dict(), seed=seed, options=options))
    store.add_measurement(run_id, "report", report.to_dict())
    store.finish_run(run_id)
    return report


def _optimize(
    name,
    store,
    run_id,
    worker,
    spec,
    peak,
    label,
    ops,
    selection,
    budget,
    settings,
    max_targets,
    timeout_s,
    seed,
    emit,
    config: Settings | None = None,
):
    known = store.measurements(run_id, "analysis").get("analysis")
    if known is None:
        emit("stage", {"stage": "analyze"})
        outcome = worker.call(f"{SESSION}:analyze_problem", asdict(spec), peak, timeout_s=timeout_s)
        if not outcome.ok:
            raise KerneloptError(
                f"{name}: the compiled model could not be analyzed: {outcome.status}: {outcome.reason}"
            )
        known = outcome.value
        store.add_measurement(run_id, "analysis", known)
        if peak is None:
            store.set_device_bandwidth(label, known["peak_gbps"], {"source": "optimize analysis"})
    peak = known["peak_gbps"]
    total_us = known["compiled_ms"] * 1000.0
    targets, skipped = select_targets(known["launches"], total_us)
    report = OptimizeReport(
        problem=name,
        run_id=run_id,
        device=known["device"],
        eager_ms=known["eager_ms"],
        compiled_ms=known["compiled_ms"],
        amdahl_bound=known["amdahl_bound"],
        gpu_busy=known.get("gpu_busy", 1.0),
        launch_overhead_bound=known.get("launch_overhead_bound", 1.0),
        skipped=[(s.name, s.reason) for s in skipped],
    )
    for extra in targets[max_targets:]:
        report.skipped.append((extra.name, f"beyond --max-targets {max_targets}"))
    emit("targets", {"targets": [t.name for t in targets[:max_targets]], "skipped": report.skipped})
    nodes = NodeStore(store, run_id)
    runners_up: dict[str, list[dict[str, Any]]] = {}  # per kernel: the next-best passed candidates
    for target in targets[:max_targets]:
        source = known["kernels"][target.name]["source"]
        kernel = triton_kernel_def(target.name, source)
        root = Candidate(target.name, "root", source=source, config=known["configs"].get(target.name))
        evaluator = WorkerEvaluator(worker, spec, target.name, settings, peak, timeout_s)
        facts = worker.call(f"{SESSION}:kernel_facts", asdict(spec), target.name, peak, timeout_s=timeout_s)
        min_us = facts.value.get("min_time_us") if facts.ok else None
        counters = _counters(store, run_id, spec, target.name, emit) if any(op.name == "llm" for op in ops) else None
        tuned = (
            _inductor_tuned(store, run_id, worker, spec, target.name, peak, timeout_s, emit)
            if any(op.name == "launch-config" for op in ops)
            else None
        )

        def context(
            history: list[Node], _t=target, _k=kernel, _root=root, _min=min_us, _ncu=counters, _tuned=tuned
        ) -> SearchContext:
            return SearchContext(
                target=_t.name,
                kernel=_k,
                root_source=_root.source,
                root_config=_root.config,
                nodes=history,
                rng=random.Random(seed + len(history)),
                facts={
                    "time_us": _t.time_us,
                    "min_time_us": _min,
                    "peak_gbps": peak,
                    "ncu": _ncu,
                    "inductor_tuned_config": _tuned,
                },
            )

        def on_event(kind: str, data: dict[str, Any], _t=target) -> None:
            emit(kind, {**data, "kernel": _t.name})

        emit("stage", {"stage": f"search on {target.name}"})
        engine = SearchEngine(
            nodes, target.name, root, ops, selection, budget, evaluator, context, on_event=on_event, seed=seed
        )
        outcome = engine.run()
        evaluated = [n for n in nodes.evaluated(target.name) if n.operator != "root"]
        passed = sorted(
            (n for n in evaluated if n.result and n.result.passed and (n.fitness or 0.0) > 1.0),
            key=lambda n: n.fitness or 0.0,
            reverse=True,
        )
        winner = _winner(passed[0]) if passed else None
        after = winner["kernel_time_us"] if winner else None
        runners_up[target.name] = [_winner(n) for n in passed[1:RECHECK_ATTEMPTS]]
        report.kernels.append(
            KernelResult(
                name=target.name,
                before_us=target.time_us,
                after_us=after,
                speedup=(passed[0].fitness or 1.0) if winner else 1.0,
                evaluations=outcome.evaluations,
                failures_by_gate=outcome.failures_by_gate,
                stop_reason=outcome.stop_reason,
                best=winner,
                inductor_tuned=tuned,
                stage_medians_s=stage_medians(evaluated),
            )
        )
        report.evaluations += len(evaluated)
        report.gpu_s += gpu_seconds(evaluated)
    _finalize(report, worker, spec, settings, peak, timeout_s, known, emit, runners_up, config)
    if any(op.name == KNOB_OPERATOR for op in ops):
        _search_knobs(report, nodes, spec, ops, selection, budget, settings, timeout_s, seed, total_us, emit, config)
    return report


def _search_knobs(
    report,
    nodes,
    spec,
    ops,
    selection,
    budget,
    settings,
    timeout_s,
    seed,
    total_us,
    emit,
    config: Settings | None = None,
) -> None:
    """The model target: Inductor options judged end to end; they win only if they beat the kernels.
    At most ``knob_budget`` evaluations (``config``'s; None: :data:`KNOB_EVALUATIONS`)."""
    from kernelopt.workers import run_isolated

    def evaluate(batch: list[Node]) -> Iterator[tuple[Node, EvaluationResult]]:
        for node in batch:  # a fresh process each: every variant is a full compile
            outcome = run_isolated(
                f"{SESSION}:evaluate_knobs",
                asdict(spec),
                node.candidate.options or {},
                settings.to_dict(),
                EVAL_DEVICE,
                timeout_s=timeout_s + PER_CANDIDATE_TIMEOUT_S,
                env=compile_cache_env(config),
            )
            yield node, result_of(outcome.value) if outcome.ok else failure_of(outcome)

    def context(history: list[Node]) -> SearchContext:
        return SearchContext(target=MODEL_TARGET, nodes=history, rng=random.Random(seed), facts={"time_us": total_us})

    cap = config.knob_budget if config is not None else KNOB_EVALUATIONS
    knob_budget = dataclasses.replace(budget, max_evaluations=min(budget.max_evaluations or cap, cap))
    emit("stage", {"stage": "compiler-knob search"})
    engine = SearchEngine(
        nodes,
        MODEL_TARGET,
        Candidate(MODEL_TARGET, "root", options={}),
        ops,
        selection,
        knob_budget,
        evaluate,
        context,
        on_event=lambda kind, data: emit(kind, {**data, "kernel": MODEL_TARGET}),
        seed=seed,
    )
    outcome = engine.run()
    best = outcome.best
    evaluated = [n for n in nodes.evaluated(MODEL_TARGET) if n.operator != "root"]
    report.evaluations += len(evaluated)
    report.gpu_s += gpu_seconds(evaluated)
    won = best is not None and best.operator != "root" and best.fitness > max(1.0, report.speedup_vs_compile)
    report.knobs = {
        "best_options": best.candidate.options if best else None,
        "speedup": best.fitness if best else 1.0,
        "evaluations": len(evaluated),
        "stop_reason": outcome.stop_reason,
        "used": won,
        "failures_by_gate": outcome.failures_by_gate,
    }
    if won:
        assert best is not None and best.result is not None  # won: an evaluated, passing node
        cmp = best.result.measurements["kernel_comparison"]
        for k in report.kernels:
            k.best = None  # kernel replacements address the default artifact; the options make another one
        report.options = best.candidate.options
        report.speedup_vs_compile = cmp["speedup"]
        report.speedup_vs_compile_iqr = (cmp["speedup_q1"], cmp["speedup_q3"])
        report.optimized_ms = cmp["candidate"]["median_ms"]
        report.final_compiled_ms = cmp["baseline"]["median_ms"]
        report.speedup_vs_eager = report.eager_ms / report.optimized_ms
        report.final_reason = f"verified: Inductor options {best.candidate.options} beat the default end to end"


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


def _winner(node: Node) -> dict[str, Any]:
    """A passed search node as the report's ``best`` record."""
    assert node.result is not None
    return {
        "operator": node.operator,
        "note": node.candidate.note,
        "config": node.candidate.config,
        "source": node.candidate.source,
        "verdicts": node.result.verdicts,
        "address": None,
        "node": node.id,
        "kernel_time_us": node.result.measurements.get("kernel_time_us"),
        "search_speedup": node.fitness,
    }


def _recheck(report, worker, spec, settings, peak, timeout_s, emit, runners_up=None) -> None:
    """Every winner through the four gates again with all seeds, distributions and full timing.

    The search's gates are lighter, so a winner can fail here; the next-best passed
    candidates of the same kernel (up to :data:`RECHECK_ATTEMPTS` in all) are tried
    in turn, and a kernel none of them survives keeps the compiler's."""
    seeds = f"kernel seeds {list(settings.kernel_seeds)}, model seeds {list(settings.model_seeds)}, {settings.trials} trials"
    for k in report.kernels:
        if not k.best:
            continue
        emit("stage", {"stage": "final gates", "kernel": k.name})
        failures: list[str] = []
        evaluator = WorkerEvaluator(worker, spec, k.name, settings, peak, timeout_s)
        for rank, choice in enumerate([k.best, *(runners_up or {}).get(k.name, [])], start=1):
            result = evaluator.one(choice["source"])
            if result.passed and result.fitness > 1.0:
                earlier = f" (the search's #{rank}; " + "; ".join(failures) + ")" if failures else ""
                k.final_check = f"passed again with {seeds}{earlier}"
                k.best = {**choice, "verdicts": result.verdicts}
                k.speedup = result.fitness
                k.after_us = result.measurements.get("kernel_time_us", choice.get("kernel_time_us"))
                break
            failures.append(f"#{rank} failed: {result.failed_gate}: {result.reason}")
        else:
            k.final_check = f"failed with {seeds}: " + "; ".join(failures)
            k.best = None
            k.speedup = 1.0
            k.after_us = None


def _finalize(
    report, worker, spec, settings, peak, timeout_s, known, emit, runners_up=None, config: Settings | None = None
) -> None:
    """Re-check each winner in full (``config``'s full seeds), swap them in together and verify;
    fall back to the best single winner; else the baseline."""
    settings = final_settings(settings, config)
    report.optimized_ms = report.compiled_ms
    report.speedup_vs_eager = report.eager_ms / report.compiled_ms
    _recheck(report, worker, spec, settings, peak, timeout_s, emit, runners_up)
    winners = [k for k in report.kernels if k.best]
    if not winners:
        report.final_reason = "no candidate passed all four gates faster than the compiler: the baseline stays"
        return
    kernels = known["kernels"]
    for k in winners:
        info = kernels[k.name]
        k.best["address"] = {"graph": info["graph"], "name": k.name, "sha256": source_hash(info["source"])}
    attempts = [winners] + ([[max(winners, key=lambda k: k.speedup)]] if len(winners) > 1 else [])
    for group in attempts:
        emit("stage", {"stage": "final verification", "kernels": [k.name for k in group]})
        payload = [{"address": k.best["address"], "source": k.best["source"]} for k in group]
        outcome = worker.call(
            f"{SESSION}:verify_together", asdict(spec), payload, settings.to_dict(), peak, timeout_s=timeout_s
        )
        if not outcome.ok:
            report.final_reason = f"final verification failed: {outcome.status}: {outcome.reason}"
            continue
        final = outcome.value
        e2e = final.get("end_to_end")
        if final["model"]["passed"] and e2e and e2e["comparison"]["speedup"] > 1.0 and e2e.get("beyond_noise", True):
            cmp = e2e["comparison"]
            report.speedup_vs_compile = cmp["speedup"]
            report.speedup_vs_compile_iqr = (cmp["speedup_q1"], cmp["speedup_q3"])
            report.optimized_ms = cmp["candidate"]["median_ms"]
            report.final_compiled_ms = cmp["baseline"]["median_ms"]
            if final.get("vs_eager"):
                report.speedup_vs_eager = final["vs_eager"]["speedup"]
            for k in report.kernels:
                if k not in group:
                    k.best = None
            report.final_reason = f"verified: {len(group)} kernel(s) replaced, re-stitched model passed the model gate"
            return
        reason = (
            final["model"]["reason"]
            if not final["model"]["passed"]
            else final["evidence"]["reason"]
            if final.get("evidence")
            else "no end-to-end speedup beyond noise"
        )
        report.final_reason = f"re-stitched model rejected: {reason}"
    for k in report.kernels:
        k.best = None
    report.final_reason += "; the baseline stays"
