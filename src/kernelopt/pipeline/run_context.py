"""What every stage of one optimize run shares (:class:`RunContext`), and the analysis it starts from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.config import Settings
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.analysis import AnalysisReport
from kernelopt.evaluate.records import ProblemAnalysis
from kernelopt.evaluate.session import GateSettings, ProblemSpec
from kernelopt.pipeline.evaluator import SESSION
from kernelopt.problem.loader import recorded_sizes, size_flags
from kernelopt.search.operators import Operator
from kernelopt.search.policy import SelectionPolicy
from kernelopt.search.termination import Budget
from kernelopt.store import Store
from kernelopt.workers.persistent import PersistentWorker


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


def analysis_of(run: RunContext, key: str = "analysis") -> ProblemAnalysis:
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


def resumed_sizes(store: Store, run_id: int, sizes: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sizes a resumed run goes on with: those it started with; other ones given now are one line."""
    started = recorded_sizes(store.run(run_id).args.get("sizes"))
    if sizes is not None and dict(sizes) != started:
        raise KerneloptError(
            f"run {run_id} was started with {size_flags(started)}: resume it with the same sizes, or leave them out"
        )
    return started or None


def replays_judged(run: RunContext, measured: AnalysisReport) -> bool:
    """Whether the final verification also judges the result as CUDA-graph replays: with the
    ``cuda_graphs`` setting at auto, for inference, where the analysis found the GPU waiting between
    launches for more than the run's margin of the forward (a launch-overhead bound above 1 + margin).
    A busy GPU has nothing for graphs to remove, and recording a big model's forward would hold a
    second copy of its buffers in each process."""
    config = run.config or Settings()
    return config.cuda_graphs == "auto" and not run.spec.train and measured.launch_overhead_bound > 1.0 + config.margin
