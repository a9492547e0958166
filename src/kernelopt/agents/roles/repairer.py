"""The Repairer: fixes a candidate from the report of the gate it failed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kernelopt.agents.roles.base import Role, RoleResult, assert_no_tensors, trim
from kernelopt.agents.roles.coder import SLOT, contract_problem
from kernelopt.agents.roles.context import kernel_view, launch_view
from kernelopt.agents.roles.models import KernelCandidate, Plan
from kernelopt.capture.output_code import KernelDef
from kernelopt.verify.verdict import Verdict

MAX_DETAILS_CHARS = 3000


def details_text(verdict: Verdict, max_chars: int = MAX_DETAILS_CHARS) -> str:
    """The verdict's details as trimmed JSON: long strings and lists cut, head and tail kept."""
    if not verdict.details:
        return ""
    text = json.dumps(trim(verdict.details), indent=1, sort_keys=True, default=str)
    return text if len(text) <= max_chars else text[: max_chars - 20] + "\n... (cut)"


class Repairer(Role[KernelCandidate]):
    name = "repairer"
    output_model = KernelCandidate

    def run(
        self,
        candidate: KernelCandidate,
        verdict: Verdict,
        kernel: KernelDef,
        plan: Plan | None = None,
        launch: Mapping[str, Any] | None = None,
        target: str = SLOT,
    ) -> RoleResult[KernelCandidate]:
        """Fix ``candidate`` (a replacement for ``kernel``, or with ``target`` "file" for the user's whole
        kernel file) so that it passes the gate that failed."""
        if verdict.passed:
            raise ValueError(f"the {verdict.gate} gate passed; there is nothing to repair")
        assert_no_tensors({"candidate": candidate, "verdict": verdict, "kernel": kernel, "launch": launch})
        from kernelopt.capture.cuda_kernel import is_cuda_source

        language = "cuda" if is_cuda_source(candidate.source) else "triton"  # a repair keeps the language
        context = {
            "language": language,
            "target": target,
            "candidate": candidate,
            "verdict": verdict,
            "details": details_text(verdict),
            "plan": plan,
            "kernel": kernel_view(kernel),
            "launch": launch_view(launch),
        }
        return self.ask(context, lambda fixed: contract_problem(fixed.source, kernel, language, target))
