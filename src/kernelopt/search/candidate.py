"""Candidates and the result of evaluating one.

A :class:`Candidate` is what an operator proposes: a full replacement module
source for one kernel, or a set of Inductor options for the whole model (target
:data:`MODEL_TARGET`), optionally with a pinned launch config. It is plain,
JSON-able data so it survives the store and the worker process boundary.

Its :meth:`Candidate.key` is the identity the search deduplicates on. Two
proposals that differ only in comments, blank lines or trailing whitespace
compile to the same kernel, so they share a key and the second is never
evaluated: evaluations are the scarce resource (a GPU-minute buys tens of
them), proposals are cheap.

An :class:`EvaluationResult` is the outcome of one trip through the four gates.
Its ``fitness`` is the verified speedup over the original kernel, and 0.0 when
any gate failed, so a failed candidate can never rank above one that passed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MODEL_TARGET = "<model>"
"""The target of whole-model candidates (Inductor options judged end to end)."""


def normalize_source(source: str) -> str:
    """``source`` as a program, not as text: the dump of its syntax tree, so comments,
    blank lines, spacing, quote style and redundant parentheses do not make two
    candidates differ (the compiler sees neither). Source that does not parse keeps
    a text form: comment-only, blank and trailing-space differences dropped,
    indentation kept (it is syntax).
    """
    try:
        return ast.dump(ast.parse(source), annotate_fields=False)
    except (SyntaxError, ValueError):
        pass
    lines = []
    for line in source.splitlines():
        stripped = line.rstrip()
        if not stripped or stripped.lstrip().startswith("#"):
            continue
        lines.append(stripped)
    return "\n".join(lines)


def _canonical_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"candidate {what} must be JSON-serializable ({exc})") from exc


@dataclass(frozen=True)
class Candidate:
    """One proposed replacement for a target.

    ``source``: the full replacement kernel module source (kernel targets).
    ``options``: Inductor config options (the model target).
    ``config``: the launch config, when an operator pinned one.
    ``operator``: the name of what proposed it (``root`` for the original).
    ``note``: a human-readable line on what changed; not part of the identity.
    """

    target: str
    operator: str
    source: str | None = None
    options: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    note: str = ""
    _key: str | None = field(default=None, init=False, repr=False, compare=False)  # computed once, on demand

    def __post_init__(self) -> None:
        if not self.target:
            raise ValueError("a candidate needs a target (a kernel name or MODEL_TARGET)")
        if not self.operator:
            raise ValueError("a candidate needs the name of the operator that made it")
        # Private copies: a frozen dataclass cannot stop a caller mutating a dict it
        # still holds, and the key must not change under the store's feet.
        for name in ("options", "config"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, dict(value))
                _canonical_json(value, name)  # fail at the operator, not at the store

    def key(self) -> str:
        """Hex sha256 of what the candidate would compile to: normalized source, options, config.
        Parsed once per candidate (the fields cannot change): hashing and dedup call it often."""
        if self._key is None:
            identity = {
                "source": normalize_source(self.source) if self.source is not None else None,
                "options": self.options,
                "config": self.config,
            }
            object.__setattr__(self, "_key", hashlib.sha256(_canonical_json(identity, "identity").encode()).hexdigest())
        assert self._key is not None
        return self._key

    def __hash__(self) -> int:  # the dict fields are unhashable; equal candidates share a key
        return hash(self.key())

    def to_payload(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "operator": self.operator,
            "source": self.source,
            "options": self.options,
            "config": self.config,
            "note": self.note,
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(
            target=data["target"],
            operator=data["operator"],
            source=data.get("source"),
            options=data.get("options"),
            config=data.get("config"),
            note=data.get("note") or "",
        )


@dataclass
class EvaluationResult:
    """The outcome of one evaluation of a candidate.

    ``fitness``: the verified speedup over the original kernel; 0.0 when a gate failed.
    ``failed_gate``: the first gate that failed, or None (passed, or the worker died
    before any gate answered: then ``worker_status`` says how, e.g. ``timeout``).
    ``verdicts``: each gate's :meth:`kernelopt.verify.Verdict.to_dict`.
    ``measurements``: numbers worth keeping; the engine reads ``gpu_s`` (GPU seconds
    this evaluation used, for the GPU-time budget) and ``kernel_time_us`` (the
    candidate's median time, for the roofline stop).
    """

    passed: bool
    fitness: float
    failed_gate: str | None
    reason: str
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    worker_status: str = "ok"

    def __post_init__(self) -> None:
        self.fitness = float(self.fitness)
        if not math.isfinite(self.fitness) or self.fitness < 0:
            raise ValueError(f"fitness must be a finite speedup >= 0, got {self.fitness}")
        if not self.passed and self.fitness != 0.0:
            raise ValueError(f"a failed evaluation has fitness 0.0, got {self.fitness}")
        if self.passed and self.failed_gate is not None:
            raise ValueError(f"a passed evaluation cannot name a failed gate ({self.failed_gate})")
        self.reason = " ".join(str(self.reason).split())

    @classmethod
    def failure(cls, gate: str | None, reason: str, worker_status: str = "ok", **kwargs: Any) -> EvaluationResult:
        """A failed evaluation: fitness 0, the gate (None when no gate answered) and its reason."""
        return cls(passed=False, fitness=0.0, failed_gate=gate, reason=reason, worker_status=worker_status, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "fitness": self.fitness,
            "failed_gate": self.failed_gate,
            "reason": self.reason,
            "verdicts": [dict(v) for v in self.verdicts],
            "measurements": dict(self.measurements),
            "worker_status": self.worker_status,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationResult:
        return cls(
            passed=bool(data["passed"]),
            fitness=float(data["fitness"]),
            failed_gate=data.get("failed_gate"),
            reason=data.get("reason") or "",
            verdicts=[dict(v) for v in data.get("verdicts") or []],
            measurements=dict(data.get("measurements") or {}),
            worker_status=data.get("worker_status") or "ok",
        )
