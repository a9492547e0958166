"""``kernelopt optimize KERNEL_FILE``: a verified faster kernel file, or the user's own back.

The run for a standalone Triton kernel file (:mod:`kernelopt.problem.kernel_file`): the
file's facts and the original's time in a persistent evaluation worker, one search over
the whole file with the kernel-file operators (launch configurations and autotune pins,
eviction hints, the LLM agents), every candidate through the four gates of
:class:`~kernelopt.evaluate.file_session.FileSession`, then the best candidates
evaluated again with every seed and distribution. The first that passes is delivered:
the faster file (``<stem>_kopt.py``, exactly the source that was judged, importable by that name) and its
verification record (``<stem>_kopt.json``: the original's and the delivery's digests,
every verdict, the measured speedup, device and versions). Nothing is delivered when
nothing passes. Every node is in the store, so ``--resume`` continues a killed run.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.agents.roles.coder import FILE
from kernelopt.capture.cuda_kernel import is_cuda_source
from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.config import Settings, resolve
from kernelopt.deliver.kernel_file import RECORD_FORMAT
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.file_helion import HELION_ENV, check_search
from kernelopt.evaluate.file_session import FileSpec
from kernelopt.evaluate.gate_settings import GateSettings, final_settings, search_settings
from kernelopt.measure.environment import device_label, versions
from kernelopt.pipeline.evaluator import PER_CANDIDATE_TIMEOUT_S, WorkerEvaluator, compile_cache_env, gpu_seconds
from kernelopt.pipeline.file_profile import file_ncu_counters
from kernelopt.pipeline.final_check import RECHECK_ATTEMPTS, winner_of
from kernelopt.pipeline.records import Winner
from kernelopt.pipeline.run_context import resumed_sizes
from kernelopt.problem.file_kind import HELION, TRITON
from kernelopt.problem.kernel_file import KernelFile, load_kernel_file
from kernelopt.search.builtin_operators import EvictionPolicyOperator
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.engine import SearchEngine
from kernelopt.search.file_configs import FileLaunchConfigOperator
from kernelopt.search.helion_configs import HelionAutotuneOperator, HelionConfigOperator
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import Operator, SearchContext
from kernelopt.search.policy import make_policy
from kernelopt.search.termination import Budget, SearchState
from kernelopt.store import Store
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker

FILE_SESSION = "kernelopt.evaluate.file_targets"
OPERATORS_BY_KIND: dict[str, dict[str, Callable[[], Operator]]] = {
    TRITON: {"launch-config": FileLaunchConfigOperator, "eviction-policy": EvictionPolicyOperator},
    HELION: {"helion-autotune": HelionAutotuneOperator, "helion-config": HelionConfigOperator},
}
DEFAULT_OPERATORS_BY_KIND = {TRITON: ("launch-config", "eviction-policy"), HELION: ("helion-autotune", "helion-config")}


def file_operators(names: Sequence[str], kind: str = TRITON) -> list[Operator]:
    """The operators of a kernel file's kind by name; one that does not apply is one clear error."""
    known = OPERATORS_BY_KIND[kind]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KerneloptError(
            f"operator(s) {', '.join(unknown)} do not apply to a {kind} kernel file; choose from {', '.join(known)}"
        )
    return [known[n]() for n in names]


def default_operators(kind: str) -> tuple[str, ...]:
    return DEFAULT_OPERATORS_BY_KIND[kind]


class FileEvaluator(WorkerEvaluator):
    """:class:`WorkerEvaluator` for kernel files: the same chunking and crash handling, another session."""

    def __init__(
        self, worker: PersistentWorker, spec: FileSpec, settings: GateSettings, peak: float | None, timeout_s: float
    ) -> None:
        super().__init__(worker, spec, spec.path, settings, peak, timeout_s)  # type: ignore[arg-type]
        self.file_spec = spec

    def _call(self, sources: list[str]):
        return self.worker.call(
            f"{FILE_SESSION}:evaluate_file_candidates",
            asdict(self.file_spec),
            sources,
            self.settings.to_dict(),
            self.peak,
            timeout_s=self.timeout_s + PER_CANDIDATE_TIMEOUT_S * len(sources),
        )


