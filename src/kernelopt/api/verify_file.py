"""``kernelopt verify KERNEL_FILE --candidate FILE``: a person's own faster kernel file through the gates.

The kernel-file counterpart of :mod:`kernelopt.api.verify`: the candidate file is read here and
held to gate 1 before any worker starts (a file the static gate refuses costs nothing), then
judged in the evaluation worker by :class:`~kernelopt.evaluate.file_session.FileSession` with the
final check's settings (every seed, distribution and edge case, memcheck on the GPU), and delivered
with its verification record when every gate passes.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from kernelopt.api.verify import VerifyReport, read_candidate
from kernelopt.config import Settings, resolve
from kernelopt.evaluate.file_helion import HELION_ENV
from kernelopt.evaluate.file_session import FileSpec
from kernelopt.evaluate.gate_settings import final_settings, search_settings
from kernelopt.measure.environment import versions
from kernelopt.pipeline.evaluator import compile_cache_env
from kernelopt.pipeline.optimize_file import FileEvaluator, FileReport, deliver, run_device
from kernelopt.pipeline.records import Winner
from kernelopt.problem.kernel_file import load_kernel_file
from kernelopt.store import Store
from kernelopt.verify.static_kernel_file import check_static_file
from kernelopt.verify.verdict import Verdict
from kernelopt.workers.identity import require_readable
from kernelopt.workers.persistent import PersistentWorker


def verify_file(
    path: str | Path,
    candidate_path: Path,
    store: Store,
    export_path: str | Path | None = None,
    *,
    timeout_s: float | None = None,
    margin: float | None = None,
    config: Settings | None = None,
    device: str = "cuda",
) -> VerifyReport:
    """Judge ``candidate_path`` as a replacement for the kernel file at ``path``; deliver it if it passes.
    ``device`` is ``cuda`` but in the CPU tests (Triton's interpreter)."""
    config = resolve(config, verify_timeout_s=timeout_s, margin=margin)
    kernel_file = load_kernel_file(path)
    require_readable(kernel_file.path, "the kernel file")
    source = read_candidate(candidate_path)
    static = check_static_file(kernel_file.kind, source, original_source=kernel_file.source)
    name, entry = kernel_file.name, kernel_file.entry_name
    if not static.passed:
        return VerifyReport(problem=name, kernel=entry, passed=False, verdicts=[static], kind=kernel_file.kind)
    label = run_device(device, "kernelopt verify")
    args = {
        "input": kernel_file.kind,
        "candidate": str(candidate_path),
        "margin": config.margin,
        "settings": config.values(),
    }
    run_id = store.start_run("verify", name, label, versions(), args)
    with store.recording(run_id):
        spec = FileSpec(str(kernel_file.path.resolve()), {}, 0, device)
        settings = final_settings(search_settings(config), config)
        peak = store.device_bandwidth(label) if device == "cuda" else None
        with PersistentWorker(env={**compile_cache_env(config), **HELION_ENV}) as worker:
            result = FileEvaluator(worker, spec, settings, peak, config.verify_timeout_s).one(source)
        cmp = result.measurements.get("kernel_comparison")
        report = VerifyReport(
            problem=name,
            kernel=entry,
            passed=result.passed and result.fitness > 1.0,
            verdicts=[Verdict.from_dict(v) for v in result.verdicts],
            kernel_speedup=cmp,
            run_id=run_id,
            kind=kernel_file.kind,
        )
        if report.passed and cmp:
            delivery = FileReport(
                name, kernel_file.kind, run_id, label, cmp["baseline"]["median_ms"] * 1000.0, None,
                speedup=result.fitness, speedup_iqr=(float(cmp["speedup_q1"]), float(cmp["speedup_q3"])),
                optimized_us=cmp["candidate"]["median_ms"] * 1000.0,
                best=Winner("verify", f"your file {candidate_path}", source, result.verdicts),
            )  # fmt: skip
            report.exported, _record = deliver(
                kernel_file.path, kernel_file.source, delivery, export_path, {"sizes": {}}
            )
        store.add_measurement(run_id, "evaluation", {**report.to_dict(), "result": asdict(result)})
    store.finish_run(run_id)
    return report
