"""Findings of the text- and wrapper-level static checks, and the gate-1 verdict they make.

The Triton kernel gate has its own :class:`~kernelopt.verify.static_common.Violation` (its rule
table is the Python allow-list's); the CUDA C++ gate (:mod:`~kernelopt.verify.static_cuda`) and
the wrapper gate (:mod:`~kernelopt.verify.static_wrapper`) carry their rule's explanation with
each finding and share how findings become one verdict: the most serious first, all of them in
``details["violations"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kernelopt.verify.verdict import Verdict


@dataclass(frozen=True)
class Finding:
    """One broken rule at one line, with what the rule asks for."""

    rule: str
    line: int
    construct: str
    explanation: str

    @property
    def message(self) -> str:
        return f"line {self.line}: {self.construct}; {self.explanation}"

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "line": self.line, "construct": self.construct, "message": self.message}


def findings_verdict(
    findings: Iterable[Finding], priority: Mapping[str, int], passed_reason: str, details: dict[str, object]
) -> Verdict:
    """Gate 1's verdict: failed on the most serious finding (by ``priority``, then line), else passed."""
    ordered = sorted(set(findings), key=lambda f: (priority[f.rule], f.line, f.construct))
    if not ordered:
        return Verdict("static", True, passed_reason, details)
    reason = ordered[0].message
    if len(ordered) > 1:
        reason += f" (and {len(ordered) - 1} more finding{'s' if len(ordered) > 2 else ''})"
    return Verdict(
        "static", False, reason, {"rule": ordered[0].rule, **details, "violations": [f.to_dict() for f in ordered]}
    )