@dataclass
class FileReport:
    """What one kernel-file run found, as the CLI prints it and the store keeps it."""

    name: str
    kind: str
    run_id: int
    device: str
    original_us: float | None
    min_time_us: float | None
    evaluations: int = 0
    failures_by_gate: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""
    final_reason: str = ""
    speedup: float = 1.0
    speedup_iqr: tuple[float, float] = (1.0, 1.0)
    optimized_us: float | None = None
    best: Winner | None = None
    helion: dict[str, Any] | None = None  # a Helion file: per kernel, its default config, the autotuner's choice
    over_helion_tuned: float | None = None  # the delivery against Helion's own autotuned config, where it passed
    exported: str | None = None
    record: str | None = None
    gpu_s: float = 0.0
    wall_s: float = 0.0
    llm_usage: dict[str, Any] | None = None
    kernel: str | None = None  # the kernel a CUDA C++ candidate of this run replaces
    ncu: str | None = None  # what ncu read of that kernel for the agents; None: not read (a warning says why)
    warnings: list[str] = field(default_factory=list)  # every warning the run emitted, kept as a model run keeps them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def optimize_file(
    path: str | Path,
    store: Store,
    *,
    operators: Sequence[str] | None = None,
    policy: str = "beam",
    budget: Budget | None = None,
    settings: GateSettings | None = None,
    export_path: str | Path | None = None,
    resume_run: int | None = None,
    seed: int = 0,
    sizes: dict[str, Any] | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    config: Settings | None = None,
    device: str = "cuda",
    llm: str | None = None,
    llm_config: str | Path | None = None,
    kernel: str | None = None,
) -> FileReport:
    """Search a faster version of a kernel file; deliver it with its record, or keep the original.

    ``export_path``: where the faster file goes (default ``<stem>_kopt.py`` in the working
    directory; the record beside it, ``.json`` for ``.py``). ``device`` is ``cuda`` but in the
    CPU tests, which run Triton's interpreter (``TRITON_INTERPRET=1``). ``llm`` / ``llm_config``
    add the agents, writing whole kernel files or CUDA C++ for the main kernel (Triton files only):
    ``kernel``, or the first one ``launch`` launches."""
    config = resolve(config)
    started = time.monotonic()
    warnings: list[str] = []
    given = on_event or (lambda kind, data: None)

    def notify(kind: str, data: dict[str, Any]) -> None:
        if kind == "warning":
            warnings.append(str(data.get("message", "")))  # in the report too, not only shown
        given(kind, data)

    given_sizes = sizes
    if resume_run is not None:  # a resumed run keeps the sizes it started with (other ones: refused below)
        sizes = resumed_sizes(store, resume_run, None)
    kernel_file = load_kernel_file(path, overrides=sizes)  # a broken file stops here, in one line
    require_readable(kernel_file.path, "the kernel file")
    operators = list(default_operators(kernel_file.kind) if operators is None else operators)
    ops = file_operators(operators, kernel_file.kind)
    if (llm is not None or llm_config is not None) and kernel_file.kind != TRITON:
        raise KerneloptError(
            f"{kernel_file.path}: the LLM agents rewrite Triton kernel files only; leave --llm out for a {kernel_file.kind} file"
        )
    if kernel_file.kind == HELION and "helion-autotune" in operators:
        check_search(config.helion_search)
    main = main_kernel(kernel_file, kernel)
    if kernel is not None and llm is None and llm_config is None:
        raise KerneloptError(
            f"{kernel_file.path}: --kernel {kernel} picks the kernel the LLM agents rewrite; add --llm, or leave "
            "--kernel out"
        )
    label = run_device(device, "kernelopt optimize")  # after the checks of what was asked: a wrong request first
    budget = budget or Budget(max_evaluations=config.budget, patience=config.patience)
    settings = settings or search_settings(config)
    args = {
        "input": kernel_file.kind,
        "path": str(kernel_file.path.resolve()),  # a bench finds the run its killed worker left (unfinished_run)
        "operators": operators,
        "policy": policy,
        "budget": asdict(budget),
        "seed": seed,
        "sizes": dict(sizes or {}),
        "settings": config.values(),
        "kernel": main,
    }
    if resume_run is not None:
        run = store.run(resume_run)
        if run.kind != "optimize" or run.problem != kernel_file.name or run.args.get("input") != kernel_file.kind:
            raise KerneloptError(
                f"run {resume_run} is a {run.kind} run of {run.problem}, not a kernel-file run of {kernel_file.name}"
            )
        resumed_sizes(store, resume_run, given_sizes)  # after the check that it is this file's run
        first = run.args.get("kernel")
        if first is not None and first != main:  # the agents' kernel is the run's, as its sizes are
            if kernel is not None:
                raise KerneloptError(
                    f"run {resume_run} was started with --kernel {first}: resume it with the same, or leave it out"
                )
            main = args["kernel"] = main_kernel(kernel_file, first)
        old = store.measurements(resume_run, "helion").get("helion")
        if old is not None and "kernels" not in old:  # one config per run, before every kernel was tuned
            raise KerneloptError(
                f"run {resume_run} recorded one Helion config for the whole file (an older kernelopt); its "
                f"nodes cannot be read as one config per kernel: start a new run of {kernel_file.name} "
                "(leave out --resume)"
            )
        run_id = resume_run
    else:
        run_id = store.start_run("optimize", kernel_file.name, label, versions(), args)
    spec = FileSpec(str(kernel_file.path.resolve()), dict(kernel_file.overrides), seed, device, main)
    with store.recording(run_id):
        notify("run", {"run_id": run_id, "problem": kernel_file.name})
        client = None
        if llm is not None or llm_config is not None:
            from kernelopt.agents.factory import make_client
            from kernelopt.search.llm_operator import LLMOperator

            client = make_client(llm, store=store, run_id=run_id, config=llm_config)  # a bad key or model: here
            ops = [*ops, LLMOperator(client, store, run_id, device=label, target=FILE)]
            operators = [*operators, "llm"]
        try:
            report = _run(
                kernel_file,
                store,
                run_id,
                spec,
                ops,
                operators,
                policy,
                budget,
                settings,
                config,
                label,
                seed,
                device,
                notify,
            )
            report.llm_usage = asdict(client.usage()) if client is not None else None
            report.warnings = warnings
        finally:
            if client is not None:
                client.close()
        if report.best is not None:
            report.exported, report.record = deliver(kernel_file.path, kernel_file.source, report, export_path, args)
        report.wall_s = time.monotonic() - started
        store.add_measurement(run_id, "file_report", report.to_dict())
    store.finish_run(run_id)
    return report


