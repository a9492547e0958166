"""What a kernel's search knows before its first candidate, each measured once per run in the
evaluation worker and kept in the store (a resumed run reads it back): Inductor's coordinate-descent
config, the kernel as Inductor writes it under structural options, Nsight Compute's counters."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernelopt.evaluate.file_targets import NCU_TIMEOUT_S
from kernelopt.evaluate.session import ProblemSpec
from kernelopt.pipeline.evaluator import SESSION
from kernelopt.pipeline.file_profile import ncu_key
from kernelopt.pipeline.run_context import RunContext
from kernelopt.search.structural import STRUCTURAL_OPTIONS
from kernelopt.store import Store
from kernelopt.workers.persistent import PersistentWorker


def inductor_tuned(
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


def structural_variants_of(run: RunContext, kernel: str) -> list[dict[str, Any]]:
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


def ncu_counters(
    store: Store,
    run_id: int,
    worker: PersistentWorker,
    spec: ProblemSpec,
    kernel: str,
    emit,
    timeout_s: float = NCU_TIMEOUT_S,
) -> dict[str, float] | None:
    """Nsight Compute metrics of the kernel's original version for the Analyst, once per run (kept in the
    store). ncu runs inside the evaluation worker (:func:`kernelopt.evaluate.worker_targets.ncu_metrics`),
    so the user's model never runs with kernelopt's environment; counters that could not be read are one
    warning line, on a resumed run too."""
    key = ncu_key(kernel)
    known = store.measurements(run_id, key).get(key)
    resumed = known is not None
    if known is None:
        emit("stage", {"stage": f"Nsight Compute on {kernel}"})
        call = worker.call(  # the worker's start on top of ncu's own limit
            f"{SESSION}:ncu_metrics", asdict(spec), kernel, timeout_s, timeout_s=timeout_s + 120
        )
        if call.ok:
            known = dict(call.value)
        else:
            known = {"metrics": None, "reason": f"profiling in the worker failed ({call.status}: {call.reason})"}
        store.add_measurement(run_id, key, known)
    if known.get("metrics") is None:
        when = " (recorded when the run started)" if resumed else ""
        emit("warning", {"message": f"no hardware counters for {kernel}{when}: {known.get('reason')}"})
    return known["metrics"]
