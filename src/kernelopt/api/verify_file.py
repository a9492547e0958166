"""``kernelopt verify KERNEL_FILE --candidate FILE``: a person's own faster kernel file through the gates.

The kernel-file counterpart of :mod:`kernelopt.api.verify`: the candidate file is read here and
held to gate 1 before any worker starts (a file the static gate refuses costs nothing), then
judged in the evaluation worker by :class:`~kernelopt.evaluate.file_session.FileSession` with the
final check's settings (every seed, distribution and edge case, memcheck on the GPU), and delivered
with its verification record when every gate passes. The candidate may be CUDA C++ (its first line
``// kernelopt: cuda``) for one ``@triton.jit`` kernel of a Triton file (``kernel``, or the only one
``launch`` launches): it is judged and delivered (``<stem>_kopt.cu``) inside the original file.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelopt.api.verify import VerifyReport, read_candidate
from kernelopt.capture.cuda_kernel import CUDA_MARKER, is_cuda_source
from kernelopt.config import Settings, resolve
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.file_helion import HELION_ENV
from kernelopt.evaluate.file_session import FileSpec
from kernelopt.evaluate.gate_settings import final_settings, search_settings
from kernelopt.measure.environment import versions
from kernelopt.pipeline.evaluator import compile_cache_env
from kernelopt.pipeline.optimize_file import FileEvaluator, FileReport, deliver, run_device
from kernelopt.pipeline.records import Winner
from kernelopt.problem.file_kind import TRITON
from kernelopt.problem.kernel_file import KernelFile, load_kernel_file
from kernelopt.store import Store
from kernelopt.verify.static_file_cuda import resolve_slot
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
    kernel: str | None = None,
    timeout_s: float | None = None,
    margin: float | None = None,
    config: Settings | None = None,
    device: str = "cuda",
    sizes: dict[str, Any] | None = None,
) -> VerifyReport:
    """Judge ``candidate_path`` as a replacement for the kernel file at ``path`` (a CUDA C++ candidate: for its
    kernel ``kernel``); deliver it if it passes. ``sizes``: the file's size constants set for the judging (its
    inputs' shapes), recorded with the run and in the delivery's verification record. ``device`` is ``cuda``
    but in the CPU tests (Triton's interpreter)."""
    config = resolve(config, verify_timeout_s=timeout_s, margin=margin)
    kernel_file = load_kernel_file(path, overrides=sizes)  # a size the file does not have stops here, in one line
    require_readable(kernel_file.path, "the kernel file")
    source = read_candidate(candidate_path)
    slot = cuda_candidate_slot(kernel_file, candidate_path, source, kernel, export_path)
    static = check_static_file(kernel_file.kind, source, original_source=kernel_file.source, kernel=slot)
    name, replaced = kernel_file.name, slot or kernel_file.entry_name  # what is replaced: the file, or its kernel
    sizes = dict(kernel_file.overrides)
    if not static.passed:
        return VerifyReport(
            problem=name, kernel=replaced, passed=False, verdicts=[static], kind=kernel_file.kind, sizes=sizes
        )
    label = run_device(device, "kernelopt verify")
    args = {
        "input": kernel_file.kind,
        "candidate": str(candidate_path),
        "margin": config.margin,
        "settings": config.values(),
        "sizes": sizes,
    }
    run_id = store.start_run("verify", name, label, versions(), args)
    with store.recording(run_id):
        spec = FileSpec(str(kernel_file.path.resolve()), sizes, 0, device, slot)
        settings = final_settings(search_settings(config), config)
        peak = store.device_bandwidth(label) if device == "cuda" else None
        with PersistentWorker(env={**compile_cache_env(config), **HELION_ENV}) as worker:
            result = FileEvaluator(worker, spec, settings, peak, config.verify_timeout_s).one(source)
        cmp = result.measurements.get("kernel_comparison")
        report = VerifyReport(
            problem=name,
            kernel=replaced,
            passed=result.passed and result.fitness > 1.0,
            verdicts=[Verdict.from_dict(v) for v in result.verdicts],
            kernel_speedup=cmp,
            run_id=run_id,
            kind=kernel_file.kind,
            sizes=sizes,
        )
        build_s = result.measurements.get("build_s")
        if build_s is not None:  # nvcc's time, apart from the gates'
            report.raw["build_s"] = build_s
            report.raw["gates_s"] = max(0.0, float(result.measurements.get("gpu_s", 0.0)) - float(build_s))
        if report.passed and cmp:
            delivery = FileReport(
                name, kernel_file.kind, run_id, label, cmp["baseline"]["median_ms"] * 1000.0, None,
                speedup=result.fitness, speedup_iqr=(float(cmp["speedup_q1"]), float(cmp["speedup_q3"])),
                optimized_us=cmp["candidate"]["median_ms"] * 1000.0,
                best=Winner("verify", f"your file {candidate_path}", source, result.verdicts), kernel=slot,
            )  # fmt: skip
            report.exported, _record = deliver(
                kernel_file.path, kernel_file.source, delivery, export_path, {"sizes": sizes}
            )
        store.add_measurement(run_id, "evaluation", {**report.to_dict(), "result": asdict(result)})
    store.finish_run(run_id)
    return report


def cuda_candidate_slot(
    kernel_file: KernelFile, candidate_path: Path, source: str, kernel: str | None, export_path: str | Path | None
) -> str | None:
    """The kernel a CUDA C++ candidate replaces (None for a Python candidate); a request that cannot work is
    one line naming the problem and the fix."""
    cuda = is_cuda_source(source)
    if candidate_path.suffix == ".cu" and not cuda:
        raise KerneloptError(
            f"{candidate_path}: a CUDA C++ candidate's first line must be `{CUDA_MARKER}`; add it "
            "(a Python candidate is a whole kernel file ending in .py)"
        )
    if not cuda:
        if kernel is not None:
            raise KerneloptError(
                f"--kernel names the kernel a CUDA C++ candidate replaces; {candidate_path} is a whole kernel "
                "file: leave --kernel out"
            )
        return None
    if kernel_file.kind != TRITON:
        raise KerneloptError(
            f"{candidate_path}: CUDA C++ replaces a @triton.jit kernel, and {kernel_file.path} is a "
            f"{kernel_file.kind} kernel file, whose candidates are helion.Config choices: pass a .py candidate"
        )
    if export_path is not None and Path(export_path).suffix != ".cu":
        raise KerneloptError(f"--export {export_path}: a CUDA C++ delivery is a .cu file; name one ending in .cu")
    try:
        return resolve_slot(kernel_file.source, kernel)
    except ValueError as exc:
        raise KerneloptError(f"{kernel_file.path}: {exc}") from None