def main_kernel(kernel_file: KernelFile, kernel: str | None = None) -> str | None:
    """The kernel of a Triton file the agents are shown and a CUDA C++ candidate replaces: ``kernel``, or the
    first that ``launch`` launches (None for a Helion file, whose kernels are all tuned). A ``kernel`` the
    file does not launch is one line naming the file, the name and the kernels it has."""
    from kernelopt.verify.static_file_cuda import launched_kernels

    path = kernel_file.path
    if kernel_file.kind != TRITON:
        if kernel is not None:
            raise KerneloptError(
                f"{path}: --kernel picks the Triton kernel the LLM agents rewrite; this {kernel_file.kind} "
                "file's kernels are all tuned: leave --kernel out"
            )
        return None
    launched = launched_kernels(kernel_file.source)
    if kernel is None:
        return launched[0] if launched else kernel_file.kernels[0]
    if kernel not in kernel_file.kernels:
        raise KerneloptError(
            f"{path}: --kernel {kernel}: the file defines no @triton.jit kernel of that name; "
            f"it defines {', '.join(kernel_file.kernels)}"
        )
    if kernel not in launched:
        raise KerneloptError(
            f"{path}: --kernel {kernel}: launch() does not launch it (a helper of another kernel has no slot); "
            f"name one it launches: {', '.join(launched) or 'none'}"
        )
    return kernel


def run_device(device: str, command: str) -> str:
    """The device label of a kernel-file run; on ``cuda`` a GPU is asked for first (one line if there is
    none). ``cpu`` is the CPU tests' device (Triton's interpreter)."""
    if device != "cuda":
        return "cpu"
    from kernelopt.pipeline.optimize import require_gpu

    require_gpu(command)
    return device_label()


def file_facts(
    worker: PersistentWorker,
    spec: FileSpec,
    store: Store,
    label: str,
    peak: float | None,
    timeout_s: float,
    trials: int | None = None,
) -> dict[str, Any]:
    """The file's shapes, the original's time in a clean worker and its roofline floor, from the worker;
    a peak bandwidth it had to measure is kept in the store for the device. A file that fails there is
    one error line naming where it raised."""
    extra = () if trials is None else (trials,)
    call = worker.call(f"{FILE_SESSION}:file_facts", asdict(spec), peak, *extra, timeout_s=timeout_s)
    if not call.ok:
        where = f" (at {call.origin})" if call.origin else ""
        raise KerneloptError(f"{spec.path}: the original file failed in the worker: {call.reason}{where}")
    facts = dict(call.value)
    if facts.get("peak_gbps") and peak is None and spec.device == "cuda":
        store.set_device_bandwidth(label, float(facts["peak_gbps"]), {"source": "kernel-file facts"})
    return facts


