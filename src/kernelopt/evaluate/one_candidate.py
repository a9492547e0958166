"""One evaluation: a candidate kernel through the four gates, inside a worker process.

:func:`evaluate` is the worker's target (``kernelopt.evaluate.one_candidate:evaluate``):
it rebuilds the problem, captures the compiled model, and runs the gates in
order, stopping at the first that fails. It prints a stage marker before each
gate so that when the process dies (illegal memory access, hang, out of memory)
the parent can say which gate it died in. :func:`verify_candidate` is the
parent side: it runs the worker with a timeout and turns any ending into
verdicts.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.config import default_of
from kernelopt.evaluate.session import STAGE_MARK


@dataclass
class EvaluationRequest:
    problem_path: str
    kernel: str
    candidate_source: str
    graph: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    peak_gbps: float | None = None
    kernel_seeds: tuple[int, ...] = default_of("kernel_seeds")
    model_seeds: tuple[int, ...] = default_of("model_seeds")
    trials: int = default_of("trials")
    margin: float = default_of("margin")
    max_error_ratio: float = 10.0
    train: bool = False  # the problem's training step (forward and backward kernels, gradients judged)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """Run the gates for one candidate in a fresh session; returns plain data."""
    from kernelopt.evaluate.session import EvaluationSession, GateSettings, ProblemSpec

    req = EvaluationRequest(**request)
    spec = ProblemSpec(req.problem_path, req.overrides, req.seed, req.options, req.train)
    session = EvaluationSession(spec, req.peak_gbps)
    settings = GateSettings(req.kernel_seeds, req.model_seeds, req.trials, req.margin, req.max_error_ratio)
    try:
        result = session.evaluate(req.kernel, req.candidate_source, settings)
    finally:
        session.close()
    if session._peak is not None:
        result["peak_gbps"] = session._peak
    return result


def crash_stage(stderr_tail: str) -> str:
    """The last stage the worker announced before it ended ("capture" if none)."""
    marks = [line.split(STAGE_MARK, 1)[1].strip() for line in stderr_tail.splitlines() if STAGE_MARK in line]
    return marks[-1] if marks else "capture"


def gate_of_stage(stage: str) -> str:
    """The gate charged with a worker that died in ``stage`` (capture counts as correctness:
    the candidate never got a fair run)."""
    from kernelopt.verify.verdict import GATES

    return stage if stage in GATES else "correctness"


def verify_candidate(
    request: EvaluationRequest, timeout_s: float = default_of("verify_timeout_s"), gpu: int | None = None
) -> dict[str, Any]:
    """Run :func:`evaluate` in an isolated worker; a crash, hang or OOM becomes a failed verdict."""
    from kernelopt.verify.verdict import Verdict
    from kernelopt.workers import run_isolated

    src_root = str(Path(__file__).resolve().parents[2])
    outcome = run_isolated(
        "kernelopt.evaluate.one_candidate:evaluate",
        request.to_dict(),
        timeout_s=timeout_s,
        gpu=gpu,
        extra_path=[src_root],
    )
    if outcome.ok:
        return dict(outcome.value)
    stage = crash_stage(outcome.stderr_tail)
    gate = gate_of_stage(stage)
    reason = f"the evaluation worker ended in the {stage} stage: {outcome.status}: {outcome.reason}"
    return {
        "verdicts": [Verdict(gate, False, reason, {"worker": outcome.to_dict(), "stage": stage}).to_dict()],
        "passed": False,
        "worker_status": outcome.status,
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run through kernelopt verify")
