"""Nsight Compute's counters for a kernel file's main kernel, for the Analyst of a file run.

The kernel-file counterpart of :func:`kernelopt.pipeline.kernel_facts.ncu_counters`: the same
metrics (:data:`~kernelopt.measure.ncu.ANALYST_METRICS`), the same NVTX range and
``--clock-control none``, measured once per run and kept in the store under the same key, so a
resumed run reads them back instead of profiling again. ncu runs inside the evaluation worker
(:func:`kernelopt.evaluate.file_targets.file_ncu_metrics`): the user's file never runs in our
process. Counters that could not be read are one warning line, on every run that goes on without
them (a resumed one too), never a silent absence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from kernelopt.evaluate.file_session import FileSpec
from kernelopt.evaluate.file_targets import NCU_TIMEOUT_S
from kernelopt.store import Store
from kernelopt.workers.persistent import PersistentWorker


def ncu_key(kernel: str) -> str:
    """The store key of a kernel's counters (a model run's :func:`ncu_counters` uses the same)."""
    return f"ncu/{kernel}"


def file_ncu_counters(
    store: Store,
    run_id: int,
    worker: PersistentWorker,
    spec: FileSpec,
    emit: Callable[[str, dict[str, Any]], None],
    timeout_s: float = NCU_TIMEOUT_S,
) -> tuple[dict[str, float] | None, str]:
    """The main kernel's counters and the one-line reason (read, or why not), once per run."""
    if spec.kernel is None:
        return None, "no Triton kernel to profile in this file"
    key = ncu_key(spec.kernel)
    known = store.measurements(run_id, key).get(key)
    resumed = known is not None
    if known is None:
        emit("stage", {"stage": f"Nsight Compute on {spec.kernel}"})
        call = worker.call(  # the worker's start and the file's load on top of ncu's own limit
            "kernelopt.evaluate.file_targets:file_ncu_metrics", asdict(spec), timeout_s, timeout_s=timeout_s + 120
        )
        if call.ok:
            known = dict(call.value)
        else:
            known = {"metrics": None, "reason": f"profiling in the worker failed ({call.status}: {call.reason})"}
        store.add_measurement(run_id, key, known)
    metrics, reason = known.get("metrics"), str(known.get("reason") or "")
    if metrics is None:
        when = " (recorded when the run started)" if resumed else ""
        emit(
            "warning",
            {
                "message": f"no hardware counters for {spec.kernel}{when}: {reason}; "
                "the agents work from the roofline numbers only"
            },
        )
    return metrics, reason