def _run(
    kernel_file: KernelFile,
    store: Store,
    run_id: int,
    spec: FileSpec,
    ops: list[Operator],
    operators: list[str],
    policy: str,
    budget: Budget,
    settings: GateSettings,
    config: Settings,
    label: str,
    seed: int,
    device: str,
    notify: Callable[[str, dict[str, Any]], None],
) -> FileReport:
    """The worker's part of a run: facts, the Helion stage, the search and the final check."""
    with PersistentWorker(env={**compile_cache_env(config), **HELION_ENV}) as worker:
        peak = store.device_bandwidth(label) if device == "cuda" else None
        facts = file_facts(worker, spec, store, label, peak, config.eval_timeout_s)
        report = FileReport(
            name=kernel_file.name,
            kind=kernel_file.kind,
            run_id=run_id,
            device=label,
            original_us=facts["original"]["median_us"],
            min_time_us=facts.get("min_time_us"),
            kernel=spec.kernel,
        )
        if kernel_file.kind == HELION:
            near = _near_roofline(report, budget)
            autotune = "helion-autotune" in operators and near is None
            report.helion = facts["helion"] = _helion_stage(
                store, run_id, worker, spec, peak, autotune, config, budget, notify, len(kernel_file.kernels)
            )
            if "helion-autotune" in operators and near is not None:
                report.helion["skipped"] = near  # the search would stop before judging its choice
        counters = None
        if "llm" in operators and spec.kernel is not None:  # what the Analyst reads, as in a model run
            counters, reason = file_ncu_counters(store, run_id, worker, spec, notify)
            report.ncu = f"Nsight Compute: {reason} (the Analyst's counters)" if counters else None
        evaluator = FileEvaluator(worker, spec, settings, facts.get("peak_gbps"), config.eval_timeout_s)
        nodes = NodeStore(store, run_id)
        root = Candidate(kernel_file.name, "root", source=kernel_file.source)
        # the agents' view of a Triton file: its main kernel's signature (a CUDA C++ candidate's slot), the whole
        # file as the source
        kernel = triton_kernel_def(spec.kernel, kernel_file.source) if spec.kernel is not None else None

        def context(history: list[Node]) -> SearchContext:
            return SearchContext(
                target=kernel_file.name,
                kernel=kernel,
                root_source=kernel_file.source,
                nodes=history,
                rng=random.Random(seed + len(history)),
                facts={
                    "time_us": report.original_us,
                    "min_time_us": report.min_time_us,
                    "peak_gbps": facts.get("peak_gbps"),
                    "ncu": counters,
                    "kernel_file": facts,
                },
            )

        notify("stage", {"stage": f"search on {kernel_file.name}"})
        outcome = SearchEngine(
            nodes, kernel_file.name, root, ops, make_policy(policy), budget, evaluator, context,
            on_event=notify, seed=seed,
        ).run()  # fmt: skip
        evaluated = [n for n in nodes.evaluated(kernel_file.name) if n.operator != "root"]
        report.evaluations = len(evaluated)
        report.gpu_s = gpu_seconds(evaluated)
        report.failures_by_gate = outcome.failures_by_gate
        report.stop_reason = outcome.stop_reason
        _final_check(report, evaluated, evaluator, settings, config, notify)
        tuned = [n for n in evaluated if n.operator == HelionAutotuneOperator.name and n.passed and n.fitness]
        if report.best is not None and tuned and report.best.search_speedup:
            report.over_helion_tuned = report.best.search_speedup / (tuned[0].fitness or 1.0)
    return report


def _near_roofline(report: FileReport, budget: Budget) -> str | None:
    """Why Helion's autotuner is not worth its minutes: the original already runs within the budget's
    roofline fraction, where the search stops before any candidate (on the H200 the autotuner once ran
    78 s for a choice nothing judged)."""
    ratio = SearchState(best_time_us=report.original_us, min_time_us=report.min_time_us).roofline_ratio()
    if ratio is None or ratio < budget.roofline_fraction:
        return None
    return f"the original runs at {ratio:.0%} of its roofline (>= {budget.roofline_fraction:.0%}), so no search follows"


