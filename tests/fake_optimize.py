"""A stand-in for ``optimize`` in bench-problem tests: returns a canned report for a run it really starts in
the store it is given, as optimize does (the bench records what it finished and timed on that run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelopt.pipeline.records import OptimizeReport


def optimizing(report: OptimizeReport) -> Callable[..., OptimizeReport]:
    def fake_optimize(path: str, store: Any, **kwargs: Any) -> OptimizeReport:
        report.run_id = store.start_run("optimize", report.problem, report.device, {}, {"path": path})
        store.finish_run(report.run_id)
        return report

    return fake_optimize
