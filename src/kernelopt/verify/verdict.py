"""The outcome of one verification gate.

Every gate (static, correctness, model, performance) answers with a
:class:`Verdict`: pass or fail, one line a person can read, and structured
details for the store and the report. A verdict is plain data so that a worker
process can send it back as JSON and the store can keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GATES = ("static", "correctness", "model", "performance")


@dataclass(frozen=True)
class Verdict:
    """One gate's answer about one candidate.

    ``reason`` is a single line (whitespace is collapsed), e.g.
    ``"line 14: calls torch.matmul; a candidate must compute in Triton, not PyTorch"``.
    ``details`` must be JSON-serializable so the verdict survives a process
    boundary and the store.
    """

    gate: str
    passed: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gate not in GATES:
            raise ValueError(f"unknown gate {self.gate!r}; expected one of {', '.join(GATES)}")
        object.__setattr__(self, "reason", " ".join(str(self.reason).split()))
        object.__setattr__(self, "details", dict(self.details))

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "passed": self.passed, "reason": self.reason, "details": dict(self.details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            gate=data["gate"],
            passed=bool(data["passed"]),
            reason=data["reason"],
            details=dict(data.get("details") or {}),
        )

    def __str__(self) -> str:
        return f"{self.gate}: {'pass' if self.passed else 'FAIL'}: {self.reason}"
