"""``kernelopt verify``: a person's own kernel through the four gates, and the model it makes.

The candidate runs in an isolated worker (``evaluate.one_candidate``); this side reads
the candidate, supplies the peak bandwidth from the store, records the
evaluation, and exports the re-stitched model when every gate passes.

The original kernel's source is only known after the worker has captured the
problem, so before any worker starts this side runs the candidate-only part of
gate 1 (:func:`~kernelopt.verify.static.check_static_candidate`: module shape,
forbidden constructs, kernel bodies, import-time values) and refuses a
candidate it rejects without paying for a capture. The full gate 1, relative to
the original (precision, masks, inline asm, signature), runs in the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture.swap import KernelAddress
from kernelopt.config import Settings, resolve
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.one_candidate import EvaluationRequest, verify_candidate
from kernelopt.measure.environment import device_label, versions
from kernelopt.measure.peak import peak_bandwidth
from kernelopt.problem import load_problem
from kernelopt.problem.loader import check_size_names
from kernelopt.store import Store
from kernelopt.verify.static import check_static_candidate
from kernelopt.verify.verdict import Verdict
from kernelopt.workers.identity import require_readable


@dataclass
class VerifyReport:
    problem: str
    kernel: str
    passed: bool
    verdicts: list[Verdict]
    kernel_speedup: dict[str, Any] | None = None
    end_to_end: dict[str, Any] | None = None
    exported: str | None = None
    run_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    kind: str = "model"  # what was verified against: a model's kernel, or a kernel file ("triton", "helion")
    sizes: dict[str, Any] = field(default_factory=dict)  # the file's size constants set for the verification

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "kernel": self.kernel,
            "passed": self.passed,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "kernel_speedup": self.kernel_speedup,
            "end_to_end": self.end_to_end,
            "exported": self.exported,
            "run_id": self.run_id,
            "kind": self.kind,
            "sizes": self.sizes,
        }


def read_candidate(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise KerneloptError(
            f"{path}: cannot read the candidate kernel ({exc}); pass a Python file with the kernel, or CUDA C++"
        ) from exc


def verify(
    problem_path: Path,
    kernel: str,
    candidate_path: Path,
    store: Store | None = None,
    export_path: Path | None = None,
    timeout_s: float | None = None,
    trials: int | None = None,
    margin: float | None = None,
    config: Settings | None = None,
    train: bool = False,
    sizes: dict[str, Any] | None = None,
) -> VerifyReport:
    """Verify one candidate for one kernel of a problem; export the model if it passes
    (``train``: a kernel of the problem's training step, forward or backward). ``sizes``: the
    problem's size constants set for this verification (checked before anything runs); the
    export carries them, so :func:`kernelopt.load` rebuilds the model at the sizes verified.

    ``timeout_s``, ``trials`` and ``margin`` left as None come from ``config`` (default:
    :func:`~kernelopt.config.load_settings`): ``verify_timeout_s``, ``trials``, ``margin``,
    and the gates' seeds ``kernel_seeds`` and ``model_seeds``."""
    config = resolve(config, verify_timeout_s=timeout_s, trials=trials, margin=margin)
    check_size_names(problem_path, sizes)
    source = read_candidate(candidate_path)
    static = check_static_candidate(source, kernel_name=kernel)
    if not static.passed:
        return VerifyReport(
            problem=Path(problem_path).stem, kernel=kernel, passed=False, verdicts=[static], sizes=dict(sizes or {})
        )
    if not torch.cuda.is_available():
        raise KerneloptError("kernelopt verify needs an NVIDIA GPU with CUDA; torch sees none")
    problem = load_problem(problem_path, overrides=sizes, train=train)
    require_readable(problem.path, "the problem file")
    request = EvaluationRequest(
        problem_path=str(problem.path.resolve()),
        kernel=kernel,
        candidate_source=source,
        peak_gbps=peak_bandwidth(store),
        kernel_seeds=config.kernel_seeds,
        model_seeds=config.model_seeds,
        trials=config.trials,
        margin=config.margin,
        train=train,
        overrides=dict(problem.overrides),
    )
    run_id = None
    if store is not None:
        run_id = store.start_run(
            "verify",
            problem.name,
            device_label(),
            versions(),
            {
                "kernel": kernel,
                "candidate": str(candidate_path),
                "margin": config.margin,
                "settings": config.values(),
                "sizes": dict(problem.overrides),
            },
        )
    try:
        report = _judge(request, problem, kernel, source, export_path, run_id, config.verify_timeout_s)
    except BaseException as exc:  # the run is not left marked running, whatever ended it
        if store is not None and run_id is not None:
            store.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
        raise
    if store is not None and run_id is not None:
        store.add_measurement(run_id, "evaluation", report.to_dict())
        store.finish_run(run_id)
    return report


def _judge(
    request: EvaluationRequest,
    problem: Any,
    kernel: str,
    source: str,
    export_path: Path | None,
    run_id: int | None,
    timeout_s: float,
) -> VerifyReport:
    """The candidate through the gates in a worker, and the export when it passes."""
    result = verify_candidate(request, timeout_s=timeout_s)
    verdicts = [Verdict.from_dict(v) for v in result["verdicts"]]
    report = VerifyReport(
        problem=problem.name,
        kernel=kernel,
        passed=bool(result.get("passed")),
        verdicts=verdicts,
        kernel_speedup=result.get("kernel_comparison"),
        end_to_end=result.get("end_to_end"),
        run_id=run_id,
        raw=result,
        sizes=dict(problem.overrides),
    )
    if report.passed:
        target = export_path or Path(f"{problem.path.stem}.{kernel}.kopt.json")
        replacement = Replacement(KernelAddress.from_dict(result["address"]), source)
        report.exported = str(export_model(target, problem, [replacement], report.to_dict(), seed=request.seed))
    return report
