"""What both judges share (a captured model's and a kernel file's): one evaluation's stages and clock,
and the verdicts of the steps both take.

:class:`Stages` announces each stage (so a parent can say where a dead worker died), keeps the
seconds each took and the evaluation's whole time, and turns a candidate process that died into a
failure at the gate it was in. The screen and memcheck verdicts read the same in both judges.
"""

from __future__ import annotations

import time
from typing import Any

from kernelopt.capture.rewrites import row_softmax_op
from kernelopt.evaluate.remote import RunnerDied
from kernelopt.verify.verdict import Verdict

STAGE_MARK = "kernelopt-stage:"
DYNAMIC_GATES = ("correctness", "model", "performance")


def stage(name: str) -> None:
    """Announce a stage, so a parent can say where a dead worker died."""
    print(f"{STAGE_MARK} {name}", flush=True)


class Stages:
    """One evaluation's result record, its current stage and the seconds of each stage."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.timings: dict[str, float] = {}
        result["timings"] = self.timings
        self.started = self._clock = time.monotonic()
        self.current = "static"

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.timings[name] = round(now - self._clock, 6)
        self._clock = now

    def enter(self, name: str) -> None:
        self.current = name
        stage(name)

    def done(self, verdict: Verdict | None = None) -> dict[str, Any]:
        if verdict is not None:
            self.result["verdicts"].append(verdict.to_dict())
        self.result["gpu_s"] = time.monotonic() - self.started
        return self.result

    def died(self, exc: RunnerDied) -> dict[str, Any]:
        """The candidate's process ended or hung: a failure at the gate it was in."""
        gate = self.current if self.current in DYNAMIC_GATES else "correctness"
        self.result["worker_status"] = exc.outcome.status
        return self.done(
            Verdict(
                gate,
                False,
                f"{exc} (in the {self.current} stage)",
                {"rule": "candidate_process", "stage": self.current, "worker": exc.outcome.to_dict()},
            )
        )


def screened_out(speedup: float, trials: int, minimum: float) -> Verdict:
    """The performance failure of a candidate the short timing screen found too slow."""
    return Verdict(
        "performance",
        False,
        f"screened out: {speedup:.3f}x in a {trials}-trial interleaved run "
        f"(below {minimum:g}x); correctness and model gates not run",
    )


def memcheck_failure(memcheck: Any, where: str) -> Verdict:
    """The correctness failure of a candidate memcheck found fault with (``where``: what it replayed)."""
    return Verdict(
        "correctness",
        False,
        f"memcheck on {where}: {memcheck.reason}",
        {"rule": "memcheck", "memcheck": memcheck.to_dict()},
    )


def fell_back(lines: list[str]) -> Verdict | None:
    """The model failure of a candidate whose kernelopt op was computed by torch in its process (``lines``:
    :func:`~kernelopt.capture.rewrites.row_softmax_op.fallbacks_since`), refused before any timing; None where none was."""
    if not lines:
        return None
    reason = row_softmax_op.fallback_verdict(lines)
    return Verdict("model", False, reason, {"rule": "fallback", "fallbacks": list(lines)})
