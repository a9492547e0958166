"""``kernelopt analyze KERNEL_FILE``: how fast the user's kernel file runs, and how far from its floor.

The kernel-file counterpart of :mod:`kernelopt.pipeline.analyze`: the file runs in the evaluation
worker (never in this process), is timed there in a process that never loads a candidate, as gate 4
reads it, and set against its roofline floor (its inputs read and its outputs written once at the
device's measured copy peak), which is what says whether a search can pay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelopt.config import Settings, resolve
from kernelopt.evaluate.file_helion import HELION_ENV
from kernelopt.evaluate.file_session import FileSpec
from kernelopt.measure.environment import versions
from kernelopt.pipeline.evaluator import compile_cache_env
from kernelopt.pipeline.optimize_file import file_facts, run_device
from kernelopt.problem.kernel_file import load_kernel_file
from kernelopt.store import Store
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker


def analyze_kernel_file(
    path: str | Path,
    store: Store,
    *,
    trials: int | None = None,
    config: Settings | None = None,
    device: str = "cuda",
    sizes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The file's shapes (``sizes``: its size constants set for this run), its time (median µs), its
    roofline floor and the share of it reached."""
    config = resolve(config, analyze_trials=trials)
    kernel_file = load_kernel_file(path, overrides=sizes)
    require_readable(kernel_file.path, "the kernel file")
    label = run_device(device, "kernelopt analyze")
    run_id = store.start_run(
        "analyze", kernel_file.name, label, versions(), {"input": kernel_file.kind, "sizes": dict(sizes or {})}
    )
    with store.recording(run_id):
        spec = FileSpec(str(kernel_file.path.resolve()), dict(sizes or {}), 0, device)
        peak = store.device_bandwidth(label) if device == "cuda" else None
        with PersistentWorker(env={**compile_cache_env(config), **HELION_ENV}) as worker:
            facts = file_facts(worker, spec, store, label, peak, config.eval_timeout_s, config.analyze_trials)
        time_us, floor = facts["original"]["median_us"], facts.get("min_time_us")
        analysis = {
            "name": kernel_file.name,
            "kind": kernel_file.kind,
            "device": label,
            "run_id": run_id,
            "time_us": time_us,
            "min_time_us": floor,
            "pct_of_roofline": 100.0 * floor / time_us if floor and time_us else None,
            **{k: facts.get(k) for k in ("inputs", "outputs", "written_inputs", "reference", "peak_gbps")},
        }
        store.add_measurement(run_id, "kernel_file_analysis", analysis)
    store.finish_run(run_id)
    return analysis
