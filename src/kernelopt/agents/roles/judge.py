"""The Judge: turns a verified attempt into an experience record.

The model writes the prose (what worked, why, when to apply, when not). The
facts come from the verifier: ``success`` and ``speedup`` in the returned record
are replaced by what the verdicts and timings say, whatever the model claimed,
and ``strategy`` by the plan's, so the experience memory counts true numbers
under the right name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelopt.agents.roles.base import Role, RoleResult, assert_no_tensors
from kernelopt.agents.roles.context import kernel_view, measurement_lines
from kernelopt.agents.roles.models import Experience, Plan
from kernelopt.capture.output_code import KernelDef
from kernelopt.verify.verdict import Verdict


def verified_faster(verdicts: Sequence[Verdict]) -> bool:
    """True when every gate ran and passed, the performance gate included."""
    return bool(verdicts) and all(v.passed for v in verdicts) and any(v.gate == "performance" for v in verdicts)


def measured_speedup(before: Mapping[str, Any], after: Mapping[str, Any] | None) -> float | None:
    """Baseline time over candidate time from ``time_us`` keys, or None when either is missing."""
    if not after:
        return None
    t0, t1 = before.get("time_us"), after.get("time_us")
    if isinstance(t0, (int, float)) and isinstance(t1, (int, float)) and t0 > 0 and t1 > 0:
        return float(t0) / float(t1)
    return None


class Judge(Role[Experience]):
    name = "judge"
    output_model = Experience

    def run(
        self,
        plan: Plan,
        kernel: KernelDef,
        before: Mapping[str, Any],
        after: Mapping[str, Any] | None,
        verdicts: Sequence[Verdict],
        speedup: float | None = None,
        bottleneck: str | None = None,
        candidate_summary: str | None = None,
    ) -> RoleResult[Experience]:
        """Write the experience record of one attempt (facts overridden by the measurements).

        ``speedup`` defaults to ``before["time_us"] / after["time_us"]``. Store the
        result with :func:`kernelopt.knowledge.memory.record`.
        """
        assert_no_tensors({"plan": plan, "kernel": kernel, "before": before, "after": after, "verdicts": verdicts})
        if speedup is None:
            speedup = measured_speedup(before, after)
        context = {
            "plan": plan,
            "kernel": kernel_view(kernel),
            "before": measurement_lines(before),
            "after": measurement_lines(after) if after else [],
            "verdicts": list(verdicts),
            "speedup": speedup,
            "bottleneck": bottleneck,
            "candidate_summary": candidate_summary,
        }
        result = self.ask(context)
        facts = {"strategy": plan.strategy, "success": verified_faster(verdicts), "speedup": speedup}
        return RoleResult(result.output.model_copy(update=facts), result.role, result.prompt_version, result.calls)