def _helion_stage(
    store: Store,
    run_id: int,
    worker: PersistentWorker,
    spec: FileSpec,
    peak: float | None,
    autotune: bool,
    config: Settings,
    budget: Budget,
    notify: Callable[[str, dict[str, Any]], None],
    kernels: int,
) -> dict[str, Any]:
    """Each Helion kernel's default config and, for ``helion-autotune``, Helion's own autotuner's choice at
    the ``helion_effort`` setting, run once per run (a resumed run reads it back) within the
    ``helion_budget_s`` setting or the run's wall budget, whichever is shorter, which the file's
    ``kernels`` share."""
    known = store.measurements(run_id, "helion").get("helion")
    if known is not None:
        return dict(known)
    effort = config.helion_effort
    budget_s = int(min(config.helion_budget_s, budget.max_wall_s or config.helion_budget_s))
    if autotune:
        how = f"{config.helion_search}, " if config.helion_search else ""
        shared = f", shared by {kernels} kernels" if kernels > 1 else ""
        notify("stage", {"stage": f"Helion's autotuner ({how}{effort} effort, at most {budget_s} s{shared})"})
    call = worker.call(
        f"{FILE_SESSION}:helion_configs",
        asdict(spec),
        peak,
        effort if autotune else None,
        budget_s,
        config.helion_search,
        timeout_s=budget_s * 3 + 300 * kernels,  # its compiles and benchmarks can overrun its own budget
    )
    if not call.ok:
        raise KerneloptError(f"{spec.path}: Helion could not configure the kernel in the worker: {call.reason}")
    helion = dict(call.value)
    for entry in helion["kernels"]:
        if entry.get("error"):
            which = f" on {entry['kernel']}" if kernels > 1 else ""
            notify(
                "warning",
                {
                    "message": f"Helion's autotuner failed{which} ({entry['error']}); the search walks configs without it"
                },
            )
    store.add_measurement(run_id, "helion", helion)
    return helion


def _final_check(
    report: FileReport,
    evaluated: list[Node],
    evaluator: FileEvaluator,
    settings: GateSettings,
    config: Settings,
    notify: Callable[[str, dict[str, Any]], None],
) -> None:
    """The best passed candidates again with every seed and distribution and no screen; the first
    that passes is the delivery, with the re-evaluation's speedup."""
    passed = sorted(
        (n for n in evaluated if n.result and n.result.passed and (n.fitness or 0.0) > 1.0),
        key=lambda n: n.fitness or 0.0,
        reverse=True,
    )
    if not passed:
        report.final_reason = (
            f"nothing passed all four gates faster than the original ({report.stop_reason}); the original stays"
        )
        return
    evaluator.settings = final_settings(settings, config)
    reasons = []
    for node in passed[:RECHECK_ATTEMPTS]:
        notify("stage", {"stage": f"final check of node {node.id}"})
        result: EvaluationResult = evaluator.one(node.candidate.source or "")
        if result.passed and result.fitness > 1.0:
            cmp = result.measurements.get("kernel_comparison") or {}
            report.best = winner_of(node)
            report.best.verdicts = result.verdicts
            report.speedup = result.fitness
            report.speedup_iqr = (
                float(cmp.get("speedup_q1", result.fitness)),
                float(cmp.get("speedup_q3", result.fitness)),
            )
            report.optimized_us = result.measurements.get("kernel_time_us")
            report.final_reason = f"verified: {result.reason}"
            return
        reasons.append(f"node {node.id}: {result.reason}")
    report.final_reason = "no candidate passed the final check; the original stays (" + "; ".join(reasons) + ")"


def deliver(
    original_path: Path, original_source: str, report: FileReport, export_path: str | Path | None, args: dict[str, Any]
) -> tuple[str, str]:
    """Write the faster file exactly as judged, and its verification record beside it. A CUDA C++ winner
    is ``<stem>_kopt.cu``: it runs inside the original file (its record names the kernel it replaces)."""
    assert report.best is not None
    cuda = is_cuda_source(report.best.source)
    suffix = ".cu" if cuda else ".py"
    target = Path(export_path or f"{original_path.stem}_kopt{suffix}")  # importable: no dot in the module name
    if cuda and target.suffix != ".cu":
        target = target.with_suffix(".cu")  # the winner is C++: the report names the path it went to
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(report.best.source)
    record_path = target.with_suffix(".json")
    record = {
        "format": RECORD_FORMAT,
        "kind": report.kind,
        "original": {"path": str(original_path.resolve()), "sha256": _digest(original_source)},
        "delivered": {"path": str(target), "sha256": _digest(report.best.source)},
        "speedup": report.speedup,
        "speedup_iqr": list(report.speedup_iqr),
        "original_us": report.original_us,
        "optimized_us": report.optimized_us,
        "operator": report.best.operator,
        "note": report.best.note,
        "node": report.best.node,
        "run_id": report.run_id,
        "device": report.device,
        "versions": versions(),
        "sizes": args.get("sizes") or {},
        "verdicts": report.best.verdicts,
        "language": "cuda" if cuda else report.kind,
    }
    if cuda:
        record["kernel"] = report.kernel
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return str(target), str(record_path)
