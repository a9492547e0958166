"""``kernelopt analyze FILE``: the analysis of a problem file, run in a worker.

A problem file is code we did not write: it may loop, exit or flood at import or
in its forward. The CLI therefore never executes it in its own process; a
one-shot worker loads, captures, times and attributes it
(``evaluate.worker_targets.analyze_problem``, the same analysis ``optimize``
starts from), and whatever ends that worker ends the run failed, in one line.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelopt.config import Settings, resolve
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.analysis import AnalysisReport
from kernelopt.evaluate.records import ProblemAnalysis
from kernelopt.evaluate.session import ProblemSpec
from kernelopt.measure.environment import device_label, versions
from kernelopt.pipeline.evaluator import SESSION, compile_cache_env
from kernelopt.pipeline.optimize import require_gpu
from kernelopt.pipeline.stock_modes import time_stock_modes
from kernelopt.problem.loader import check_size_names
from kernelopt.store import Store
from kernelopt.workers import run_isolated
from kernelopt.workers.identity import require_readable


def analyze_file(
    problem_path: str | Path,
    store: Store,
    *,
    seed: int = 0,
    trials: int | None = None,
    config: Settings | None = None,
    stock_modes: bool = False,
    train: bool = False,
    sizes: dict[str, Any] | None = None,
) -> AnalysisReport:
    """Capture, time and attribute one problem file in a worker; the run is recorded in ``store``.
    ``stock_modes``: also time each mode of the ``stock_modes`` setting against the default, each in
    a process of its own (:mod:`kernelopt.pipeline.stock_modes`). ``train``: the problem's training
    step, forward and backward (:mod:`kernelopt.problem.training`). ``sizes``: the file's size constants
    set for this run (checked here, before any worker starts)."""
    path = Path(problem_path).resolve()
    if not path.is_file():
        raise KerneloptError(f"{problem_path}: no such problem file")
    check_size_names(path, sizes)
    require_gpu("kernelopt analyze")
    config = resolve(config, analyze_trials=trials)
    require_readable(path, "the problem file")
    label = device_label()
    run_id = store.start_run(
        "analyze", path.stem, label, versions(), {"seed": seed, "train": train, "sizes": dict(sizes or {})}
    )
    with store.recording(run_id):
        outcome = run_isolated(
            f"{SESSION}:analyze_problem",
            asdict(ProblemSpec(str(path), dict(sizes or {}), seed, {}, train=train)),
            store.device_bandwidth(label),
            config.analyze_trials,
            timeout_s=config.eval_timeout_s,
            env=compile_cache_env(config),
        )
        if not outcome.ok:
            raise KerneloptError(f"{path.name}: the analysis failed in its worker: {outcome.status}: {outcome.reason}")
        report = ProblemAnalysis.from_dict(outcome.value).report
        if store.device_bandwidth(label) is None:
            store.set_device_bandwidth(label, report.peak_gbps, {"source": "analyze"})
        report.run_id = run_id
        if stock_modes:
            report.stock = time_stock_modes(
                str(path), config.stock_modes.split(","), seed=seed, train=train, overrides=sizes
            )
        store.add_measurement(run_id, "analysis", report.to_dict())
    store.finish_run(run_id)
    return report
